// See normalize_kernels.h. The AVX2 path does the same float operations as the scalar one, a
// row of 8 pixels at a time: bytes of one channel picked out of the interleaved row (pshufb,
// in reverse order for a mirrored image), widened to int32, converted, minus the mean, times
// the inverse std. Both round each operation to float32, so they agree bit for bit.
#include "normalize_kernels.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#define NORMK_X86 1
#include <immintrin.h>
#endif

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

#ifdef NORMK_X86

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

#endif  // NORMK_X86

}  // namespace

bool have_avx2() {
#ifdef NORMK_X86
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

void to_float(const Image& in, float* out, bool chw, const float* mean, const float* inv_std, bool simd) {
  int done = 0;
#ifdef NORMK_X86
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

namespace {

// n bytes, in 16-byte moves (the last one overlapping): far cheaper than a memcpy call for
// the short rows of small images. Reads and writes stay inside [src, src + n), [dst, dst + n).
inline void copy_bytes(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n >= 256) {   // a long run: the C library's copy is the fastest there is
    std::memcpy(dst, src, n);
    return;
  }
#ifdef NORMK_X86
  if (n >= 16) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    if (i < n)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + n - 16),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + n - 16)));
    return;
  }
#endif
  // under 16 bytes (a few pixels of padding): two overlapping moves, no call
  if (n >= 8) {
    uint64_t a, b;
    std::memcpy(&a, src, 8), std::memcpy(&b, src + n - 8, 8);
    std::memcpy(dst, &a, 8), std::memcpy(dst + n - 8, &b, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, src, 4), std::memcpy(&b, src + n - 4, 4);
    std::memcpy(dst, &a, 4), std::memcpy(dst + n - 4, &b, 4);
  } else {
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
  }
}

// One output row of a window: image row `row` (null: outside the image) from column `left`,
// `fill_row` where the window leaves the image.
void window_row(const uint8_t* row, int w, int c, int left, int out_w, const uint8_t* fill_row, uint8_t* out) {
  const int x0 = row ? std::min(out_w, std::max(0, -left)) : out_w;
  const int x1 = row ? std::max(x0, std::min(out_w, w - left)) : out_w;
  if (x0 > 0) copy_bytes(out, fill_row, static_cast<size_t>(x0) * c);
  if (x1 > x0) copy_bytes(out + static_cast<size_t>(x0) * c, row + static_cast<size_t>(left + x0) * c,
                          static_cast<size_t>(x1 - x0) * c);
  if (out_w > x1) copy_bytes(out + static_cast<size_t>(x1) * c, fill_row, static_cast<size_t>(out_w - x1) * c);
}

// A window as wide as the image (CIFAR's pad-and-crop): its rows inside the image are one
// run of the image's bytes, shifted by `left` pixels; one copy of that run, then the pixels
// that wrapped round from the neighbouring row (and the rows outside) set to the fill.
void full_width_window(const uint8_t* image, int h, int w, int c, int top, int left, int out_h,
                       const uint8_t* fill_row, uint8_t* out) {
  const size_t row_bytes = static_cast<size_t>(w) * c, image_bytes = row_bytes * h;
  const int y0 = std::max(0, -top), y1 = std::min(out_h, h - top);   // output rows inside the image
  for (int y = 0; y < std::min(y0, out_h); y++) copy_bytes(out + y * row_bytes, fill_row, row_bytes);
  for (int y = std::max(y1, y0); y < out_h; y++) copy_bytes(out + y * row_bytes, fill_row, row_bytes);
  if (y1 <= y0) return;
  // bytes [begin, end) of the image, shifted: clamped to the image, the rest patched below
  const std::ptrdiff_t begin = static_cast<std::ptrdiff_t>(top + y0) * row_bytes + static_cast<std::ptrdiff_t>(left) * c;
  const std::ptrdiff_t end = begin + static_cast<std::ptrdiff_t>(y1 - y0) * row_bytes;
  const std::ptrdiff_t from = std::max<std::ptrdiff_t>(begin, 0);
  const std::ptrdiff_t to = std::min<std::ptrdiff_t>(end, static_cast<std::ptrdiff_t>(image_bytes));
  uint8_t* first = out + y0 * row_bytes;
  if (to > from) copy_bytes(first + (from - begin), image + from, static_cast<size_t>(to - from));
  const int shift = std::min(std::abs(left), w);
  if (shift == 0) return;
  const size_t patch = static_cast<size_t>(shift) * c;
  for (int y = y0; y < y1; y++) {   // left > 0: the row's right end; left < 0: its left end
    uint8_t* row = out + y * row_bytes;
    copy_bytes(left > 0 ? row + row_bytes - patch : row, fill_row, patch);
  }
}

inline void prefetch(const uint8_t* p, size_t bytes) {
  for (size_t at = 0; at < bytes; at += 64) __builtin_prefetch(p + at);
}

// One window, unflipped, at out (out_h x out_w x c).
void window(const uint8_t* image, int h, int w, int c, int top, int left, int out_h, int out_w,
            const uint8_t* fill_row, uint8_t* out) {
  if (out_w == w) return full_width_window(image, h, w, c, top, left, out_h, fill_row, out);
  const size_t out_row = static_cast<size_t>(out_w) * c;
  for (int y = 0; y < out_h; y++) {
    const int sy = top + y;
    const uint8_t* row = sy >= 0 && sy < h ? image + static_cast<size_t>(sy) * w * c : nullptr;
    window_row(row, w, c, left, out_w, fill_row, out + y * out_row);
  }
}

#ifdef NORMK_X86
// RGB: 5 pixels at a time, a 16-byte load ending one byte past them (the next row's, or the
// buffer's slack after the last row) and a 16-byte store whose last byte the next store overwrites;
// the row's last pixels one by one, so nothing is written past the row.
void reverse_rgb_row(const uint8_t* src, int w, uint8_t* dst) {
  const __m128i mask = _mm_setr_epi8(12, 13, 14, 9, 10, 11, 6, 7, 8, 3, 4, 5, 0, 1, 2, 15);
  int j = 0;
  for (; 3 * j + 16 <= 3 * w; j += 5) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 3 * (w - 5 - j)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 3 * j), _mm_shuffle_epi8(v, mask));
  }
  for (; j < w; j++) {
    const uint8_t* p = src + 3 * (w - 1 - j);
    dst[3 * j] = p[0], dst[3 * j + 1] = p[1], dst[3 * j + 2] = p[2];
  }
}
#endif

// The rows of a window (in `src`, followed by 16 bytes of slack) mirrored into out.
void mirrored_rows(const uint8_t* src, int out_h, int out_w, int c, uint8_t* out) {
  const size_t row = static_cast<size_t>(out_w) * c;
  for (int y = 0; y < out_h; y++) {
    const uint8_t* s = src + y * row;
    uint8_t* d = out + y * row;
#ifdef NORMK_X86
    if (c == 3) {
      reverse_rgb_row(s, out_w, d);
      continue;
    }
#endif
    for (int x = 0; x < out_w; x++) std::memcpy(d + static_cast<size_t>(x) * c, s + static_cast<size_t>(out_w - 1 - x) * c, c);
  }
}

}  // namespace

extern "C" int dali_loaders_gather_windows(const uint8_t* images, int64_t count, int32_t h, int32_t w, int32_t c,
                                           const int64_t* indices, int32_t n, const int64_t* tops,
                                           const int64_t* lefts, int32_t out_h, int32_t out_w,
                                           const uint8_t* flips, const uint8_t* fill, uint8_t* out) {
  for (int i = 0; i < n; i++)
    if (indices[i] < 0 || indices[i] >= count) return 1 + i;
  std::vector<uint8_t> fill_row(static_cast<size_t>(out_w) * c);
  for (int x = 0; x < out_w; x++) std::memcpy(&fill_row[static_cast<size_t>(x) * c], fill, c);
  const size_t image_bytes = static_cast<size_t>(h) * w * c, out_row = static_cast<size_t>(out_w) * c;
  std::vector<uint8_t> flipped;   // a flipped sample's window, and 16 bytes of slack
  // The images are scattered over a large array: each is asked of memory a few samples
  // ahead, so that its lines arrive while earlier samples are copied.
  constexpr int kAhead = 8;
  for (int i = 0; i < std::min(n, kAhead); i++) prefetch(images + static_cast<size_t>(indices[i]) * image_bytes, image_bytes);
  for (int i = 0; i < n; i++) {
    if (i + kAhead < n) prefetch(images + static_cast<size_t>(indices[i + kAhead]) * image_bytes, image_bytes);
    const uint8_t* image = images + static_cast<size_t>(indices[i]) * image_bytes;
    // (beyond these bounds a window is all fill anyway)
    const int top = tops ? static_cast<int>(std::clamp<int64_t>(tops[i], -out_h, h)) : 0;
    const int left = lefts ? static_cast<int>(std::clamp<int64_t>(lefts[i], -out_w, w)) : 0;
    uint8_t* dst = out + static_cast<size_t>(i) * out_h * out_row;
    if (!(flips && flips[i])) {
      window(image, h, w, c, top, left, out_h, out_w, fill_row.data(), dst);
      continue;
    }
    if (flipped.empty()) flipped.resize(static_cast<size_t>(out_h) * out_row + 16);
    window(image, h, w, c, top, left, out_h, out_w, fill_row.data(), flipped.data());
    mirrored_rows(flipped.data(), out_h, out_w, c, dst);
  }
  return 0;
}
