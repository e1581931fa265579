// PIL-exact antialiased resampling of HWC uint8 images (Pillow's Resample.c semantics,
// written from its documented algorithm): a separable filter in two passes through a uint8
// intermediate (the order as Pillow picks it, see vertical_first); the filter support grows
// with the downscale factor; weights are 22-bit fixed point rounded half away from zero, as
// Pillow's 8-bit path does. The result equals Image.resize(size, BILINEAR or BICUBIC, box)
// bit for bit, and a window of it equals the same window cropped from the whole resize.
// NEAREST (no filter, no passes: see nearest_indices) equals Image.resize(size, NEAREST, box).
//
// Speed: an AVX2 path (picked at run time, so the library itself only needs x86-64-v2)
// keeps Pillow's 22-bit weights exact by splitting each into a high and a low 16-bit part
// (w = hi * 256 + lo) and running both through _mm256_madd_epi16: twice the multiplies of a
// 16-bit-weight kernel (torch's, Pillow-SIMD's), but the exact same sums as Pillow.
// Anything else (aarch64, x86 without AVX2, 1 or 4 channels horizontally) runs plain C++,
// which the compiler vectorizes where it can. PILRS_PORTABLE_ONLY builds only that path.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "simd.h"

#if defined(DALI_LOADERS_X86) && !defined(PILRS_PORTABLE_ONLY)
#define PILRS_X86 1
#endif

#include "pil_resample_api.h"

namespace pilrs {

constexpr int kPrecision = 22;           // Pillow's PRECISION_BITS for 8-bit images
constexpr int kSplit = 8;                // w = hi << kSplit | lo, both fit int16
constexpr int kTapsPerGroup = 4;         // horizontal AVX2 step: 4 RGB pixels per 16-byte load

inline double filter_value(Filter f, double x) {
  x = std::fabs(x);
  if (f == Filter::kBilinear) return x < 1.0 ? 1.0 - x : 0.0;
  const double a = -0.5;                 // Keys' cubic, as Pillow's BICUBIC
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

inline double filter_support(Filter f) { return f == Filter::kBilinear ? 1.0 : 2.0; }

// One axis: output index i reads inputs first[i] .. first[i] + count[i] - 1.
struct Taps {
  int out = 0, ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weight;           // out x ksize, zero past count
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc, for outputs offset .. offset + count - 1
// of the box [start, end) resized to `resized` samples (a window of the resize: each output
// gets the taps it has in the whole resize). start/end are floats as Pillow receives its box:
// their difference is taken in float, as Pillow does.
inline Taps make_taps(int in_size, float start, float end, int resized, int offset, int count, Filter f) {
  Taps t;
  const double scale = static_cast<double>(end - start) / resized;
  const double filterscale = std::max(scale, 1.0);
  const double support = filter_support(f) * filterscale;
  t.out = count;
  t.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(count);
  t.count.resize(count);
  t.weight.assign(static_cast<size_t>(count) * t.ksize, 0);
  std::vector<double> k(t.ksize);
  const double inverse = 1.0 / filterscale;   // Pillow multiplies by the inverse: same rounding
  for (int i = 0; i < count; i++) {
    const double center = start + (offset + i + 0.5) * scale;
    int lo = static_cast<int>(center - support + 0.5);   // truncation, as Pillow
    int hi = static_cast<int>(center + support + 0.5);
    lo = std::max(lo, 0);
    hi = std::min(hi, in_size);
    const int n = std::max(hi - lo, 0);
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
      k[j] = filter_value(f, (j + lo - center + 0.5) * inverse);
      sum += k[j];
    }
    int32_t* w = &t.weight[static_cast<size_t>(i) * t.ksize];
    for (int j = 0; j < n; j++) {
      const double v = (sum != 0.0 ? k[j] / sum : k[j]) * (1 << kPrecision);
      w[j] = static_cast<int32_t>(v < 0 ? v - 0.5 : v + 0.5);   // half away from zero
    }
    t.first[i] = std::min(lo, std::max(in_size - 1, 0));      // a valid row even with no taps
    t.count[i] = n;
  }
  return t;
}

inline uint8_t clip8(int32_t acc) {     // acc already holds the rounding half
  if (acc >= (256 << kPrecision)) return 255;
  if (acc <= 0) return 0;
  return static_cast<uint8_t>(acc >> kPrecision);
}

// ---- plain C++ (every CPU) ----------------------------------------------------------------

// rows [y0, y1) of `in` (in_w x C, row stride in_stride) into `out` rows 0.. (out_w x C)
inline void horizontal_scalar(const uint8_t* in, int in_stride, int y0, int y1, int channels,
                              uint8_t* out, const Taps& t) {
  for (int y = y0; y < y1; y++) {
    const uint8_t* row = in + static_cast<size_t>(y) * in_stride;
    uint8_t* o = out + static_cast<size_t>(y - y0) * t.out * channels;
    for (int x = 0; x < t.out; x++) {
      const int32_t* w = &t.weight[static_cast<size_t>(x) * t.ksize];
      const uint8_t* p = row + static_cast<size_t>(t.first[x]) * channels;
      for (int c = 0; c < channels; c++) {
        int32_t acc = 1 << (kPrecision - 1);
        for (int j = 0; j < t.count[x]; j++) acc += p[j * channels + c] * w[j];
        o[x * channels + c] = clip8(acc);
      }
    }
  }
}

// out row y = sum_j w[y][j] * in row (first[y] - row0 + j): `width` bytes of rows `in_stride`
// apart, into dense rows
inline void vertical_scalar(const uint8_t* in, int in_stride, int row0, int width, uint8_t* out, const Taps& t) {
  std::vector<int32_t> acc(width);
  for (int y = 0; y < t.out; y++) {
    std::fill(acc.begin(), acc.end(), 1 << (kPrecision - 1));
    const int32_t* w = &t.weight[static_cast<size_t>(y) * t.ksize];
    for (int j = 0; j < t.count[y]; j++) {
      const uint8_t* r = in + static_cast<size_t>(t.first[y] - row0 + j) * in_stride;
      const int32_t wj = w[j];
      for (int i = 0; i < width; i++) acc[i] += r[i] * wj;   // auto-vectorized
    }
    uint8_t* o = out + static_cast<size_t>(y) * width;
    for (int i = 0; i < width; i++) o[i] = clip8(acc[i]);
  }
}

// ---- AVX2 ---------------------------------------------------------------------------------
#ifdef PILRS_X86

// Horizontal weights for 3 channels: per output pixel, per group of 4 taps, 16 int16 as the
// shuffled pixels expect them (lane 0: taps 0,1 as (c0t0, c0t1, c1t0, c1t1, c2t0, c2t1, 0, 0),
// lane 1: taps 2,3), once for the high and once for the low part. Every pixel gets the same
// number of groups (zero weights past its taps), so the inner loop has a fixed trip count.
struct HorizontalPlan {
  int groups = 1;
  std::vector<int16_t> hi, lo;           // out x groups x 16
  size_t reach = 0;                      // bytes past a row's start that the 16-byte loads touch
};

inline HorizontalPlan plan_horizontal(const Taps& t) {
  HorizontalPlan p;
  for (int x = 0; x < t.out; x++) p.groups = std::max(p.groups, (t.count[x] + kTapsPerGroup - 1) / kTapsPerGroup);
  p.hi.assign(static_cast<size_t>(t.out) * p.groups * 16, 0);
  p.lo.assign(p.hi.size(), 0);
  for (int x = 0; x < t.out; x++) {
    p.reach = std::max(p.reach, static_cast<size_t>(t.first[x]) * 3 + (p.groups - 1) * 12 + 16);
    for (int j = 0; j < t.count[x]; j++) {
      const int32_t w = t.weight[static_cast<size_t>(x) * t.ksize + j];
      const int g = j / 4, lane = (j % 4) / 2, odd = j % 2;
      const size_t at = (static_cast<size_t>(x) * p.groups + g) * 16 + lane * 8;
      for (int c = 0; c < 3; c++) {
        p.hi[at + 2 * c + odd] = static_cast<int16_t>(w >> kSplit);   // floor: lo stays >= 0
        p.lo[at + 2 * c + odd] = static_cast<int16_t>(w & ((1 << kSplit) - 1));
      }
    }
  }
  return p;
}

__attribute__((target("avx2"))) inline __m256i rgb_pairs(const uint8_t* p) {
  // 4 RGB pixels (12 of 16 loaded bytes) as int16 pairs per channel: lane 0 pixels 0,1,
  // lane 1 pixels 2,3
  const __m256i mask = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
                                        6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(bytes), mask);
}

// One pixel of one row: per lane, partial (r, g, b, _) sums = hi * 256 + lo
template <int kGroups>
__attribute__((target("avx2"))) inline __m256i row_sum(const uint8_t* src, const __m256i* wh, const __m256i* wl) {
  __m256i h = _mm256_setzero_si256(), l = h;
  for (int g = 0; g < kGroups; g++) {
    const __m256i px = rgb_pairs(src + g * 12);
    h = _mm256_add_epi32(h, _mm256_madd_epi16(px, wh[g]));
    l = _mm256_add_epi32(l, _mm256_madd_epi16(px, wl[g]));
  }
  return _mm256_add_epi32(_mm256_slli_epi32(h, kSplit), l);
}

// Rounds and stores lane 0's pixel to `a`, lane 1's to `b` (4 bytes: the spare byte lands on
// the next pixel, written later, unless `last`)
__attribute__((target("avx2"))) inline void store_two(__m256i v, uint8_t* a, uint8_t* b, bool last) {
  v = _mm256_srai_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(1 << (kPrecision - 1))), kPrecision);
  v = _mm256_packs_epi32(v, v);
  v = _mm256_packus_epi16(v, v);
  const uint32_t pa = static_cast<uint32_t>(_mm256_cvtsi256_si32(v));
  const uint32_t pb = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(v, 1)));
  if (last) {                            // constant sizes: plain stores, not a memcpy call
    std::memcpy(a, &pa, 3);
    std::memcpy(b, &pb, 3);
  } else {
    std::memcpy(a, &pa, 4);
    std::memcpy(b, &pb, 4);
  }
}

__attribute__((target("avx2"))) inline __m256i by_row(__m256i a, __m256i b) {   // lane 0: a's sum, lane 1: b's
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// Rows r[0..kRows) (kRows 2 or 4), all output pixels; weights loaded once per pixel. The rows
// `next` are fetched into the cache meanwhile, column by column as r's are read: the input is
// a decoded image, far too big for the cache by the time a batch reaches the resize, and the
// hardware's prefetcher does not see four rows ahead (measured: a third of the pass's time).
template <int kGroups, int kRows>
__attribute__((target("avx2"))) inline void rows_rgb(const uint8_t* const* r, uint8_t* const* o, const Taps& t,
                                                     const HorizontalPlan& p, const uint8_t* const* next) {
  const int* first = t.first.data();
  const __m256i* wh = reinterpret_cast<const __m256i*>(p.hi.data());
  const __m256i* wl = reinterpret_cast<const __m256i*>(p.lo.data());
  for (int x = 0; x < t.out; x++, wh += kGroups, wl += kGroups) {
    __m256i wh_[kGroups], wl_[kGroups];
    for (int g = 0; g < kGroups; g++) {
      wh_[g] = _mm256_loadu_si256(wh + g);
      wl_[g] = _mm256_loadu_si256(wl + g);
    }
    const size_t at = static_cast<size_t>(first[x]) * 3;
    const bool last = x == t.out - 1;
    for (int k = 0; k < kRows; k++) _mm_prefetch(reinterpret_cast<const char*>(next[k] + at), _MM_HINT_T0);
    for (int k = 0; k < kRows; k += 2) {
      const __m256i v = by_row(row_sum<kGroups>(r[k] + at, wh_, wl_), row_sum<kGroups>(r[k + 1] + at, wh_, wl_));
      store_two(v, o[k] + x * 3, o[k + 1] + x * 3, last);
    }
  }
}

template <int kGroups>
__attribute__((target("avx2"))) inline void horizontal_rgb_blocks(const uint8_t* in, int in_stride, int y0, int y1,
                                                                  const uint8_t* in_end, uint8_t* out, const Taps& t,
                                                                  const HorizontalPlan& p) {
  const size_t out_bytes = static_cast<size_t>(t.out) * 3;
  const auto row = [&](int y) { return in + static_cast<size_t>(y) * in_stride; };
  const auto dst = [&](int y) { return out + static_cast<size_t>(y - y0) * out_bytes; };
  int y = y0;
  for (; y + 4 <= y1 && row(y + 3) + p.reach <= in_end; y += 4) {
    const uint8_t* r[4] = {row(y), row(y + 1), row(y + 2), row(y + 3)};
    uint8_t* o[4] = {dst(y), dst(y + 1), dst(y + 2), dst(y + 3)};
    const auto ahead = [&](int k) { return row(std::min(y + 4 + k, y1 - 1)); };
    const uint8_t* next[4] = {ahead(0), ahead(1), ahead(2), ahead(3)};
    rows_rgb<kGroups, 4>(r, o, t, p, next);
  }
  for (; y + 2 <= y1 && row(y + 1) + p.reach <= in_end; y += 2) {
    const uint8_t* r[2] = {row(y), row(y + 1)};
    uint8_t* o[2] = {dst(y), dst(y + 1)};
    rows_rgb<kGroups, 2>(r, o, t, p, r);   // at most the last 3 rows: nothing left to fetch
  }
  // the last row or two, whose loads could pass the end of the image: plain C++
  if (y < y1) horizontal_scalar(in, in_stride, y, y1, 3, dst(y), t);
}

__attribute__((target("avx2"))) inline void horizontal_rgb_avx2(const uint8_t* in, int in_stride, int y0, int y1,
                                                                const uint8_t* in_end, uint8_t* out, const Taps& t) {
  const HorizontalPlan p = plan_horizontal(t);
  switch (p.groups) {
    case 1: return horizontal_rgb_blocks<1>(in, in_stride, y0, y1, in_end, out, t, p);
    case 2: return horizontal_rgb_blocks<2>(in, in_stride, y0, y1, in_end, out, t, p);
    case 3: return horizontal_rgb_blocks<3>(in, in_stride, y0, y1, in_end, out, t, p);
    case 4: return horizontal_rgb_blocks<4>(in, in_stride, y0, y1, in_end, out, t, p);
    default: return horizontal_scalar(in, in_stride, y0, y1, 3, out, t);   // > 16 taps: a rare, deep shrink
  }
}

// Vertical: 16 output bytes at a time, taps in pairs (two rows' bytes interleaved); the two
// rows `ahead` (the next output row's last taps) are fetched into the cache meanwhile, for the
// reason rows_rgb's are
template <int kPairs>
__attribute__((target("avx2"))) inline void vertical_row(const uint8_t* const* rows, const int32_t* wh, const int32_t* wl,
                                                         int width, uint8_t* o, const uint8_t* const* ahead) {
  const __m256i half = _mm256_set1_epi32(1 << (kPrecision - 1));
  __m256i hq[kPairs], lq[kPairs];
  const uint8_t* rp[2 * kPairs];
  for (int q = 0; q < kPairs; q++) {
    hq[q] = _mm256_set1_epi32(wh[q]);
    lq[q] = _mm256_set1_epi32(wl[q]);
    rp[2 * q] = rows[2 * q];
    rp[2 * q + 1] = rows[2 * q + 1];
  }
  for (int i = 0;; i += 16) {
    if (i + 16 > width) i = width - 16;   // the last block overlaps: same values rewritten
    _mm_prefetch(reinterpret_cast<const char*>(ahead[0] + i), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(ahead[1] + i), _MM_HINT_T0);
    __m256i h0 = _mm256_setzero_si256(), h1 = h0, l0 = h0, l1 = h0;
    for (int q = 0; q < kPairs; q++) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rp[2 * q] + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rp[2 * q + 1] + i));
      const __m256i x0 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b));
      const __m256i x1 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, b));
      h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(x0, hq[q]));
      l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(x0, lq[q]));
      h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(x1, hq[q]));
      l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(x1, lq[q]));
    }
    const __m256i s0 = _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h0, kSplit), l0), half), kPrecision);
    const __m256i s1 = _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h1, kSplit), l1), half), kPrecision);
    // packs works within 128-bit lanes: s0 = bytes 0-3 | 4-7, s1 = 8-11 | 12-15
    const __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(s0, s1), 0xD8);
    const __m128i b8 = _mm_packus_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), b8);
    if (i + 16 >= width) break;
  }
}

__attribute__((target("avx2"))) inline void vertical_avx2(const uint8_t* in, int in_stride, int row0, int width,
                                                          uint8_t* out, const Taps& t) {
  if (width < 16 || t.ksize > 16) return vertical_scalar(in, in_stride, row0, width, out, t);
  int32_t wh[8], wl[8];                  // (hi, hi) and (lo, lo) int16 pairs
  const uint8_t* rows[17];
  const auto pack = [](int32_t u, int32_t v) {
    return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(u)) |
                                (static_cast<uint32_t>(static_cast<uint16_t>(v)) << 16));
  };
  const int32_t mask = (1 << kSplit) - 1;
  for (int y = 0; y < t.out; y++) {
    const int32_t* w = &t.weight[static_cast<size_t>(y) * t.ksize];
    const int n = t.count[y], pairs = (n + 1) / 2;
    for (int j = 0; j < n; j++) rows[j] = in + static_cast<size_t>(t.first[y] - row0 + j) * in_stride;
    rows[n] = n ? rows[0] : in;          // an odd last tap pairs with any row at weight 0
    for (int q = 0; q < pairs; q++) {
      const int32_t a = w[2 * q], b = 2 * q + 1 < n ? w[2 * q + 1] : 0;
      wh[q] = pack(a >> kSplit, b >> kSplit);
      wl[q] = pack(a & mask, b & mask);
    }
    uint8_t* o = out + static_cast<size_t>(y) * width;
    const int yn = std::min(y + 1, t.out - 1);
    const int an = std::max(t.first[yn] - row0 + std::max(t.count[yn], 1) - 1, 0);
    const uint8_t* ahead[2] = {in + static_cast<size_t>(an) * in_stride,
                               in + static_cast<size_t>(std::max(an - 1, 0)) * in_stride};
    switch (pairs) {
      case 0: std::memset(o, 0, width); break;
      case 1: vertical_row<1>(rows, wh, wl, width, o, ahead); break;
      case 2: vertical_row<2>(rows, wh, wl, width, o, ahead); break;
      case 3: vertical_row<3>(rows, wh, wl, width, o, ahead); break;
      case 4: vertical_row<4>(rows, wh, wl, width, o, ahead); break;
      case 5: vertical_row<5>(rows, wh, wl, width, o, ahead); break;
      case 6: vertical_row<6>(rows, wh, wl, width, o, ahead); break;
      case 7: vertical_row<7>(rows, wh, wl, width, o, ahead); break;
      default: vertical_row<8>(rows, wh, wl, width, o, ahead); break;
    }
  }
}
#endif  // PILRS_X86

// ---- the whole resize ---------------------------------------------------------------------

inline void span(const Taps& t, int* first, int* last) {   // the input indices the taps read
  *first = t.first[0];
  *last = *first + 1;
  for (int i = 0; i < t.out; i++) *last = std::max(*last, t.first[i] + t.count[i]);
}

// Pillow runs the horizontal pass first; from Pillow 13 on, the vertical one when the height
// shrinks by more than twice as many pixels as the width (sizes of the whole image and of the
// whole resize, not the box). The order changes the uint8 intermediate, so it is followed.
inline bool vertical_first(int in_h, int in_w, int resized_h, int resized_w, int pillow_major) {
  const int dh = in_h - resized_h, dw = in_w - resized_w;
  return pillow_major >= 13 && dh > 0 && dh > dw * 2;
}

struct Passes {                          // the two passes, on this CPU
  bool simd;
  void horizontal(const uint8_t* in, int in_stride, int y0, int y1, int channels, const uint8_t* in_end,
                  uint8_t* out, const Taps& t) const {
#ifdef PILRS_X86
    if (simd && channels == 3) return horizontal_rgb_avx2(in, in_stride, y0, y1, in_end, out, t);
#endif
    (void)in_end;
    horizontal_scalar(in, in_stride, y0, y1, channels, out, t);
  }
  void vertical(const uint8_t* in, int in_stride, int row0, int width, uint8_t* out, const Taps& t) const {
#ifdef PILRS_X86
    if (simd) return vertical_avx2(in, in_stride, row0, width, out, t);
#endif
    vertical_scalar(in, in_stride, row0, width, out, t);
  }
};

// ---- NEAREST -------------------------------------------------------------------------------

// Pillow's NEAREST resize, as measured against Image.resize: output i of the box [start, end)
// resized to `resized` samples reads input int(start + scale / 2 + i * scale), scale = (end -
// start) / resized (the difference in float), where the position is a double that starts at
// start + scale / 2 and gains scale once per output: a running sum, whose rounding decides the
// exact ties, so a window at `offset` sums its way there too. Indices clamp to the image.
inline std::vector<int> nearest_indices(int in_size, float start, float end, int resized, int offset, int count) {
  const double scale = static_cast<double>(end - start) / resized;
  const double half = scale * 0.5;       // exact, so a fused multiply-add gives the same start
  double position = static_cast<double>(start) + half;
  std::vector<int> index(count);
  for (int i = 0; i < offset + count; i++, position += scale) {
    if (i < offset) continue;
    const int v = position < 0.0 ? 0 : static_cast<int>(position);   // truncation
    index[i - offset] = std::min(v, in_size - 1);
  }
  return index;
}

// Indices of the whole image as indices into a buffer that holds from `start`, `size` of them:
// false if one falls outside.
inline bool into_region(std::vector<int>& index, int start, int size) {
  for (int& i : index) {
    i -= start;
    if (i < 0 || i >= size) return false;
  }
  return true;
}

inline bool nearest(const uint8_t* in, int in_h, int in_w, int in_stride, int channels, uint8_t* out,
                    const Axis& y, const Axis& x, const Region* held) {
  std::vector<int> rows = nearest_indices(in_h, y.start, y.end, y.resized, y.offset, y.count);
  std::vector<int> cols = nearest_indices(in_w, x.start, x.end, x.resized, x.offset, x.count);
  if (held && !(into_region(rows, held->top, held->height) && into_region(cols, held->left, held->width))) {
    return false;
  }
  const size_t out_row = static_cast<size_t>(x.count) * channels;
  for (int i = 0; i < y.count; i++) {
    uint8_t* o = out + i * out_row;
    if (i > 0 && rows[i] == rows[i - 1]) {  // an enlargement repeats rows
      std::memcpy(o, o - out_row, out_row);
      continue;
    }
    const uint8_t* r = in + static_cast<size_t>(rows[i]) * in_stride;
    if (channels == 3) {
      for (int j = 0; j < x.count; j++) {
        const uint8_t* p = r + static_cast<size_t>(cols[j]) * 3;
        o[3 * j] = p[0];
        o[3 * j + 1] = p[1];
        o[3 * j + 2] = p[2];
      }
    } else {
      for (int j = 0; j < x.count; j++) std::memcpy(o + static_cast<size_t>(j) * channels,
                                                    r + static_cast<size_t>(cols[j]) * channels, channels);
    }
  }
  return true;
}

// Taps of the whole image made taps into a buffer that holds samples start .. start + size - 1
// of the axis: false if a tap falls outside.
inline bool into_region(Taps& t, int start, int size) {
  for (int i = 0; i < t.out; i++) {
    t.first[i] -= start;
    if (t.count[i] == 0) {
      t.first[i] = std::min(std::max(t.first[i], 0), size - 1);
    } else if (t.first[i] < 0 || t.first[i] + t.count[i] > size) {
      return false;
    }
  }
  return true;
}

// The image: in_h x in_w x channels; `in` holds all of it, or only the region `held` (see
// resample_image), rows `in_stride` bytes apart; out: y.count x x.count x channels, dense. Only
// the rows (or columns) the second pass reads go through the first.
inline bool resample(const uint8_t* in, int in_h, int in_w, int in_stride, int channels, uint8_t* out,
                     const Axis& y, const Axis& x, Filter f, int pillow_major, Scratch& scratch,
                     bool allow_simd = true, const Region* held = nullptr) {
  if (f == Filter::kNearest) return nearest(in, in_h, in_w, in_stride, channels, out, y, x, held);
#ifdef PILRS_X86
  const Passes passes{allow_simd && simd::have_avx2()};
#else
  const Passes passes{false};
#endif
  Taps th = make_taps(in_w, x.start, x.end, x.resized, x.offset, x.count, f);
  Taps tv = make_taps(in_h, y.start, y.end, y.resized, y.offset, y.count, f);
  int held_h = in_h, held_w = in_w;
  if (held) {
    if (!into_region(th, held->left, held->width) || !into_region(tv, held->top, held->height)) return false;
    held_h = held->height;
    held_w = held->width;
  }
  int first, last;
  if (!vertical_first(in_h, in_w, y.resized, x.resized, pillow_major)) {   // the whole image's sizes
    span(tv, &first, &last);
    const int mid_bytes = x.count * channels;
    scratch.mid.resize(static_cast<size_t>(last - first) * mid_bytes + 16);   // 16: SIMD loads' slack
    const uint8_t* in_end = in + static_cast<size_t>(held_h - 1) * in_stride + static_cast<size_t>(held_w) * channels;
    passes.horizontal(in, in_stride, first, last, channels, in_end, scratch.mid.data(), th);
    passes.vertical(scratch.mid.data(), mid_bytes, first, mid_bytes, out, tv);
  } else {
    span(th, &first, &last);
    const int mid_bytes = (last - first) * channels;
    scratch.mid.resize(static_cast<size_t>(y.count) * mid_bytes + 16);
    passes.vertical(in + static_cast<size_t>(first) * channels, in_stride, 0, mid_bytes, scratch.mid.data(), tv);
    for (int& i : th.first) i -= first;
    passes.horizontal(scratch.mid.data(), mid_bytes, 0, y.count, channels,
                      scratch.mid.data() + static_cast<size_t>(y.count) * mid_bytes, out, th);
  }
  return true;
}

}  // namespace pilrs
