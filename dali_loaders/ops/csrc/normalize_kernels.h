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

}  // namespace normk
