// The Gaussian blur of augment_kernels.h (torchvision's GaussianBlur, on a PIL image or a uint8
// tensor alike: both go through its float32 conv2d). torchvision convolves with the 2-D kernel
// kernel_y x kernel_x, the outer product of two normalized 1-D Gaussians, over the image padded
// by reflection (the edge pixel not repeated), then rounds half to even. The kernel is
// separable, so here a column pass (uint8 rows to a float32 row) then a row pass (float32 to
// uint8): kernel_y + kernel_x products a value where torch takes kernel_y * kernel_x. The sums
// are grouped otherwise than torch's, so a value within float32 rounding of a half may land on
// the other side: 1 level, rarely.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "augment_kernels.h"
#include "simd.h"

namespace augk {
namespace {

// Index i reflected into [0, n) without repeating the edge (torch's "reflect" padding, bounced
// as often as a kernel wider than the image needs)
inline int reflect(int i, int n) {
  if (n == 1) return 0;
  const int period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

// A normalized 1-D Gaussian of `size` taps (odd) at `sigma`: exp(-x^2 / (2 sigma^2)) for x in
// -(size - 1) / 2 .. (size - 1) / 2, in double, over its sum; float32 as torch's kernel is
std::vector<float> gaussian_taps(int size, float sigma) {
  std::vector<double> w(size);
  double total = 0.0;
  const double s = static_cast<double>(sigma), half = (size - 1) * 0.5;
  for (int k = 0; k < size; k++) {
    const double x = (k - half) / s;
    w[k] = std::exp(-0.5 * x * x);
    total += w[k];
  }
  std::vector<float> taps(size);
  for (int k = 0; k < size; k++) taps[k] = static_cast<float>(w[k] / total);
  return taps;
}

#ifdef DALI_LOADERS_X86
// out[i] += in[i] * w for the first multiple of 8 values of the row, eight at a time (the same
// product and sum per value as the scalar loop: nothing fused); returns how many were done
__attribute__((target("avx2"))) int64_t column_taps_avx2(const uint8_t* in, int64_t row, float w, float* out) {
  const __m256 weight = _mm256_set1_ps(w);
  const int64_t end = row & ~static_cast<int64_t>(7);
  for (int64_t i = 0; i < end; i += 8) {
    const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i))));
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_mul_ps(x, weight)));
  }
  return end;
}

// The row pass for the first multiple of 8 values, eight at a time, as the scalar loop sums them
__attribute__((target("avx2"))) int64_t row_taps_avx2(const float* padded, int64_t row, int channels,
                                                      const std::vector<float>& kx, uint8_t* out) {
  const int64_t end = row & ~static_cast<int64_t>(7);
  const int taps = static_cast<int>(kx.size());
  for (int64_t i = 0; i < end; i += 8) {
    __m256 sum = _mm256_setzero_ps();
    for (int k = 0; k < taps; k++)
      sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_loadu_ps(padded + i + static_cast<int64_t>(k) * channels),
                                             _mm256_set1_ps(kx[k])));
    sum = _mm256_round_ps(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    sum = _mm256_min_ps(_mm256_max_ps(sum, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
    const __m256i v = _mm256_cvtps_epi32(sum);
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi16(words, words));
  }
  return end;
}
#endif

// Column pass: row y of the image convolved down the column (each byte of the row by itself)
void column_pass(const Image& src, int y, const std::vector<float>& ky, float* out) {
  const int64_t row = static_cast<int64_t>(src.width) * src.channels;
  const int half = static_cast<int>(ky.size()) / 2;
  std::fill(out, out + row, 0.0f);
  for (int k = 0; k < static_cast<int>(ky.size()); k++) {
    const uint8_t* in = src.data + reflect(y + k - half, src.height) * row;
    const float w = ky[k];
    int64_t i = 0;
#ifdef DALI_LOADERS_X86
    static const bool avx2 = simd::have_avx2();
    if (avx2) i = column_taps_avx2(in, row, w, out);
#endif
    for (; i < row; i++) out[i] += static_cast<float>(in[i]) * w;
  }
}

// Row pass: the padded float row convolved along the row, one channel's values `c` apart,
// rounded half to even into uint8
void row_pass(const float* padded, int64_t row, int channels, const std::vector<float>& kx, uint8_t* out) {
  int64_t i = 0;
#ifdef DALI_LOADERS_X86
  static const bool avx2 = simd::have_avx2();
  if (avx2) i = row_taps_avx2(padded, row, channels, kx, out);
#endif
  for (; i < row; i++) {
    float sum = 0.0f;
    for (int k = 0; k < static_cast<int>(kx.size()); k++) sum += padded[i + static_cast<int64_t>(k) * channels] * kx[k];
    out[i] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, std::nearbyint(sum))));
  }
}

}  // namespace

void gaussian_blur(const Image& src, Image& dst, const Step& step, std::vector<float>& scratch) {
  const float sigma = step.p[0];
  const int size_x = static_cast<int>(step.p[1]), size_y = static_cast<int>(step.p[2]);
  const std::vector<float> kx = gaussian_taps(size_x, sigma), ky = gaussian_taps(size_y, sigma);
  const int c = src.channels, half_x = size_x / 2;
  const int64_t row = static_cast<int64_t>(src.width) * c, padded_row = row + 2 * static_cast<int64_t>(half_x) * c;
  if (static_cast<int64_t>(scratch.size()) < padded_row) scratch.resize(padded_row);
  float* padded = scratch.data();
  float* column = padded + static_cast<int64_t>(half_x) * c;
  for (int y = 0; y < src.height; y++) {
    column_pass(src, y, ky, column);
    for (int x = 1; x <= half_x; x++) {   // the row's reflection on both sides
      std::memcpy(column - static_cast<int64_t>(x) * c, column + static_cast<int64_t>(reflect(-x, src.width)) * c, c * sizeof(float));
      std::memcpy(column + row + static_cast<int64_t>(x - 1) * c,
                  column + static_cast<int64_t>(reflect(src.width - 1 + x, src.width)) * c, c * sizeof(float));
    }
    row_pass(padded, row, c, kx, dst.data + y * row);
  }
}

}  // namespace augk
