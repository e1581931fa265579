// The fill of DaliLoadersErase's box (erase_op.cc), compiled at -O3 with the augmentation
// kernels: a value per channel, or standard normal noise per channel or per pixel. A box of
// pixel noise is ~10^4-10^5 values an image, so the normals come from a ziggurat (a table
// lookup and a product for 98.5% of them), 8 at a time (normals.h).
#pragma once

#include <cstdint>

namespace erasek {

constexpr int kMaxChannels = 64;   // the operator refuses more

enum class Noise { kNone, kChannel, kPixel };

struct Box {
  int top = 0, left = 0, height = 0, width = 0;
};

// Sets the box of a float32 c x h x w (chw) or h x w x c image: to value[b] (zeros when
// value is null) for kNone, one normal per channel for kChannel, one per value for kPixel, the
// noise a function of `seed` alone; `simd`: the AVX2 path where the CPU has it (the same values)
void fill_box(float* image, int c, int h, int w, bool chw, const Box& box, Noise noise, const float* value,
              uint32_t seed, bool simd = true);

}  // namespace erasek
