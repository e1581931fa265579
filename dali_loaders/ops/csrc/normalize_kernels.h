// The last step of a CPU graph (DaliLoadersNormalize, normalize_op.cc): an HWC uint8 image,
// flipped horizontally or not, converted and normalized per channel, written CHW or HWC.
// float32 out: (float(v) - mean[c]) * inv_std[c], rounded one operation at a time, which is
// what DALI's crop_mirror_normalize computes on the CPU (so the two agree bit for bit);
// uint8 out: the pixels as they are (a layout change and the flip, no arithmetic).
// Compiled at -O3 with floating-point contraction off; the AVX2 path is picked at run time.
#pragma once

#include <cstdint>

namespace normk {

struct Image {
  const uint8_t* pixels;   // HWC
  int height, width, channels;
  bool mirror;             // horizontal flip
};

// out: channels x height x width when chw, else height x width x channels.
// mean and inv_std: one value per channel.
void to_float(const Image& in, float* out, bool chw, const float* mean, const float* inv_std, bool simd);
void to_uint8(const Image& in, uint8_t* out, bool chw);

bool have_avx2();

}  // namespace normk

// For an array source's feeder (ops/gather.py, through ctypes): n images of a C-contiguous
// (count, h, w, c) uint8 array, picked by `indices`, each cut to an out_h x out_w window whose
// top-left corner is at (tops[i], lefts[i]) in image coordinates (negative or past the edge:
// `fill`, one byte per channel), then flipped horizontally where flips[i] is nonzero; written
// to out, (n, out_h, out_w, c). tops, lefts and flips may be null (0). Returns 0, or 1 + i for
// the first sample i whose index is outside [0, count): nothing past the array is read.
extern "C" int dali_loaders_gather_windows(const uint8_t* images, int64_t count, int32_t h, int32_t w, int32_t c,
                                           const int64_t* indices, int32_t n, const int64_t* tops,
                                           const int64_t* lefts, int32_t out_h, int32_t out_w,
                                           const uint8_t* flips, const uint8_t* fill, uint8_t* out);
