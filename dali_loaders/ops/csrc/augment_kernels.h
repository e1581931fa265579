// The per-sample augmentations of DaliLoadersAugment (augment_op.cc), on HWC uint8 images, in
// two arithmetics: what torchvision's uint8 tensor kernels compute (v2's, or v1's where v1
// rounds differently) and what PIL computes (torchvision's ops on a PIL image, timm's ops).
// Declarations only: the bodies (augment_geometry.cc, augment_color.cc, augment_hue.cc,
// augment_blur.cc) are compiled at -O3
// with floating-point contraction off, so that float32 and double operations round one at a
// time, as in torch's and Pillow's builds. For speed the loops are instantiated per flavour
// and channel count (by_flavour, by_channels below), so that no pixel loop branches on them.
//
// The interface, per sample: `ops` int32 (K,) op codes (augment_codes.h), run in order (-1 skips a slot);
// `params` float32 (K, 4), row k the parameters of op k (unused ones ignored):
//   kShearX, kShearY   p0 shear factor m, p1 resample, p2 the PIL matrix: 1 torchvision v2's,
//                      2 v1's (by atan(m) degrees, two groupings of the products), 0 timm's
//                      (1, m, 0, 0, 1, 0); tensor flavours follow their own version
//   kTranslateX/Y      p0 pixels the content moves right / down, p1 resample
//   kRotate            p0 degrees counter-clockwise about the centre, p1 resample
//   kBrightness, kColor, kContrast, kSharpness   the factor p1 + p0 in double (p1 = 1: the
//                      AutoAugment family's 1.0 + magnitude, rounded as Python does; p1 = 0: p0)
//   kHue               p0 the factor
//   kPosterize         p0 bits kept          kSolarize   p0 threshold: pixels >= it are inverted
//   kSolarizeAdd       p0 added, p1 threshold: pixels below it get p0 added, saturating (timm)
//   kErase             p0 top, p1 left, p2 height, p3 width: the box set to `erase_value`
//   kGaussianBlur      p0 sigma, p1 kernel width, p2 kernel height (odd): torchvision's blur
//   kPilBlur           p0 radius: PIL's ImageFilter.GaussianBlur (any flavour: PIL's arithmetic)
//   kIdentity, kAutoContrast, kEqualize, kInvert, kFlipH, kFlipV, kGrayscale: no parameters
// Resample is PIL's number: 0 nearest, 2 bilinear, 3 bicubic (bicubic: PIL flavour only).
// `fill` (one value per channel) is where a warp finds no source pixel.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "augment_codes.h"   // OpCode, kNumParams, Resample: the numbers Python reads too

namespace augk {

enum class Flavour { kPil, kTensor, kTensorV1 };

struct Image {   // dense HWC
  uint8_t* data;
  int height, width, channels;
  int64_t size() const { return static_cast<int64_t>(height) * width * channels; }
};

struct Step {
  int32_t op;
  float p[kNumParams];
};

struct Settings {
  Flavour flavour;
  const float* fill;          // per channel
  const float* erase_value;   // per channel
};

// An image's channel count: C where the loop was instantiated for it, else the image's own
template <int C>
inline int channels_of(const Image& img) { return C ? C : img.channels; }

// Buffers a caller keeps between calls (one per thread)
struct Scratch {
  std::vector<uint8_t> a, b;
  std::vector<float> row;   // the blur's padded row
  std::vector<uint8_t> c;   // PIL's blur: between its passes
  std::vector<uint32_t> line;   // PIL's blur: a padded line
};

// body(flavour) with the flavour as a compile-time constant (std::integral_constant)
template <typename Body>
void by_flavour(Flavour f, Body&& body) {
  if (f == Flavour::kPil) return body(std::integral_constant<Flavour, Flavour::kPil>());
  if (f == Flavour::kTensor) return body(std::integral_constant<Flavour, Flavour::kTensor>());
  body(std::integral_constant<Flavour, Flavour::kTensorV1>());
}

// body(channels) with 1, 3 or 4 channels as a compile-time constant; 0 for any other count
// (the body then reads it from the image)
template <typename Body>
void by_channels(int channels, Body&& body) {
  if (channels == 3) return body(std::integral_constant<int, 3>());
  if (channels == 1) return body(std::integral_constant<int, 1>());
  if (channels == 4) return body(std::integral_constant<int, 4>());
  body(std::integral_constant<int, 0>());
}

// Whether `op` is known, and what is wrong with a step's parameters ("" if nothing).
const char* check_step(const Step& step, Flavour flavour);

// The steps in order, `in` to `out` (same shape, dense; may not alias). The first op reads
// `in`, the last writes `out`; the scratch holds what lies between.
void augment(const uint8_t* in, uint8_t* out, int height, int width, int channels, const Step* steps,
             int num_steps, const Settings& settings, Scratch& scratch);

// -- the ops, src -> dst of the same shape (augment_geometry.cc, augment_color.cc) ---------------
// warp, flip and sharpness need distinct buffers; hue and pointwise may run in place (src == dst)
void warp(const Image& src, Image& dst, const Step& step, const Settings& settings);
void flip(const Image& src, Image& dst, bool horizontal);
void sharpness(const Image& src, Image& dst, const Step& step, Flavour flavour);
void hue(const Image& src, Image& dst, float factor, Flavour flavour);
void pointwise(const Image& src, Image& dst, const Step& step, const Settings& settings);
void gaussian_blur(const Image& src, Image& dst, const Step& step, std::vector<float>& scratch);   // augment_blur.cc
void pil_blur(const Image& src, Image& dst, float radius, Scratch& scratch);                     // augment_blur.cc

}  // namespace augk
