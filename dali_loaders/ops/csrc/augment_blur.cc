// The Gaussian blur of augment_kernels.h (torchvision's GaussianBlur, on a PIL image or a uint8
// tensor alike: both go through its float32 conv2d). torchvision convolves with the 2-D kernel
// kernel_y x kernel_x, the outer product of two normalized 1-D Gaussians, over the image padded
// by reflection (the edge pixel not repeated), then rounds half to even. The kernel is
// separable, so here a column pass (uint8 rows to a float32 row) then a row pass (float32 to
// uint8): kernel_y + kernel_x products a value where torch takes kernel_y * kernel_x. The sums
// are grouped otherwise than torch's, so a value within float32 rounding of a half may land on
// the other side: 1 level, rarely.
//
// PIL's own GaussianBlur (ImageFilter.GaussianBlur, what self-supervised recipes' classes call) is
// another filter: three passes of an extended box along the rows, then three down the columns
// (Gwosdek et al., 2011), the box's radius chosen so the passes' variance is the radius squared,
// the edge pixel repeated, each pass rounded to uint8 in 24-bit fixed point. pil_blur computes
// the box and its weights in float32 as PIL does and each pass in integers, so its pixels are
// PIL's, ties included.
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

// The extended box of PIL's blur at `radius`: its whole radius and the weights, in units of
// 2^-24, of each whole pixel and of each of the two end pixels
struct PilBox {
  int whole;
  uint64_t inner, end;
};

PilBox pil_box(float radius) {
  const float variance = radius * radius / 3;   // three passes
  const float length = static_cast<float>(std::sqrt(12.0 * variance + 1.0));
  const float lower = static_cast<float>(std::floor((length - 1.0) / 2.0));
  float fraction = (2 * lower + 1) * (lower * (lower + 1) - 3 * variance);
  fraction /= 6 * (variance - (lower + 1) * (lower + 1));
  const float box = lower + fraction;
  PilBox b;
  b.whole = static_cast<int>(box);
  b.inner = static_cast<uint32_t>(static_cast<float>(1 << 24) / (box * 2 + 1));
  b.end = ((uint64_t{1} << 24) - (2 * static_cast<uint64_t>(b.whole) + 1) * b.inner) / 2;
  return b;
}

// A pass's pixels from its sums: (whole pixels' sum * inner + the two end pixels * end + 2^23)
// >> 24, PIL's fixed point. The values fit uint32: the weights add up to 2^24, so one is at most
// 255 * 2^24 + 2^23. Inlined into an AVX2 copy below, where the compiler multiplies 8 at a time
// (the same integer arithmetic: the same pixels).
template <typename T>
inline __attribute__((always_inline)) void pil_combine_loop(const uint32_t* sums, const T* first, const T* last,
                                                            int64_t n, uint32_t inner, uint32_t end, uint8_t* out) {
  for (int64_t x = 0; x < n; x++)
    out[x] = static_cast<uint8_t>((sums[x] * inner + (static_cast<uint32_t>(first[x]) + last[x]) * end + (1u << 23)) >> 24);
}

#ifdef DALI_LOADERS_X86
template <typename T>
__attribute__((target("avx2"))) void pil_combine_avx2(const uint32_t* sums, const T* first, const T* last, int64_t n,
                                                      uint32_t inner, uint32_t end, uint8_t* out) {
  pil_combine_loop(sums, first, last, n, inner, end, out);
}
#endif

template <typename T>
void pil_combine(const uint32_t* sums, const T* first, const T* last, int64_t n, const PilBox& b, uint8_t* out) {
  const uint32_t inner = static_cast<uint32_t>(b.inner), end = static_cast<uint32_t>(b.end);
#ifdef DALI_LOADERS_X86
  static const bool avx2 = simd::have_avx2();
  if (avx2) return pil_combine_avx2(sums, first, last, n, inner, end, out);
#endif
  pil_combine_loop(sums, first, last, n, inner, end, out);
}

// One pass along each row: the row (its channels interleaved) copied with its end pixels
// repeated l + 1 times on each side, running sums per channel as differences of prefix sums
void pil_rows(const uint8_t* in, uint8_t* out, int height, int width, int c, const PilBox& b,
              std::vector<uint32_t>& scratch) {
  const int64_t l = b.whole, row = static_cast<int64_t>(width) * c, padded = (width + 2 * l + 2) * c;
  scratch.resize(2 * padded + c + row);
  uint32_t *line = scratch.data(), *prefix = line + padded, *sums = prefix + padded + c;
  for (int y = 0; y < height; y++) {
    const uint8_t* src = in + y * row;
    uint32_t* body = line + (l + 1) * c;
    for (int64_t k = 0; k < row; k++) body[k] = src[k];
    for (int64_t i = 1; i <= l + 1; i++)   // the end pixels repeated
      for (int ch = 0; ch < c; ch++) {
        body[-i * c + ch] = src[ch];
        body[row + (i - 1) * c + ch] = src[row - c + ch];
      }
    for (int ch = 0; ch < c; ch++) prefix[ch] = 0;   // prefix[m c + ch]: the channel's sum of line's first m pixels
    for (int64_t k = 0; k < padded; k++) prefix[k + c] = prefix[k] + line[k];
    for (int64_t k = 0; k < row; k++) sums[k] = prefix[k + (2 * l + 2) * c] - prefix[k + c];
    pil_combine(sums, line, line + (2 * l + 2) * c, row, b, out + y * row);
  }
}

// One pass down the columns: a running sum of rows
void pil_columns(const uint8_t* in, uint8_t* out, int height, int64_t row, const PilBox& b,
                 std::vector<uint32_t>& sums) {
  const int l = b.whole;
  auto at = [&](int y) { return in + static_cast<int64_t>(std::min(std::max(y, 0), height - 1)) * row; };
  sums.assign(row, 0);
  uint32_t* s = sums.data();
  for (int y = -l; y <= l; y++) {
    const uint8_t* r = at(y);
    for (int64_t x = 0; x < row; x++) s[x] += r[x];
  }
  for (int y = 0; y < height; y++) {
    const uint8_t *below = at(y + l + 1), *leaving = at(y - l);
    pil_combine(s, at(y - l - 1), below, row, b, out + static_cast<int64_t>(y) * row);
    for (int64_t x = 0; x < row; x++) s[x] += static_cast<uint32_t>(below[x]) - leaving[x];
  }
}

}  // namespace

void pil_blur(const Image& src, Image& dst, float radius, Scratch& scratch) {
  const PilBox b = pil_box(radius);
  const int64_t row = static_cast<int64_t>(src.width) * src.channels, size = src.size();
  if (static_cast<int64_t>(scratch.c.size()) < 2 * size) scratch.c.resize(2 * size);
  uint8_t* buffers[2] = {scratch.c.data(), scratch.c.data() + size};
  const uint8_t* in = src.data;
  for (int pass = 0; pass < 6; pass++) {   // three along the rows, then three down the columns
    uint8_t* out = pass == 5 ? dst.data : buffers[pass % 2];
    if (pass < 3) pil_rows(in, out, src.height, src.width, src.channels, b, scratch.line);
    else pil_columns(in, out, src.height, row, b, scratch.line);
    in = out;
  }
}

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
