// See normalize_kernels.h. The AVX2 path does the same float operations as the scalar one, a
// row of 8 pixels at a time: bytes of one channel picked out of the interleaved row (pshufb,
// in reverse order for a mirrored image), widened to int32, converted, minus the mean, times
// the inverse std. Both round each operation to float32, so they agree bit for bit.
#include "normalize_kernels.h"

#include <cstddef>

#include "simd.h"

namespace normk {

namespace {

inline float normalized(uint8_t v, float mean, float inv_std) {
  return (static_cast<float>(v) - mean) * inv_std;
}

// The input pixel that output column x shows.
inline int source_x(const Image& in, int x) { return in.mirror ? in.width - 1 - x : x; }

// Output columns [x_begin, x_end), whichever input pixels they show.
void to_float_scalar_rows(const Image& in, float* out, bool chw, const float* mean, const float* inv_std,
                          int x_begin, int x_end) {
  const int h = in.height, w = in.width, c = in.channels;
  const size_t plane = static_cast<size_t>(h) * w;
  for (int y = 0; y < h; y++) {
    const uint8_t* row = in.pixels + static_cast<size_t>(y) * w * c;
    for (int x = x_begin; x < x_end; x++) {
      const uint8_t* px = row + static_cast<size_t>(source_x(in, x)) * c;
      for (int k = 0; k < c; k++) {
        const float v = normalized(px[k], mean[k], inv_std[k]);
        if (chw) out[k * plane + static_cast<size_t>(y) * w + x] = v;
        else out[(static_cast<size_t>(y) * w + x) * c + k] = v;
      }
    }
  }
}

#ifdef DALI_LOADERS_X86

// pshufb masks that take the bytes of channel `k` of 8 consecutive RGB pixels: from the 16
// bytes at the first pixel (pixels 0-4) and from the 16 bytes 8 further on (pixels 5-7),
// in pixel order or reversed; -1 (0x80) zeroes a byte.
struct RgbMasks {
  __m128i first[3], second[3];
};

RgbMasks rgb_masks(bool reversed) {
  RgbMasks m;
  for (int k = 0; k < 3; k++) {
    alignas(16) int8_t a[16], b[16];
    for (int j = 0; j < 16; j++) a[j] = b[j] = -1;
    for (int j = 0; j < 8; j++) {
      const int p = reversed ? 7 - j : j;   // the pixel whose byte lands in byte j
      if (p < 5) a[j] = static_cast<int8_t>(3 * p + k);
      else b[j] = static_cast<int8_t>(3 * p + k - 8);
    }
    m.first[k] = _mm_load_si128(reinterpret_cast<const __m128i*>(a));
    m.second[k] = _mm_load_si128(reinterpret_cast<const __m128i*>(b));
  }
  return m;
}

__attribute__((target("avx2"))) inline __m256 normalized8(__m128i bytes, __m256 mean, __m256 inv_std) {
  const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
  return _mm256_mul_ps(_mm256_sub_ps(v, mean), inv_std);
}

// RGB, CHW out: whole groups of 8 pixels; returns the first column left to do.
__attribute__((target("avx2"))) int rgb_chw_avx2(const Image& in, float* out, const float* mean,
                                                 const float* inv_std) {
  const int h = in.height, w = in.width, groups = w / 8;
  const size_t plane = static_cast<size_t>(h) * w;
  const RgbMasks masks = rgb_masks(in.mirror);
  __m256 means[3], invs[3];
  for (int k = 0; k < 3; k++) means[k] = _mm256_set1_ps(mean[k]), invs[k] = _mm256_set1_ps(inv_std[k]);
  for (int y = 0; y < h; y++) {
    const uint8_t* row = in.pixels + static_cast<size_t>(y) * w * 3;
    float* out_row = out + static_cast<size_t>(y) * w;
    for (int g = 0; g < groups; g++) {
      const __m128i first = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 24 * g));
      const __m128i second = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 24 * g + 8));
      const int x = in.mirror ? w - 8 * (g + 1) : 8 * g;   // where the 8 pixels land
      for (int k = 0; k < 3; k++) {
        const __m128i bytes = _mm_or_si128(_mm_shuffle_epi8(first, masks.first[k]),
                                           _mm_shuffle_epi8(second, masks.second[k]));
        _mm256_storeu_ps(out_row + k * plane + x, normalized8(bytes, means[k], invs[k]));
      }
    }
  }
  return 8 * groups;
}

// One channel: rows are contiguous; returns the first column left to do.
__attribute__((target("avx2"))) int gray_avx2(const Image& in, float* out, const float* mean,
                                              const float* inv_std) {
  const int h = in.height, w = in.width, groups = w / 8;
  const __m256 m = _mm256_set1_ps(mean[0]), s = _mm256_set1_ps(inv_std[0]);
  const __m128i reverse = _mm_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, -1, -1, -1, -1, -1, -1, -1, -1);
  for (int y = 0; y < h; y++) {
    const uint8_t* row = in.pixels + static_cast<size_t>(y) * w;
    float* out_row = out + static_cast<size_t>(y) * w;
    for (int g = 0; g < groups; g++) {
      __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + 8 * g));
      if (in.mirror) bytes = _mm_shuffle_epi8(bytes, reverse);
      const int x = in.mirror ? w - 8 * (g + 1) : 8 * g;
      _mm256_storeu_ps(out_row + x, normalized8(bytes, m, s));
    }
  }
  return 8 * groups;
}

#endif  // DALI_LOADERS_X86

}  // namespace

void to_float(const Image& in, float* out, bool chw, const float* mean, const float* inv_std, bool simd) {
  int done = 0;
#ifdef DALI_LOADERS_X86
  if (simd && chw && in.channels == 3) done = rgb_chw_avx2(in, out, mean, inv_std);
  else if (simd && chw && in.channels == 1) done = gray_avx2(in, out, mean, inv_std);
#endif
  // The SIMD groups filled the output's left end, or a mirrored image's right end.
  const int rest = in.width - done;
  if (in.mirror) to_float_scalar_rows(in, out, chw, mean, inv_std, 0, rest);
  else to_float_scalar_rows(in, out, chw, mean, inv_std, done, in.width);
}

void to_uint8(const Image& in, uint8_t* out, bool chw) {
  const int h = in.height, w = in.width, c = in.channels;
  const size_t plane = static_cast<size_t>(h) * w;
  for (int y = 0; y < h; y++) {
    const uint8_t* row = in.pixels + static_cast<size_t>(y) * w * c;
    for (int x = 0; x < w; x++) {
      const uint8_t* px = row + static_cast<size_t>(source_x(in, x)) * c;
      for (int k = 0; k < c; k++) {
        if (chw) out[k * plane + static_cast<size_t>(y) * w + x] = px[k];
        else out[(static_cast<size_t>(y) * w + x) * c + k] = px[k];
      }
    }
  }
}

}  // namespace normk
