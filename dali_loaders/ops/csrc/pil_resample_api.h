// What a caller of the resampler needs, without its (inline, SIMD) body: the DALI operator
// includes only this, so that its translation unit, heavy with DALI's headers, can be
// compiled with little optimization while pil_resample.cc gets -O3.
#pragma once

#include <cstdint>
#include <vector>

namespace pilrs {

enum class Filter { kBilinear, kBicubic, kNearest };

// One axis of a resize: the input box [start, end) (Pillow's box, in input pixels) resized to
// `resized` samples, of which outputs offset .. offset + count - 1 are computed.
struct Axis {
  float start, end;
  int resized, offset, count;
};

// Scratch the caller may keep between calls (one per thread)
struct Scratch {
  std::vector<uint8_t> mid;
  std::vector<float> float_mid;   // resample_tensor_image's
};

// The part of an image an input buffer holds, when it holds only a region of it (the region
// a JPEG decoder was asked for): rows top .. top + height - 1, columns left .. left + width - 1.
struct Region {
  int top, left, height, width;
};

// The input samples first .. last - 1 of an axis of in_size samples that the resize `a` reads
// (the taps' reach): decoding only these rows and columns loses no pixel of the output.
void read_span(int in_size, const Axis& a, Filter f, int* first, int* last);

// pilrs::resample (pil_resample.h): the image is in_h x in_w x channels; `in` holds all of it,
// rows in_stride bytes apart, or only the region `held` (when not null), whose rows are
// in_stride bytes apart. `out` is y.count x x.count x channels, dense. The taps are those of
// the whole image either way, so a region gives the same pixels; false (nothing written) when
// the region lacks a pixel the taps read.
bool resample_image(const uint8_t* in, int in_h, int in_w, int in_stride, int channels, uint8_t* out,
                    const Axis& y, const Axis& x, Filter f, int pillow_major, Scratch& scratch, bool allow_simd,
                    const Region* held = nullptr);

// torch's antialiased resize of a float tensor (tensor_resample.h), BILINEAR or BICUBIC: the
// whole image in `in`, rows in_stride values apart; the box's start a whole pixel; `out` is
// y.count x x.count x channels float32, in the input's units, unrounded.
void resample_tensor_image(const uint8_t* in, int in_stride, int channels, float* out, const Axis& y,
                           const Axis& x, Filter f, Scratch& scratch);
void resample_tensor_image(const float* in, int in_stride, int channels, float* out, const Axis& y,
                           const Axis& x, Filter f, Scratch& scratch);

}  // namespace pilrs
