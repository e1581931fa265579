// AugMix's mix (DaliLoadersMix, mix_op.cc): out = trunc(((w[0] * images[0] + w[1] * images[1]) +
// w[2] * images[2]) + ...), each product and each sum rounded to float32 one at a time (built
// without contraction), as torchvision computes `m0 * batch`, then `mix.add_(w * aug)` per
// chain, then `.to(uint8)`.
#pragma once

#include <cstdint>

namespace mixk {

// `count` uint8 images of `n` values each, one weight each, into `out` (n values)
void mix_image(const uint8_t* const* images, int count, const float* weights, int64_t n, uint8_t* out);

}  // namespace mixk
