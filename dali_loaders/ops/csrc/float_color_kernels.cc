// The kernels of float_color_kernels.h: torchvision's brightness, contrast, saturation (each a
// blend with a degenerate image: black, the mean grey level, the grey image, clamped to 0 .. 1),
// hue and grey image on float32 values, as its tensor kernels compute them. The loops are
// instantiated for planes of consecutive values (CHW) apart, which vectorise.
#include "float_color_kernels.h"

#include <cmath>
#include <type_traits>

namespace floatcolor {
namespace {

inline float clamp01(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }

// rgb_to_grayscale of one pixel: v1's 0.2989 r + 0.587 g + 0.114 b, v2's r * 0.2989 then two
// add_(.., alpha=) (torch's vectorized loops fuse each)
inline float grey(float r, float g, float b, bool v1) {
  if (v1) return (0.2989f * r + 0.587f * g) + 0.114f * b;
  return std::fma(b, 0.114f, std::fma(g, 0.587f, r * 0.2989f));
}

// _blend(x, d, factor): v1's factor * x + (1 - factor) * d, v2's x * factor + d * (1 - factor)
// fused; 1 - factor is Python's, in double, rounded to float32 by torch
struct Blend {
  float factor, rest;
  bool v1;
  Blend(float f, bool version1) : factor(f), rest(static_cast<float>(1.0 - static_cast<double>(f))), v1(version1) {}
  float operator()(float x, float d) const {
    return clamp01(v1 ? factor * x + rest * d : std::fma(d, rest, x * factor));
  }
};

// The image's channels as planes: channel k's value of pixel i at plane[k][i * step]. Step is 1
// (CHW) as a compile-time constant, or 0: the image's own pixel stride (HWC)
template <int Step>
struct Planes {
  float* plane[3];
  int64_t pixels, stride;
  int channels;
  explicit Planes(const FloatImage& im) : pixels(im.pixels), stride(Step ? Step : im.pixel_stride), channels(im.channels) {
    for (int k = 0; k < 3; k++) plane[k] = im.data + (k < im.channels ? k : 0) * im.channel_stride;
  }
  float& at(int k, int64_t i) const { return plane[k][i * (Step ? Step : stride)]; }
};

// Each loop reads a pixel's channels through pointers that never reach another's values
// (__restrict__), so that the CHW instantiation vectorises
template <int Step>
void brightness(const Planes<Step>& im, float factor) {   // v2: x * factor, clamped (v1's blend with 0: the same)
  const int64_t step = Step ? Step : im.stride;
  for (int c = 0; c < im.channels; c++) {
    float* __restrict__ x = im.plane[c];
    for (int64_t i = 0; i < im.pixels; i++) x[i * step] = clamp01(x[i * step] * factor);
  }
}

template <int Step>
void contrast(const Planes<Step>& im, float factor, bool v1) {
  const int64_t step = Step ? Step : im.stride;
  const float* __restrict__ r = im.plane[0];
  const float* __restrict__ g = im.plane[1];
  const float* __restrict__ b = im.plane[2];
  double sum = 0.0;   // torch's float32 mean sums in a cascade; double is as close to the exact sum
  if (im.channels == 3)
    for (int64_t i = 0; i < im.pixels; i++) sum += grey(r[i * step], g[i * step], b[i * step], v1);
  else
    for (int64_t i = 0; i < im.pixels; i++) sum += r[i * step];
  const float mean = im.pixels ? static_cast<float>(sum / static_cast<double>(im.pixels)) : 0.0f;
  const Blend blend(factor, v1);
  for (int c = 0; c < im.channels; c++) {
    float* __restrict__ x = im.plane[c];
    for (int64_t i = 0; i < im.pixels; i++) x[i * step] = blend(x[i * step], mean);
  }
}

template <int Step>
void saturation(const Planes<Step>& im, float factor, bool v1) {   // a grey image has none
  if (im.channels != 3) return;
  const int64_t step = Step ? Step : im.stride;
  float* __restrict__ r = im.plane[0];
  float* __restrict__ g = im.plane[1];
  float* __restrict__ b = im.plane[2];
  auto loop = [&](auto version1) {   // v1 a compile-time constant: no branch in the loop, which vectorises
    const Blend blend(factor, version1);
    for (int64_t i = 0; i < im.pixels; i++) {
      const int64_t k = i * step;
      const float level = grey(r[k], g[k], b[k], version1);
      r[k] = blend(r[k], level);
      g[k] = blend(g[k], level);
      b[k] = blend(b[k], level);
    }
  };
  if (v1) loop(std::true_type());
  else loop(std::false_type());
}

template <int Step>
void greyed(const Planes<Step>& im, bool v1) {   // a grey image is its own
  if (im.channels != 3) return;
  const int64_t step = Step ? Step : im.stride;
  float* __restrict__ r = im.plane[0];
  float* __restrict__ g = im.plane[1];
  float* __restrict__ b = im.plane[2];
  for (int64_t i = 0; i < im.pixels; i++) {
    const int64_t k = i * step;
    const float level = grey(r[k], g[k], b[k], v1);
    r[k] = level;
    g[k] = level;
    b[k] = level;
  }
}

template <int Step>
void hue(const Planes<Step>& im, float factor, bool v1) {   // nor hue
  if (im.channels != 3) return;
  int64_t i = 0;
  auto one = [&](int64_t j) {
    float rgb[3] = {im.at(0, j), im.at(1, j), im.at(2, j)};
    augk::tensor_hue_shift(rgb, factor, v1);
    for (int c = 0; c < 3; c++) im.at(c, j) = rgb[c];
  };
  if (Step == 1)
    for (; i + 8 <= im.pixels; i += 8)
      if (!augk::tensor_hue_planes8(&im.at(0, i), &im.at(1, i), &im.at(2, i), factor, v1))
        for (int64_t j = i; j < i + 8; j++) one(j);
  for (; i < im.pixels; i++) one(i);
}

template <int Step>
void run(const Planes<Step>& im, const int32_t* order, const float* factors, bool v1) {
  for (int k = 0; k < kNumAdjustments; k++) {
    const int32_t which = order[k];
    if (which == kBrightness) brightness(im, factors[which]);
    else if (which == kContrast) contrast(im, factors[which], v1);
    else if (which == kSaturation) saturation(im, factors[which], v1);
    else if (which == kHue) hue(im, factors[which], v1);
    else if (which == kGrey) greyed(im, v1);
  }
}

}  // namespace

void jitter(const FloatImage& image, const int32_t* order, const float* factors, bool v1) {
  if (image.pixel_stride == 1) run(Planes<1>(image), order, factors, v1);
  else run(Planes<0>(image), order, factors, v1);
}

}  // namespace floatcolor
