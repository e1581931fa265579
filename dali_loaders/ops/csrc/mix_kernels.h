// AugMix's mixes (DaliLoadersMix, mix_op.cc), each product and each sum rounded to float32 one
// at a time (built without contraction):
// - torchvision's: out = trunc(((w[0] * images[0] + w[1] * images[1]) + w[2] * images[2]) + ...),
//   as it computes `m0 * batch`, then `mix.add_(w * aug)` per chain, then `.to(uint8)`;
// - timm's: mixed = trunc(clip((w[1] * images[1] + w[2] * images[2]) + ..., 0, 255)), as numpy
//   sums its float32 array, then PIL's Image.blend(images[0], mixed, w[0]):
//   out = trunc(x + w[0] * (mixed - x)) in float.
#pragma once

#include <cstdint>

namespace mixk {

// `count` uint8 images of `n` values each, one weight each, into `out` (n values)
void mix_image(const uint8_t* const* images, int count, const float* weights, int64_t n, uint8_t* out);

// timm's: images[0] the image, weights[0] the blend factor, the chains' weights after it
void blend_mix_image(const uint8_t* const* images, int count, const float* weights, int64_t n, uint8_t* out);

}  // namespace mixk
