// See gather_windows.h: an array source's batch, gathered, cut to its windows and flipped in
// one pass. Plain byte copies (no arithmetic); SSE moves and shuffles where the CPU is x86.
#include "gather_windows.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "simd.h"

namespace {

// n bytes, in 16-byte moves (the last one overlapping): far cheaper than a memcpy call for
// the short rows of small images. Reads and writes stay inside [src, src + n), [dst, dst + n).
inline void copy_bytes(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n >= 256) {   // a long run: the C library's copy is the fastest there is
    std::memcpy(dst, src, n);
    return;
  }
#ifdef DALI_LOADERS_X86
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

#ifdef DALI_LOADERS_X86
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
#ifdef DALI_LOADERS_X86
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
