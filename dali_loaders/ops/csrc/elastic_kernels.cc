// The kernels of elastic_kernels.h: plain loops the compiler vectorizes (the blur's taps run
// over a row at a time), each product and sum rounded to float32 in torchvision's order.
#include "elastic_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace elastick {
namespace {

// reflect-101 (torch's "reflect" padding), repeated for taps wider than the image
inline int reflected(int i, int n) {
  if (n == 1) return 0;
  const int period = 2 * (n - 1);
  i = std::abs(i) % period;
  return i < n ? i : period - i;
}

// torch.linspace(start, end, n)[i] in float32: from the start for the first half, from the end
// for the rest
inline float linspace_at(float start, float end, int n, int i) {
  if (n == 1) return start;
  const float step = (end - start) / static_cast<float>(n - 1);
  return i < n / 2 ? start + step * static_cast<float>(i) : end - step * static_cast<float>(n - 1 - i);
}

inline uint8_t to_uint8(float value) {   // .round_().to(uint8) of a level within 0 .. 255
  return static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, std::nearbyint(value))));
}

}  // namespace

void draw_field(uint32_t seed, int64_t n, float* out) {
  uint64_t state = 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(seed) + 1);
  for (int64_t i = 0; i < n; i++) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    out[i] = static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;   // 2 * (k / 2^24) - 1, exact
  }
}

void gaussian_taps(int size, float sigma, float* taps) {
  const float half = static_cast<float>(size - 1) * 0.5f;
  float sum = 0.0f;
  for (int t = 0; t < size; t++) {
    const float x = linspace_at(-half, half, size, t) / sigma;
    taps[t] = std::exp(-0.5f * (x * x));
    sum += taps[t];
  }
  for (int t = 0; t < size; t++) taps[t] = taps[t] / sum;
}

void blur(float* field, int h, int w, int size, float sigma_x, float sigma_y, float* scratch) {
  std::vector<float> across(size), down(size), padded(static_cast<size_t>(w) + size - 1), row(w);
  gaussian_taps(size, sigma_x, across.data());
  gaussian_taps(size, sigma_y, down.data());
  const int half = size / 2;
  for (int y = 0; y < h; y++) {   // across, into scratch
    const float* in = field + static_cast<int64_t>(y) * w;
    for (int x = 0; x < w + size - 1; x++) padded[x] = in[reflected(x - half, w)];
    float* out = scratch + static_cast<int64_t>(y) * w;
    std::fill(out, out + w, 0.0f);
    for (int t = 0; t < size; t++) {
      const float tap = across[t];
      const float* source = padded.data() + t;
      for (int x = 0; x < w; x++) out[x] = out[x] + tap * source[x];
    }
  }
  for (int y = 0; y < h; y++) {   // down, back into the field
    std::fill(row.begin(), row.end(), 0.0f);
    for (int t = 0; t < size; t++) {
      const float tap = down[t];
      const float* source = scratch + static_cast<int64_t>(reflected(y - half + t, h)) * w;
      for (int x = 0; x < w; x++) row[x] = row[x] + tap * source[x];
    }
    std::copy(row.begin(), row.end(), field + static_cast<int64_t>(y) * w);
  }
}

void source_coordinates(const float* field, int h, int w, bool across, float alpha, float* coords) {
  const int n = across ? w : h;
  const double side = static_cast<double>(n);
  const float start = static_cast<float>((1.0 - side) / side), end = static_cast<float>((side - 1.0) / side);
  const float extent = static_cast<float>(n), scaling = static_cast<float>(n) / 2.0f;
  std::vector<float> identity(n);
  for (int i = 0; i < n; i++) identity[i] = linspace_at(start, end, n, i);
  for (int y = 0; y < h; y++) {
    const float* in = field + static_cast<int64_t>(y) * w;
    float* out = coords + static_cast<int64_t>(y) * w;
    for (int x = 0; x < w; x++) {
      const float shift = (in[x] * alpha) / extent;
      const float g = identity[across ? x : y] + shift;
      out[x] = (g + 1.0f) * scaling - 0.5f;
    }
  }
}

void grid_sample(const uint8_t* image, int h, int w, int c, const float* xs, const float* ys, bool nearest,
                 bool v1, const float* fill, int fills, uint8_t* out) {
  const int64_t pixels = static_cast<int64_t>(h) * w;
  auto fill_of = [&](int k) { return fill[fills == 1 ? 0 : k]; };
  for (int64_t p = 0; p < pixels; p++) {
    const float x = xs[p], y = ys[p];
    uint8_t* o = out + p * c;
    // far outside (or not a number): every neighbour is
    const bool near = x > -2.0f && x < static_cast<float>(w) + 1.0f && y > -2.0f && y < static_cast<float>(h) + 1.0f;
    if (nearest) {
      const int xi = near ? static_cast<int>(std::nearbyint(x)) : -1;
      const int yi = near ? static_cast<int>(std::nearbyint(y)) : -1;
      const bool inside = xi >= 0 && xi < w && yi >= 0 && yi < h;
      const uint8_t* v = image + (static_cast<int64_t>(yi) * w + xi) * c;
      for (int k = 0; k < c; k++) o[k] = inside ? v[k] : to_uint8(fill_of(k));
      continue;
    }
    const float x0 = near ? std::floor(x) : -4.0f, y0 = near ? std::floor(y) : -4.0f;
    const float east = x - x0, west = 1.0f - east, south = y - y0, north = 1.0f - south;
    const float weights[4] = {north * west, north * east, south * west, south * east};   // nw, ne, sw, se
    const int xl = static_cast<int>(x0), yt = static_cast<int>(y0);
    const int corner_x[4] = {xl, xl + 1, xl, xl + 1}, corner_y[4] = {yt, yt, yt + 1, yt + 1};
    const uint8_t* corner[4];
    float mask = 0.0f;
    for (int q = 0; q < 4; q++) {
      const bool inside = corner_x[q] >= 0 && corner_x[q] < w && corner_y[q] >= 0 && corner_y[q] < h;
      corner[q] = inside ? image + (static_cast<int64_t>(corner_y[q]) * w + corner_x[q]) * c : nullptr;
      mask = mask + (inside ? weights[q] : 0.0f);
    }
    for (int k = 0; k < c; k++) {
      float value = 0.0f;
      for (int q = 0; q < 4; q++)
        value = value + (corner[q] ? static_cast<float>(corner[q][k]) : 0.0f) * weights[q];
      const float f = fill_of(k);
      o[k] = to_uint8(v1 ? value * mask + (1.0f - mask) * f : (value - f) * mask + f);
    }
  }
}

}  // namespace elastick
