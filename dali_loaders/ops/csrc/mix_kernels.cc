// The mix of mix_kernels.h: float32 sums of a block of values kept in cache while each image
// adds its products, the loops written for the compiler to vectorize (the AVX2 copy is picked
// at run time, the same arithmetic: the same bytes).
#include "mix_kernels.h"

#include <algorithm>

#include "simd.h"

namespace mixk {
namespace {

constexpr int64_t kBlock = 2048;

// sums[j] = ((w[first] * images[first][j] + w[first + 1] * images[first + 1][j]) + ...) for j in
// [start, start + m), each product and each sum rounded to float32 in that order
inline __attribute__((always_inline)) void weighted_sums(const uint8_t* const* images, int first, int count,
                                                         const float* weights, int64_t start, int64_t m, float* sums) {
  const uint8_t* image = images[first] + start;
  const float w = weights[first];
  for (int64_t j = 0; j < m; j++) sums[j] = w * static_cast<float>(image[j]);
  for (int c = first + 1; c < count; c++) {
    const uint8_t* other = images[c] + start;
    const float wc = weights[c];
    for (int64_t j = 0; j < m; j++) sums[j] = sums[j] + wc * static_cast<float>(other[j]);
  }
}

// a float32 level truncated to uint8 (the weights add up to 1: in 0 .. 255 but for rounding)
inline uint8_t truncated(float value) { return static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, value))); }

inline __attribute__((always_inline)) void mix_loop(const uint8_t* const* images, int count, const float* weights,
                                                    int64_t n, uint8_t* out) {
  float sums[kBlock];
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t m = std::min(kBlock, n - start);
    weighted_sums(images, 0, count, weights, start, m, sums);
    for (int64_t j = 0; j < m; j++) out[start + j] = truncated(sums[j]);
  }
}

inline __attribute__((always_inline)) void blend_mix_loop(const uint8_t* const* images, int count,
                                                          const float* weights, int64_t n, uint8_t* out) {
  float sums[kBlock];
  const float blend = weights[0];
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t m = std::min(kBlock, n - start);
    weighted_sums(images, 1, count, weights, start, m, sums);   // numpy's 0 + w x is w x
    const uint8_t* original = images[0] + start;
    for (int64_t j = 0; j < m; j++) {   // PIL's blend of the image towards the chains' mix
      const int mixed = truncated(sums[j]), x = original[j];
      out[start + j] = truncated(static_cast<float>(x) + blend * static_cast<float>(mixed - x));
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
