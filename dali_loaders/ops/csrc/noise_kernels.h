// v2's GaussianNoise on the CPU (DaliLoadersGaussianNoise, noise_op.cc): normal noise added to
// every value of an image, as torchvision adds it, the normals a function of the image's seed
// alone (normals.h), compiled at -O3 with the augmentation kernels.
#pragma once

#include <cstdint>

namespace noisek {

// float32: out = in + (mean + z * sigma), clamped to 0 .. 1 if clip; torchvision's float
// arithmetic, one rounding an operation
void add_noise(const float* in, float* out, int64_t count, float mean, float sigma, bool clip, uint32_t seed,
               bool simd = true);

// uint8, mean and sigma in levels (torchvision's times 255): the noise mean + z * sigma in
// float32, truncated toward zero (torch's cast to int16), added; clamped to 0 .. 255 if clip,
// else wrapped modulo 256 (torch's cast back to uint8)
void add_noise(const uint8_t* in, uint8_t* out, int64_t count, float mean, float sigma, bool clip, uint32_t seed,
               bool simd = true);

}  // namespace noisek
