// The mix of mix_kernels.h: float32 sums of a block of values kept in cache while each image
// adds its products, the loops written for the compiler to vectorize (the AVX2 copy is picked
// at run time, the same arithmetic: the same bytes).
#include "mix_kernels.h"

#include <algorithm>

#include "simd.h"

namespace mixk {
namespace {

constexpr int64_t kBlock = 2048;

inline __attribute__((always_inline)) void mix_loop(const uint8_t* const* images, int count, const float* weights,
                                                    int64_t n, uint8_t* out) {
  float sums[kBlock];
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t m = std::min(kBlock, n - start);
    const uint8_t* first = images[0] + start;
    const float w0 = weights[0];
    for (int64_t j = 0; j < m; j++) sums[j] = w0 * static_cast<float>(first[j]);
    for (int c = 1; c < count; c++) {
      const uint8_t* image = images[c] + start;
      const float w = weights[c];
      for (int64_t j = 0; j < m; j++) sums[j] = sums[j] + w * static_cast<float>(image[j]);
    }
    // the weights add up to 1: the sums lie in 0 .. 255 but for rounding
    for (int64_t j = 0; j < m; j++) out[start + j] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, sums[j])));
  }
}

inline __attribute__((always_inline)) void blend_mix_loop(const uint8_t* const* images, int count,
                                                          const float* weights, int64_t n, uint8_t* out) {
  float sums[kBlock];
  const float blend = weights[0];
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t m = std::min(kBlock, n - start);
    const uint8_t* first = images[1] + start;
    const float w1 = weights[1];
    for (int64_t j = 0; j < m; j++) sums[j] = w1 * static_cast<float>(first[j]);   // 0 + w x: w x
    for (int c = 2; c < count; c++) {
      const uint8_t* image = images[c] + start;
      const float w = weights[c];
      for (int64_t j = 0; j < m; j++) sums[j] = sums[j] + w * static_cast<float>(image[j]);
    }
    const uint8_t* original = images[0] + start;
    for (int64_t j = 0; j < m; j++) {
      const int mixed = static_cast<int>(std::min(255.0f, std::max(0.0f, sums[j])));
      const int x = original[j];
      const float blended = static_cast<float>(x) + blend * static_cast<float>(mixed - x);
      out[start + j] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, blended)));
    }
  }
}

#ifdef DALI_LOADERS_X86
__attribute__((target("avx2"))) void blend_mix_avx2(const uint8_t* const* images, int count, const float* weights,
                                                     int64_t n, uint8_t* out) {
  blend_mix_loop(images, count, weights, n, out);
}

__attribute__((target("avx2"))) void mix_avx2(const uint8_t* const* images, int count, const float* weights,
                                               int64_t n, uint8_t* out) {
  mix_loop(images, count, weights, n, out);
}
#endif

}  // namespace

void mix_image(const uint8_t* const* images, int count, const float* weights, int64_t n, uint8_t* out) {
#ifdef DALI_LOADERS_X86
  static const bool avx2 = simd::have_avx2();
  if (avx2) return mix_avx2(images, count, weights, n, out);
#endif
  mix_loop(images, count, weights, n, out);
}

void blend_mix_image(const uint8_t* const* images, int count, const float* weights, int64_t n, uint8_t* out) {
#ifdef DALI_LOADERS_X86
  static const bool avx2 = simd::have_avx2();
  if (avx2) return blend_mix_avx2(images, count, weights, n, out);
#endif
  blend_mix_loop(images, count, weights, n, out);
}

}  // namespace mixk
