// ElasticTransform (torchvision's, v1 and v2) in torchvision's float32 arithmetic, one
// operation rounded at a time (built without contraction), for DaliLoadersElasticMaps and
// DaliLoadersGridSample (elastic_op.cc):
// - displacement: a field of uniforms in [-1, 1) blurred as F.gaussian_blur blurs it (kernel
//   `size` taps both ways, sigma_x across, sigma_y down, reflect-101 borders), then times alpha,
//   over the side; plus the identity grid (torch.linspace((1 - n) / n, (n - 1) / n, n)), made
//   the source pixel (centres at integers) as grid_sample(align_corners=False) makes it:
//   (g + 1) * (n / 2) - 0.5;
// - the sample: grid_sample's bilinear or nearest with zeros outside, and a channel of ones
//   sampled alongside as the mask, then the fill blended in as v1 ((img * mask) + (1 - mask) *
//   fill) or v2 ((img - fill) * mask + fill) writes it, or put where the mask < 0.5 (nearest),
//   rounded half to even.
#pragma once

#include <cstdint>

namespace elastick {

// `n` uniforms in [-1, 1), as torch.rand(...) * 2 - 1 draws them (24 random bits a value),
// from `seed` (splitmix64: the same seed, the same field, on every machine)
void draw_field(uint32_t seed, int64_t n, float* out);

// torchvision's 1-D gaussian: `size` taps at linspace(-(size - 1) / 2, (size - 1) / 2),
// exp(-0.5 * (x / sigma)^2), normalized to sum 1
void gaussian_taps(int size, float sigma, float* taps);

// `field` (h x w) blurred in place by `size` x `size` taps (sigma_x across, sigma_y down);
// `scratch` holds h * w floats
void blur(float* field, int h, int w, int size, float sigma_x, float sigma_y, float* scratch);

// One axis's source coordinates: coords[i] = ((identity[i along the axis] + field[i] * alpha
// / extent) + 1) * (extent / 2) - 0.5, where extent is w (across) or h (down)
void source_coordinates(const float* field, int h, int w, bool across, float alpha, float* coords);

// The HWC uint8 image (h x w x c) sampled at (xs, ys) (h x w each) into `out`; `fill` holds
// `fills` values (1: every channel; else c)
void grid_sample(const uint8_t* image, int h, int w, int c, const float* xs, const float* ys, bool nearest,
                 bool v1, const float* fill, int fills, uint8_t* out);

}  // namespace elastick
