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
struct Scratch { std::vector<uint8_t> mid; };

// pilrs::resample (pil_resample.h): `in` is in_h x in_w x channels, rows in_stride bytes
// apart; `out` is y.count x x.count x channels, dense.
void resample_image(const uint8_t* in, int in_h, int in_w, int in_stride, int channels, uint8_t* out,
                    const Axis& y, const Axis& x, Filter f, int pillow_major, Scratch& scratch, bool allow_simd);

}  // namespace pilrs
