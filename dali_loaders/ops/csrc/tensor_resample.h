// torch's antialiased resize of a float tensor (interpolate(antialias=True), what torchvision's
// Resize runs on float images), of HWC uint8 or float32 pixels into float32, unrounded and unclamped (a
// bicubic filter overshoots): the taps as torch computes them in float32 (the same rule as
// Pillow's, pil_resample.h, but not its fixed point), the width first, then the height, each
// output summed from its first tap on. Within a few units of float32's last place of torch's
// sums (its loops are vectorized); the pixels stay in uint8's units, the caller scales them.
// torch crops before it resizes: the box's start is a whole pixel, its size the crop's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pil_resample_api.h"

namespace pilrs {

struct FloatTaps {
  int out = 0;
  std::vector<int> first, count;
  std::vector<float> weight;   // out x ksize
  int ksize = 0;
};

inline float torch_filter(Filter f, float x) {
  x = x < 0.0f ? -x : x;
  if (f == Filter::kBilinear) return x < 1.0f ? 1.0f - x : 0.0f;
  const float a = -0.5f;
  if (x < 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
  if (x < 2.0f) return (((x - 5.0f) * x + 8.0f) * x - 4.0f) * a;
  return 0.0f;
}

// Outputs offset .. offset + count - 1 of `box` input samples from `box_start` resized to `resized`
inline FloatTaps make_float_taps(int box_start, int box, int resized, int offset, int count, Filter f) {
  FloatTaps t;
  const float scale = static_cast<float>(box) / static_cast<float>(resized);
  const float half_width = f == Filter::kBilinear ? 1.0f : 2.0f;
  const float support = scale >= 1.0f ? half_width * scale : half_width;
  const float inverse = scale >= 1.0f ? 1.0f / scale : 1.0f;
  t.out = count;
  t.ksize = static_cast<int>(support) * 2 + 2;
  t.first.resize(count);
  t.count.resize(count);
  t.weight.assign(static_cast<size_t>(count) * t.ksize, 0.0f);
  for (int i = 0; i < count; i++) {
    const float center = scale * (static_cast<float>(offset + i) + 0.5f);
    const int lo = std::max(static_cast<int>(center - support + 0.5f), 0);
    const int n = std::min(std::max(std::min(static_cast<int>(center + support + 0.5f), box) - lo, 0), t.ksize);
    float* w = &t.weight[static_cast<size_t>(i) * t.ksize];
    float total = 0.0f;
    for (int j = 0; j < n; j++) {
      w[j] = torch_filter(f, (static_cast<float>(j + lo) - center + 0.5f) * inverse);
      total += w[j];
    }
    if (total != 0.0f) {
      for (int j = 0; j < n; j++) w[j] /= total;
    }
    t.first[i] = box_start + lo;
    t.count[i] = n;
  }
  return t;
}

// in: in_h x in_w x channels, rows in_stride values apart; out: y.count x x.count x channels
template <typename In>
inline void resample_tensor(const In* in, int in_stride, int channels, float* out, const Axis& y,
                            const Axis& x, Filter f, std::vector<float>& mid) {
  const int y0 = static_cast<int>(y.start), x0 = static_cast<int>(x.start);
  const FloatTaps th = make_float_taps(x0, static_cast<int>(x.end - x.start + 0.5f), x.resized, x.offset, x.count, f);
  const FloatTaps tv = make_float_taps(y0, static_cast<int>(y.end - y.start + 0.5f), y.resized, y.offset, y.count, f);
  int first = tv.first[0], last = first + 1;
  for (int i = 0; i < tv.out; i++) {
    first = std::min(first, tv.first[i]);
    last = std::max(last, tv.first[i] + tv.count[i]);
  }
  const size_t row = static_cast<size_t>(x.count) * channels;
  mid.assign(static_cast<size_t>(last - first) * row, 0.0f);
  for (int r = first; r < last; r++) {   // the width, on the rows the height's taps read
    const In* src = in + static_cast<size_t>(r) * in_stride;
    float* dst = &mid[static_cast<size_t>(r - first) * row];
    for (int i = 0; i < th.out; i++) {
      const float* w = &th.weight[static_cast<size_t>(i) * th.ksize];
      const In* p = src + static_cast<size_t>(th.first[i]) * channels;
      for (int c = 0; c < channels; c++) {
        float acc = th.count[i] > 0 ? p[c] * w[0] : 0.0f;
        for (int j = 1; j < th.count[i]; j++) acc += p[j * channels + c] * w[j];
        dst[static_cast<size_t>(i) * channels + c] = acc;
      }
    }
  }
  for (int i = 0; i < tv.out; i++) {   // then the height
    const float* w = &tv.weight[static_cast<size_t>(i) * tv.ksize];
    float* dst = out + static_cast<size_t>(i) * row;
    const float* base = &mid[static_cast<size_t>(tv.first[i] - first) * row];
    if (tv.count[i] == 0) {
      std::fill(dst, dst + row, 0.0f);
      continue;
    }
    for (size_t k = 0; k < row; k++) dst[k] = base[k] * w[0];
    for (int j = 1; j < tv.count[i]; j++) {
      const float* src = base + static_cast<size_t>(j) * row;
      const float wj = w[j];
      for (size_t k = 0; k < row; k++) dst[k] += src[k] * wj;
    }
  }
}

}  // namespace pilrs
