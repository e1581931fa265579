// The hue shift of augment_kernels.h. PIL flavour: torchvision's adjust_hue on a PIL image,
// convert("HSV") (Pillow's rgb2hsv: float ratios, double hue scaling, truncated), the 8-bit
// hue plus int(factor * 255) wrapping, convert("RGB") (hsv2rgb, rounded). Tensor flavour:
// torchvision's float32 _rgb2hsv / _hsv2rgb (v1) or _rgb_to_hsv / _hsv_to_rgb (v2), which
// scale, group and divide differently, then * 255.999 truncated.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "augment_kernels.h"
#include "float_color_kernels.h"
#include "simd.h"

namespace augk {
namespace {

inline uint8_t clip8(int v) { return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); }

// std::round and std::fmod(x, 1) without libm's calls where the answer is plain: for 0 <= x the
// fraction x - trunc(x) is exact, and for 1 <= x < 2 so is x - 1 (the values here are in range)
inline double round_half_away(double x) {
  if (!(x >= 0.0 && x < 2147483647.0)) return std::round(x);
  const int whole = static_cast<int>(x);
  return whole + (x - whole >= 0.5 ? 1 : 0);
}

template <typename T>
inline T fraction_of(T x) {   // std::fmod(x, 1)
  if (x >= T(0) && x < T(1)) return x;
  if (x >= T(1) && x < T(2)) return x - T(1);
  return std::fmod(x, T(1));
}

void pil_rgb_to_hsv(const uint8_t* p, uint8_t hsv[3]) {
  const uint8_t r = p[0], g = p[1], b = p[2];
  const uint8_t maxc = std::max(r, std::max(g, b)), minc = std::min(r, std::min(g, b));
  hsv[2] = maxc;
  if (minc == maxc) { hsv[0] = hsv[1] = 0; return; }
  const float cr = static_cast<float>(maxc - minc);
  const float s = cr / static_cast<float>(maxc);
  const float rc = static_cast<float>(maxc - r) / cr, gc = static_cast<float>(maxc - g) / cr,
              bc = static_cast<float>(maxc - b) / cr;
  float h;
  if (r == maxc) h = bc - gc;
  else if (g == maxc) h = static_cast<float>(2.0 + rc - bc);
  else h = static_cast<float>(4.0 + gc - rc);
  h = static_cast<float>(fraction_of(h / 6.0 + 1.0));
  hsv[0] = clip8(static_cast<int>(h * 255.0));
  hsv[1] = clip8(static_cast<int>(s * 255.0));
}

// Speed: the PIL flavour's hue depends on a pixel through (which channel is the largest,
// which the smallest, their difference, the middle one's distance from the largest) alone,
// its saturation through (difference, largest); hsv2rgb's sector, fraction and p through h, s
// or (s, v). Those are tables, each entry made by the functions above; what remains per pixel
// is a few comparisons and hsv2rgb's two products. Equal to the per-pixel arithmetic it
// replaced on every one of the 2**24 RGB values (a one-off check); tests/test_augment_op.py
// compares it with Pillow on every kind of tie between channels.
struct PilHueTables {
  uint8_t hue[6][256][256];              // [kind][largest - smallest][largest - middle]
  uint8_t saturation[256][256];          // [largest - smallest][largest]
  uint8_t p[256][256];                   // hsv2rgb's p: [s][v]
  uint8_t sector[256];                   // hsv2rgb's i % 6, by h
  float fraction[256], fs[256];          // hsv2rgb's f by h, fs by s
};

// The kind of a pixel: 2 x (0: red the largest, 1: green, 2: blue, in Pillow's order of
// tests) + (0 or 1: which of the other two is the smallest, the earlier one first); the
// largest and the middle one's distance from it
inline int pil_kind(int r, int g, int b, int maxc, int minc, int* middle_gap) {
  if (r == maxc) {
    const bool g_min = g == minc;
    *middle_gap = maxc - (g_min ? b : g);
    return g_min ? 0 : 1;
  }
  if (g == maxc) {
    const bool r_min = r == minc;
    *middle_gap = maxc - (r_min ? b : r);
    return r_min ? 2 : 3;
  }
  const bool r_min = r == minc;
  *middle_gap = maxc - (r_min ? g : r);
  return r_min ? 4 : 5;
}

const PilHueTables& pil_hue_tables() {
  static const std::unique_ptr<PilHueTables> tables = [] {
    auto t = std::make_unique<PilHueTables>();
    std::memset(t.get(), 0, sizeof(PilHueTables));
    uint8_t hsv[3];
    // every (kind, difference, gap) from the pixel with the largest value 255 that has it
    for (int cr = 1; cr < 256; cr++) {
      for (int gap = 0; gap <= cr; gap++) {
        const int lo = 255 - cr, mid = 255 - gap;
        const uint8_t pixels[6][3] = {{255, (uint8_t)lo, (uint8_t)mid}, {255, (uint8_t)mid, (uint8_t)lo},
                                      {(uint8_t)lo, 255, (uint8_t)mid}, {(uint8_t)mid, 255, (uint8_t)lo},
                                      {(uint8_t)lo, (uint8_t)mid, 255}, {(uint8_t)mid, (uint8_t)lo, 255}};
        for (const auto& px : pixels) {
          int g2;
          const int maxc = std::max(px[0], std::max(px[1], px[2])), minc = std::min(px[0], std::min(px[1], px[2]));
          const int kind = pil_kind(px[0], px[1], px[2], maxc, minc, &g2);
          if (maxc - minc != cr || g2 != gap) continue;   // a tie made it another kind's entry
          pil_rgb_to_hsv(px, hsv);
          t->hue[kind][cr][gap] = hsv[0];
        }
      }
      for (int maxc = cr; maxc < 256; maxc++) {
        const uint8_t px[3] = {(uint8_t)maxc, (uint8_t)(maxc - cr), (uint8_t)(maxc - cr)};
        pil_rgb_to_hsv(px, hsv);
        t->saturation[cr][maxc] = hsv[1];
      }
    }
    for (int v = 0; v < 256; v++) {
      const int i = static_cast<int>(std::floor(static_cast<float>(v) * 6.0 / 255.0));
      t->sector[v] = static_cast<uint8_t>(i % 6);
      t->fraction[v] = static_cast<float>(static_cast<float>(v) * 6.0 / 255.0 - static_cast<float>(i));
      t->fs[v] = static_cast<float>(static_cast<float>(v) / 255.0);
    }
    for (int sat = 0; sat < 256; sat++)
      for (int v = 0; v < 256; v++)
        t->p[sat][v] = clip8(static_cast<int>(round_half_away(static_cast<float>(v) * (1.0 - t->fs[sat]))));
    return t;
  }();
  return *tables;
}

// pil_rgb_to_hsv, the hue shift and pil_hsv_to_rgb of one pixel, through the tables
inline void pil_hue_pixel(const PilHueTables& t, const uint8_t* in, uint8_t shift, uint8_t* out) {
  const int r = in[0], g = in[1], b = in[2];
  const int maxc = std::max(r, std::max(g, b)), minc = std::min(r, std::min(g, b));
  const uint8_t v = static_cast<uint8_t>(maxc);
  if (maxc == minc) {                    // s = 0: grey stays grey
    out[0] = out[1] = out[2] = v;
    return;
  }
  int gap;
  const int kind = pil_kind(r, g, b, maxc, minc, &gap);
  const int cr = maxc - minc;
  const uint8_t h = static_cast<uint8_t>(t.hue[kind][cr][gap] + shift), s = t.saturation[cr][maxc];
  if (s == 0) {
    out[0] = out[1] = out[2] = v;
    return;
  }
  const float f = t.fraction[h], fs = t.fs[s];
  const uint8_t up = t.p[s][v];
  const uint8_t uq = clip8(static_cast<int>(round_half_away(static_cast<float>(v) * (1.0 - fs * f))));
  const uint8_t ut = clip8(static_cast<int>(round_half_away(static_cast<float>(v) * (1.0 - fs * (1.0 - f)))));
  switch (t.sector[h]) {
    case 0: out[0] = v; out[1] = ut; out[2] = up; break;
    case 1: out[0] = uq; out[1] = v; out[2] = up; break;
    case 2: out[0] = up; out[1] = v; out[2] = ut; break;
    case 3: out[0] = up; out[1] = uq; out[2] = v; break;
    case 4: out[0] = ut; out[1] = up; out[2] = v; break;
    default: out[0] = v; out[1] = up; out[2] = uq; break;
  }
}

#ifdef DALI_LOADERS_X86
// Eight RGB pixels (24 bytes) as three int32 vectors, and back
__attribute__((target("avx2"))) inline void load_rgb8(const uint8_t* in, __m256i* r, __m256i* g, __m256i* b) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));      // bytes 0 .. 15
  const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + 16));  // bytes 16 .. 23
  const int z = -128;   // pshufb: a byte with its top bit set gives 0
  const __m128i from_lo[3] = {_mm_setr_epi8(0, 3, 6, 9, 12, 15, z, z, z, z, z, z, z, z, z, z),
                              _mm_setr_epi8(1, 4, 7, 10, 13, z, z, z, z, z, z, z, z, z, z, z),
                              _mm_setr_epi8(2, 5, 8, 11, 14, z, z, z, z, z, z, z, z, z, z, z)};
  const __m128i from_hi[3] = {_mm_setr_epi8(z, z, z, z, z, z, 2, 5, z, z, z, z, z, z, z, z),
                              _mm_setr_epi8(z, z, z, z, z, 0, 3, 6, z, z, z, z, z, z, z, z),
                              _mm_setr_epi8(z, z, z, z, z, 1, 4, 7, z, z, z, z, z, z, z, z)};
  __m256i* planes[3] = {r, g, b};
  for (int k = 0; k < 3; k++)
    *planes[k] = _mm256_cvtepu8_epi32(_mm_or_si128(_mm_shuffle_epi8(lo, from_lo[k]), _mm_shuffle_epi8(hi, from_hi[k])));
}

__attribute__((target("avx2"))) inline __m128i bytes8(__m256i v) {   // 8 int32 in 0 .. 255 -> 8 bytes
  const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm_packus_epi16(words, words);
}

__attribute__((target("avx2"))) inline void store_rgb8(uint8_t* out, __m256i r, __m256i g, __m256i b) {
  const __m128i rg = _mm_unpacklo_epi64(bytes8(r), bytes8(g));   // r0 .. r7, g0 .. g7
  const __m128i bb = bytes8(b);                                   // b0 .. b7
  const int z = -128;
  const __m128i lo = _mm_or_si128(_mm_shuffle_epi8(rg, _mm_setr_epi8(0, 8, z, 1, 9, z, 2, 10, z, 3, 11, z, 4, 12, z, 5)),
                                  _mm_shuffle_epi8(bb, _mm_setr_epi8(z, z, 0, z, z, 1, z, z, 2, z, z, 3, z, z, 4, z)));
  const __m128i hi = _mm_or_si128(_mm_shuffle_epi8(rg, _mm_setr_epi8(13, z, 6, 14, z, 7, 15, z, z, z, z, z, z, z, z, z)),
                                  _mm_shuffle_epi8(bb, _mm_setr_epi8(z, 5, z, z, 6, z, z, 7, z, z, z, z, z, z, z, z)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), lo);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 16), hi);
}

// round_half_away of 4 doubles in [0, 2^31) then clip8: the whole part plus 1 where the rest is
// at least a half (exact: x - floor(x) is exact for these x), as int32
__attribute__((target("avx2"))) inline __m128i rounded_half_away4(__m256d x) {
  const __m256d whole = _mm256_floor_pd(x);
  const __m256d up = _mm256_and_pd(_mm256_cmp_pd(_mm256_sub_pd(x, whole), _mm256_set1_pd(0.5), _CMP_GE_OQ),
                                   _mm256_set1_pd(1.0));
  const __m128i v = _mm256_cvttpd_epi32(_mm256_add_pd(whole, up));
  return _mm_min_epi32(_mm_max_epi32(v, _mm_setzero_si128()), _mm_set1_epi32(255));
}

// hsv2rgb's q (v (1 - fs f), fs f in float) and t (v (1 - fs (1 - f)), in double) for 8 lanes
__attribute__((target("avx2"))) inline void pil_qt8(__m256 v, __m256 fs, __m256 f, __m256i* q, __m256i* t) {
  const __m256 fsf = _mm256_mul_ps(fs, f);
  const __m256d one = _mm256_set1_pd(1.0);
  __m128i qs[2], ts[2];
  for (int half = 0; half < 2; half++) {
    const __m128 v4 = half ? _mm256_extractf128_ps(v, 1) : _mm256_castps256_ps128(v);
    const __m128 fs4 = half ? _mm256_extractf128_ps(fs, 1) : _mm256_castps256_ps128(fs);
    const __m128 f4 = half ? _mm256_extractf128_ps(f, 1) : _mm256_castps256_ps128(f);
    const __m128 fsf4 = half ? _mm256_extractf128_ps(fsf, 1) : _mm256_castps256_ps128(fsf);
    const __m256d vd = _mm256_cvtps_pd(v4);
    qs[half] = rounded_half_away4(_mm256_mul_pd(vd, _mm256_sub_pd(one, _mm256_cvtps_pd(fsf4))));
    const __m256d rest = _mm256_mul_pd(_mm256_cvtps_pd(fs4), _mm256_sub_pd(one, _mm256_cvtps_pd(f4)));
    ts[half] = rounded_half_away4(_mm256_mul_pd(vd, _mm256_sub_pd(one, rest)));
  }
  *q = _mm256_set_m128i(qs[1], qs[0]);
  *t = _mm256_set_m128i(ts[1], ts[0]);
}

__attribute__((target("avx2"))) inline __m256i pick(__m256i mask, __m256i yes, __m256i no) {
  return _mm256_blendv_epi8(no, yes, mask);
}

// hsv2rgb's sector and fraction of 4 hues, computed as the tables are made (sector, fraction)
__attribute__((target("avx2"))) inline void sector_fraction4(__m128i h, __m128i* sector, __m128 * fraction) {
  const __m256d scaled = _mm256_div_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(h), _mm256_set1_pd(6.0)), _mm256_set1_pd(255.0));
  const __m256d whole = _mm256_floor_pd(scaled);
  *fraction = _mm256_cvtpd_ps(_mm256_sub_pd(scaled, whole));
  const __m128i i = _mm256_cvttpd_epi32(whole);   // 0 .. 6: 6 (h = 255) is sector 0
  *sector = _mm_andnot_si128(_mm_cmpeq_epi32(i, _mm_set1_epi32(6)), i);
}

// Eight pixels of pil_hue_pixel, lane for lane: the hue, saturation and p tables read (gathered),
// hsv2rgb's sector, fraction and fs computed as their tables are made, the same float and double
// arithmetic for q and t. The byte tables are read 4 bytes at a time and masked: the struct's
// next member lies after each, so no read leaves it.
__attribute__((target("avx2"))) void pil_hue8(const PilHueTables& t, const uint8_t* in, uint8_t shift, uint8_t* out) {
  __m256i r, g, b;
  load_rgb8(in, &r, &g, &b);
  const __m256i maxc = _mm256_max_epi32(r, _mm256_max_epi32(g, b)), minc = _mm256_min_epi32(r, _mm256_min_epi32(g, b));
  const __m256i is_r = _mm256_cmpeq_epi32(r, maxc), is_g = _mm256_andnot_si256(is_r, _mm256_cmpeq_epi32(g, maxc));
  const __m256i g_min = _mm256_cmpeq_epi32(g, minc), r_min = _mm256_cmpeq_epi32(r, minc);
  const __m256i one = _mm256_set1_epi32(1);
  // pil_kind: red largest 0/1, green 2/3, blue 4/5 (the first of the other two the smallest: even)
  const __m256i kind = pick(is_r, _mm256_andnot_si256(g_min, one),
                            pick(is_g, _mm256_add_epi32(_mm256_set1_epi32(2), _mm256_andnot_si256(r_min, one)),
                                 _mm256_add_epi32(_mm256_set1_epi32(4), _mm256_andnot_si256(r_min, one))));
  const __m256i middle = pick(is_r, pick(g_min, b, g), pick(is_g, pick(r_min, b, r), pick(r_min, g, r)));
  const __m256i gap = _mm256_sub_epi32(maxc, middle), cr = _mm256_sub_epi32(maxc, minc);
  const __m256i bytes = _mm256_set1_epi32(0xff);
  const int* hue_base = reinterpret_cast<const int*>(&t.hue[0][0][0]);
  const __m256i hue_at = _mm256_add_epi32(_mm256_slli_epi32(kind, 16), _mm256_add_epi32(_mm256_slli_epi32(cr, 8), gap));
  const __m256i h = _mm256_and_si256(_mm256_add_epi32(_mm256_i32gather_epi32(hue_base, hue_at, 1),
                                                      _mm256_set1_epi32(shift)), bytes);
  const __m256i s = _mm256_and_si256(
      _mm256_i32gather_epi32(reinterpret_cast<const int*>(&t.saturation[0][0]),
                             _mm256_add_epi32(_mm256_slli_epi32(cr, 8), maxc), 1), bytes);
  const __m256i up = _mm256_and_si256(
      _mm256_i32gather_epi32(reinterpret_cast<const int*>(&t.p[0][0]), _mm256_add_epi32(_mm256_slli_epi32(s, 8), maxc), 1),
      bytes);
  __m128i sector_lo, sector_hi;
  __m128 f_lo, f_hi;
  sector_fraction4(_mm256_castsi256_si128(h), &sector_lo, &f_lo);
  sector_fraction4(_mm256_extracti128_si256(h, 1), &sector_hi, &f_hi);
  const __m256i sector = _mm256_set_m128i(sector_hi, sector_lo);
  const __m256 f = _mm256_set_m128(f_hi, f_lo);
  const __m256 fs = _mm256_set_m128(
      _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(s, 1)), _mm256_set1_pd(255.0))),
      _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(s)), _mm256_set1_pd(255.0))));
  __m256i uq, ut;
  pil_qt8(_mm256_cvtepi32_ps(maxc), fs, f, &uq, &ut);
  const __m256i v = maxc;
  __m256i sec[6];
  for (int k = 0; k < 6; k++) sec[k] = _mm256_cmpeq_epi32(sector, _mm256_set1_epi32(k));
  // sector: 0 (v, t, p), 1 (q, v, p), 2 (p, v, t), 3 (p, q, v), 4 (t, p, v), 5 (v, p, q)
  __m256i out_r = pick(sec[1], uq, pick(_mm256_or_si256(sec[2], sec[3]), up, pick(sec[4], ut, v)));
  __m256i out_g = pick(sec[0], ut, pick(sec[3], uq, pick(_mm256_or_si256(sec[4], sec[5]), up, v)));
  __m256i out_b = pick(_mm256_or_si256(sec[0], sec[1]), up, pick(sec[2], ut, pick(sec[5], uq, v)));
  const __m256i grey = _mm256_cmpeq_epi32(s, _mm256_setzero_si256());   // s = 0 (a grey pixel among them)
  store_rgb8(out, pick(grey, v, out_r), pick(grey, v, out_g), pick(grey, v, out_b));
}
#endif

void tensor_rgb_to_hsv(const float rgb[3], float hsv[3], bool v1) {
  const float r = rgb[0], g = rgb[1], b = rgb[2];
  const float maxc = std::max(r, std::max(g, b)), minc = std::min(r, std::min(g, b));
  const bool eqc = maxc == minc;
  const float cr = maxc - minc;
  const float s = cr / (eqc ? 1.0f : maxc);
  const float divisor = eqc ? 1.0f : cr;
  const float rc = (maxc - r) / divisor, gc = (maxc - g) / divisor, bc = (maxc - b) / divisor;
  const float is_r = maxc == r, is_g = (maxc == g && maxc != r), is_b = (maxc != g && maxc != r);
  const float hr = is_r * (bc - gc), hg = is_g * ((v1 ? 2.0f + rc : rc + 2.0f) - bc),
              hb = is_b * ((v1 ? 4.0f + gc : gc + 4.0f) - rc);
  float h = (hr + hg) + hb;
  h = v1 ? h / 6.0f + 1.0f : h * static_cast<float>(1.0 / 6.0) + 1.0f;
  hsv[0] = fraction_of(h);
  hsv[1] = s;
  hsv[2] = maxc;
}

void tensor_hsv_to_rgb(const float hsv[3], float rgb[3], bool v1) {
  const float h = hsv[0], s = hsv[1], v = hsv[2];
  const float h6 = h * 6.0f, fi = std::floor(h6), f = h6 - fi;
  auto clamp01 = [](float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; };
  float p, q, t;
  if (v1) {
    p = clamp01(v * (1.0f - s));
    q = clamp01(v * (1.0f - s * f));
    t = clamp01(v * (1.0f - s * (1.0f - f)));
  } else {
    const float sxf = s * f, one_minus_s = 1.0f - s;
    q = clamp01((1.0f - sxf) * v);
    t = clamp01((sxf + one_minus_s) * v);
    p = clamp01(one_minus_s * v);
  }
  int i = static_cast<int>(fi) % 6;
  if (i < 0) i += 6;
  const float table[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  rgb[0] = table[i][0]; rgb[1] = table[i][1]; rgb[2] = table[i][2];
}

#ifdef DALI_LOADERS_X86
// Blends of 8 lanes: b where the mask is set, else a
__attribute__((target("avx2"))) inline __m256 where(__m256 mask, __m256 b, __m256 a) {
  return _mm256_blendv_ps(a, b, mask);
}

__attribute__((target("avx2"))) inline __m256 clamp01x8(__m256 x) {
  return _mm256_min_ps(_mm256_max_ps(x, _mm256_setzero_ps()), _mm256_set1_ps(1.0f));
}

// Eight pixels of the tensor flavour's shift, each lane the scalar functions' arithmetic above:
// the same IEEE operations in the same order (min, max, +, -, *, / and floor are exact per lane,
// nothing fused). False, having written nothing, where a lane's hue leaves the range the fast
// fmod takes (none does: the caller then goes pixel by pixel).
__attribute__((target("avx2"))) bool tensor_hue_lanes(__m256 rgb[3], float factor, bool v1) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 r = rgb[0], g = rgb[1], b = rgb[2];
  const __m256 maxc = _mm256_max_ps(r, _mm256_max_ps(g, b)), minc = _mm256_min_ps(r, _mm256_min_ps(g, b));
  const __m256 eqc = _mm256_cmp_ps(maxc, minc, _CMP_EQ_OQ);
  const __m256 cr = _mm256_sub_ps(maxc, minc);
  const __m256 s = _mm256_div_ps(cr, where(eqc, one, maxc));
  const __m256 divisor = where(eqc, one, cr);
  const __m256 rc = _mm256_div_ps(_mm256_sub_ps(maxc, r), divisor), gc = _mm256_div_ps(_mm256_sub_ps(maxc, g), divisor),
               bc = _mm256_div_ps(_mm256_sub_ps(maxc, b), divisor);
  const __m256 max_r = _mm256_cmp_ps(maxc, r, _CMP_EQ_OQ), max_g = _mm256_cmp_ps(maxc, g, _CMP_EQ_OQ);
  const __m256 is_r = _mm256_and_ps(max_r, one), is_g = _mm256_and_ps(_mm256_andnot_ps(max_r, max_g), one),
               is_b = _mm256_andnot_ps(_mm256_or_ps(max_r, max_g), one);
  const __m256 hr = _mm256_mul_ps(is_r, _mm256_sub_ps(bc, gc)),
               hg = _mm256_mul_ps(is_g, _mm256_sub_ps(_mm256_add_ps(rc, _mm256_set1_ps(2.0f)), bc)),
               hb = _mm256_mul_ps(is_b, _mm256_sub_ps(_mm256_add_ps(gc, _mm256_set1_ps(4.0f)), rc));
  __m256 h = _mm256_add_ps(_mm256_add_ps(hr, hg), hb);
  h = _mm256_add_ps(v1 ? _mm256_div_ps(h, _mm256_set1_ps(6.0f)) : _mm256_mul_ps(h, _mm256_set1_ps(static_cast<float>(1.0 / 6.0))),
                    one);
  const __m256 in_range = _mm256_and_ps(_mm256_cmp_ps(h, _mm256_setzero_ps(), _CMP_GE_OQ),
                                        _mm256_cmp_ps(h, _mm256_set1_ps(2.0f), _CMP_LT_OQ));
  if (_mm256_movemask_ps(in_range) != 0xff) return false;
  h = where(_mm256_cmp_ps(h, one, _CMP_GE_OQ), _mm256_sub_ps(h, one), h);   // fraction_of
  const __m256 shifted = _mm256_add_ps(h, _mm256_set1_ps(factor));
  h = _mm256_sub_ps(shifted, _mm256_floor_ps(shifted));
  // tensor_hsv_to_rgb
  const __m256 v = maxc, h6 = _mm256_mul_ps(h, _mm256_set1_ps(6.0f)), fi = _mm256_floor_ps(h6), f = _mm256_sub_ps(h6, fi);
  __m256 p, q, t;
  if (v1) {
    p = clamp01x8(_mm256_mul_ps(v, _mm256_sub_ps(one, s)));
    q = clamp01x8(_mm256_mul_ps(v, _mm256_sub_ps(one, _mm256_mul_ps(s, f))));
    t = clamp01x8(_mm256_mul_ps(v, _mm256_sub_ps(one, _mm256_mul_ps(s, _mm256_sub_ps(one, f)))));
  } else {
    const __m256 sxf = _mm256_mul_ps(s, f), one_minus_s = _mm256_sub_ps(one, s);
    q = clamp01x8(_mm256_mul_ps(_mm256_sub_ps(one, sxf), v));
    t = clamp01x8(_mm256_mul_ps(_mm256_add_ps(sxf, one_minus_s), v));
    p = clamp01x8(_mm256_mul_ps(one_minus_s, v));
  }
  // the sector i = int(fi) % 6: fi is 0 .. 6 here (h in [0, 1], 1 where a tiny negative hue wraps)
  const __m256 s1 = _mm256_cmp_ps(fi, _mm256_set1_ps(1.0f), _CMP_EQ_OQ), s2 = _mm256_cmp_ps(fi, _mm256_set1_ps(2.0f), _CMP_EQ_OQ),
               s3 = _mm256_cmp_ps(fi, _mm256_set1_ps(3.0f), _CMP_EQ_OQ), s4 = _mm256_cmp_ps(fi, _mm256_set1_ps(4.0f), _CMP_EQ_OQ),
               s5 = _mm256_cmp_ps(fi, _mm256_set1_ps(5.0f), _CMP_EQ_OQ);
  // i: 0 (v, t, p), 1 (q, v, p), 2 (p, v, t), 3 (p, q, v), 4 (t, p, v), 5 (v, p, q)
  __m256 out_r = where(s1, q, v), out_g = where(s1, v, t), out_b = p;
  out_r = where(_mm256_or_ps(s2, s3), p, out_r);
  out_g = where(s2, v, where(s3, q, out_g));
  out_b = where(s2, t, where(_mm256_or_ps(s3, s4), v, out_b));
  out_r = where(s4, t, where(s5, v, out_r));
  out_g = where(_mm256_or_ps(s4, s5), p, out_g);
  out_b = where(s5, q, out_b);
  rgb[0] = out_r;
  rgb[1] = out_g;
  rgb[2] = out_b;
  return true;
}

__attribute__((target("avx2"))) bool tensor_hue8(const uint8_t* in, uint8_t* out, float factor, bool v1) {
  __m256i bytes[3];
  load_rgb8(in, &bytes[0], &bytes[1], &bytes[2]);
  __m256 rgb[3];
  for (int b = 0; b < 3; b++) {
    const __m256 x = _mm256_cvtepi32_ps(bytes[b]);
    rgb[b] = v1 ? _mm256_div_ps(x, _mm256_set1_ps(255.0f)) : _mm256_mul_ps(x, _mm256_set1_ps(static_cast<float>(1.0 / 255.0)));
  }
  if (!tensor_hue_lanes(rgb, factor, v1)) return false;
  const __m256 to_byte = _mm256_set1_ps(255.999f), top = _mm256_set1_ps(255.0f);
  __m256i levels[3];
  for (int k = 0; k < 3; k++) levels[k] = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_mul_ps(rgb[k], to_byte), top));
  store_rgb8(out, levels[0], levels[1], levels[2]);
  return true;
}

// Eight pixels of float planes, in place
__attribute__((target("avx2"))) bool tensor_hue_planes8_avx2(float* r, float* g, float* b, float factor, bool v1) {
  float* planes[3] = {r, g, b};
  __m256 rgb[3];
  for (int k = 0; k < 3; k++) rgb[k] = _mm256_loadu_ps(planes[k]);
  if (!tensor_hue_lanes(rgb, factor, v1)) return false;
  for (int k = 0; k < 3; k++) _mm256_storeu_ps(planes[k], rgb[k]);
  return true;
}
#endif

void tensor_hue_pixel(const uint8_t* in, uint8_t* out, float factor, bool v1) {
  const float to_unit = static_cast<float>(1.0 / 255.0), to_byte = 255.999f;
  float rgb[3], hsv[3];
  for (int b = 0; b < 3; b++) rgb[b] = v1 ? in[b] / 255.0f : in[b] * to_unit;
  tensor_rgb_to_hsv(rgb, hsv, v1);
  const float shifted = hsv[0] + factor;   // torch's % 1.0: x - floor(x)
  hsv[0] = shifted - std::floor(shifted);
  tensor_hsv_to_rgb(hsv, rgb, v1);
  for (int b = 0; b < 3; b++) out[b] = static_cast<uint8_t>(std::min(255.0f, rgb[b] * to_byte));
}

}  // namespace

void tensor_hue_shift(float rgb[3], float factor, bool v1) {   // float_color_kernels.h
  float hsv[3];
  tensor_rgb_to_hsv(rgb, hsv, v1);
  const float shifted = hsv[0] + factor;   // torch's % 1.0: x - floor(x)
  hsv[0] = shifted - std::floor(shifted);
  tensor_hsv_to_rgb(hsv, rgb, v1);
}

bool tensor_hue_planes8(float* r, float* g, float* b, float factor, bool v1) {   // float_color_kernels.h
#ifdef DALI_LOADERS_X86
  static const bool avx2 = simd::have_avx2();
  if (!avx2) return false;
  return tensor_hue_planes8_avx2(r, g, b, factor, v1);
#else
  (void)r, (void)g, (void)b, (void)factor, (void)v1;
  return false;
#endif
}

void hue(const Image& src, Image& dst, float factor, Flavour f) {
  const int64_t n = src.size();
  if (src.channels != 3) {   // PIL's and torchvision's: a grey image has no hue
    if (src.data != dst.data) std::memcpy(dst.data, src.data, n);
    return;
  }
  const uint8_t* in = src.data;
  uint8_t* out = dst.data;
  if (f == Flavour::kPil) {   // np.int32(factor * 255).astype(np.uint8): truncated, wrapped
    const uint8_t shift = static_cast<uint8_t>(static_cast<int32_t>(static_cast<double>(factor) * 255.0));
    const PilHueTables& tables = pil_hue_tables();
    int64_t i = 0;
#ifdef DALI_LOADERS_X86
    static const bool avx2 = simd::have_avx2();
    if (avx2)
      for (; i + 24 <= n; i += 24) pil_hue8(tables, in + i, shift, out + i);
#endif
    for (; i < n; i += 3) pil_hue_pixel(tables, in + i, shift, out + i);
    return;
  }
  const bool v1 = f == Flavour::kTensorV1;
  int64_t i = 0;
#ifdef DALI_LOADERS_X86
  static const bool avx2 = simd::have_avx2();
  if (avx2) {
    for (; i + 24 <= n; i += 24)
      if (!tensor_hue8(in + i, out + i, factor, v1))
        for (int k = 0; k < 24; k += 3) tensor_hue_pixel(in + i + k, out + i + k, factor, v1);
  }
#endif
  for (; i < n; i += 3) tensor_hue_pixel(in + i, out + i, factor, v1);
}

}  // namespace augk
