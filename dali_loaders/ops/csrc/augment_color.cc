// The colour and lookup-table ops of augment_kernels.h, and the sequence driver.
//
// PIL flavour: ImageEnhance (Image.blend in C float: degenerate + alpha * (x - degenerate),
// truncated), convert("L") in 16-bit fixed point, ImageStat's mean, the SMOOTH filter (float
// kernel /13, offset 0.5, truncated, border kept), ImageOps' LUTs, convert("HSV") and back.
// Tensor flavour: torchvision's float32 kernels. v2 adds with `alpha` (a fused multiply-add in
// torch's vectorized CPU loops) where v1 multiplies and adds as separate tensor ops.
//
// Speed: what is a function of the byte alone (brightness, contrast once its mean is known,
// the ImageOps tables) runs as a 256-entry table computed by the same per-value arithmetic;
// the rest are loops instantiated per flavour and channel count, written for the compiler to
// vectorise (no branch inside, the grey inlined).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "augment_kernels.h"
#include "simd.h"

namespace augk {
namespace {

inline uint8_t trunc_clamp(float v) { return static_cast<uint8_t>(v <= 0.0f ? 0.0f : v >= 255.0f ? 255.0f : v); }

// floor() of a value >= 0 below 2**31, as a truncating conversion, which vectorises (GCC
// keeps std::floor scalar unless traps are off)
inline float floor_positive(float v) { return static_cast<float>(static_cast<int32_t>(v)); }

// -- the grey image and the blend with a degenerate image -------------------------------------

// The grey level each flavour blends with (Color, Grayscale), as a float: PIL's (16-bit fixed
// point) and v1's are uint8 (rounded, truncated); v2 floors its float grey
template <Flavour F>
inline float grey3(const uint8_t* p) {
  const float r = p[0], g = p[1], b = p[2];
  if constexpr (F == Flavour::kPil) return static_cast<float>((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
  else if constexpr (F == Flavour::kTensorV1) return floor_positive((0.2989f * r + 0.587f * g) + 0.114f * b);
  else return floor_positive(std::fma(b, 0.114f, std::fma(g, 0.587f, r * 0.2989f)));
}

template <Flavour F, int C>
inline float grey_of(const uint8_t* p, int channels) {
  if constexpr (C == 1) return p[0];
  else if constexpr (C == 0) return channels == 1 ? p[0] : grey3<F>(p);
  else return grey3<F>(p);
}

// An enhancement factor as the twins see it: Python's double (p1 + p0: AutoAugment's and timm's
// 1.0 + magnitude, or ColorJitter's factor with p1 = 0), which C float and torch's float32
// scalars round, and Python's 1.0 - factor, rounded the same way
struct Factor {
  float f, rest;
  explicit Factor(const Step& s) {
    const double factor = static_cast<double>(s.p[1]) + static_cast<double>(s.p[0]);
    f = static_cast<float>(factor);
    rest = static_cast<float>(1.0 - factor);
  }
};

// out = blend of x with the degenerate value d by the factor. PIL's Image.blend returns d itself
// for a factor of 0 and x for 1; the formula gives the same bytes there (d and x are integers
// in [0, 255]), so no branch
template <Flavour F>
inline uint8_t blend(float x, float d, const Factor& k) {
  if constexpr (F == Flavour::kPil) return trunc_clamp(d + k.f * (x - d));   // in [0, 1] Pillow truncates without clipping: same
  else if constexpr (F == Flavour::kTensorV1) return trunc_clamp(k.f * x + k.rest * d);
  else return trunc_clamp(std::fma(d, k.rest, x * k.f));
}

// -- RGB pixels four at a time, as three planes of float lanes (SSE4.1) -----------------------

#ifdef __SSE4_1__
using simd::fma4;
using simd::v4f;
using simd::v4i;

struct Planes {
  v4i r, g, b;
};

// Pixels p[0..3] (12 bytes) as planes; reads 16 bytes
inline Planes load4(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i r = _mm_shuffle_epi8(v, _mm_setr_epi8(0, -1, -1, -1, 3, -1, -1, -1, 6, -1, -1, -1, 9, -1, -1, -1));
  const __m128i g = _mm_shuffle_epi8(v, _mm_setr_epi8(1, -1, -1, -1, 4, -1, -1, -1, 7, -1, -1, -1, 10, -1, -1, -1));
  const __m128i b = _mm_shuffle_epi8(v, _mm_setr_epi8(2, -1, -1, -1, 5, -1, -1, -1, 8, -1, -1, -1, 11, -1, -1, -1));
  return {reinterpret_cast<v4i>(r), reinterpret_cast<v4i>(g), reinterpret_cast<v4i>(b)};
}

inline void store4(uint8_t* p, v4i r, v4i g, v4i b) {   // lanes within [0, 255]
  const __m128i rgb = reinterpret_cast<__m128i>(r | (g << 8) | (b << 16));
  const __m128i packed = _mm_shuffle_epi8(rgb, _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), packed);   // 8 + 4 bytes: the next pixel's untouched
  const int32_t last = _mm_extract_epi32(packed, 2);
  std::memcpy(p + 8, &last, 4);
}

template <Flavour F>   // grey3, lane by lane
inline v4f grey4(const Planes& p) {
  if constexpr (F == Flavour::kPil) {
    return __builtin_convertvector((p.r * 19595 + p.g * 38470 + p.b * 7471 + 0x8000) >> 16, v4f);
  } else {
    const v4f r = __builtin_convertvector(p.r, v4f), g = __builtin_convertvector(p.g, v4f),
              b = __builtin_convertvector(p.b, v4f);
    v4f grey;
    if constexpr (F == Flavour::kTensorV1) grey = (0.2989f * r + 0.587f * g) + 0.114f * b;
    else grey = fma4(b, v4f{} + 0.114f, fma4(g, v4f{} + 0.587f, r * 0.2989f));
    return __builtin_convertvector(__builtin_convertvector(grey, v4i), v4f);   // floor_positive
  }
}

template <Flavour F>   // blend, lane by lane
inline v4i blend4(v4i xi, v4f d, const Factor& k) {
  const v4f x = __builtin_convertvector(xi, v4f), zero = {}, top = zero + 255.0f;
  v4f v;
  if constexpr (F == Flavour::kPil) v = d + k.f * (x - d);
  else if constexpr (F == Flavour::kTensorV1) v = k.f * x + k.rest * d;
  else v = fma4(d, zero + k.rest, x * k.f);
  v = v <= zero ? zero : v;
  v = v >= top ? top : v;
  return __builtin_convertvector(v, v4i);
}
#endif

// -- lookup tables --------------------------------------------------------------------------

void apply_lut(const uint8_t* src, uint8_t* dst, int64_t n, const uint8_t* lut) {
  for (int64_t i = 0; i < n; i++) dst[i] = lut[src[i]];
}

template <int C>   // one table per channel
void apply_luts(const Image& src, Image& dst, const uint8_t* luts) {
  const int c = channels_of<C>(src);
  const int64_t n = src.size();
  for (int64_t i = 0; i < n; i += c)
    for (int b = 0; b < c; b++) dst.data[i + b] = luts[b * 256 + src.data[i + b]];
}

template <Flavour F>   // brightness: v2's image.mul(factor), the others a blend with black
void brightness(const Image& src, Image& dst, const Factor& k) {
  uint8_t lut[256];
  for (int v = 0; v < 256; v++)
    lut[v] = F == Flavour::kTensor ? trunc_clamp(static_cast<float>(v) * k.f) : blend<F>(static_cast<float>(v), 0.0f, k);
  apply_lut(src.data, dst.data, src.size(), lut);
}

template <Flavour F, int C>
int64_t grey_sum(const Image& img) {
  const int c = channels_of<C>(img);
  const int64_t n = img.size();
  int64_t sum = 0, i = 0;
#ifdef __SSE4_1__
  if constexpr (C == 3) {
    while (i + 16 <= n) {   // int32 lanes, emptied every 2**20 pixels: no overflow
      v4i lanes = {0, 0, 0, 0};
      for (int64_t end = std::min(n - 15, i + 12 * (int64_t{1} << 18)); i < end; i += 12)
        lanes += __builtin_convertvector(grey4<F>(load4(img.data + i)), v4i);
      sum += static_cast<int64_t>(lanes[0]) + lanes[1] + lanes[2] + lanes[3];
    }
  }
#endif
  for (; i < n; i += c) sum += static_cast<int32_t>(grey_of<F, C>(img.data + i, c));
  return sum;
}

template <Flavour F, int C>
void contrast(const Image& src, Image& dst, const Factor& k) {
  const int64_t n = src.size() / channels_of<C>(src);
  const int64_t sum = grey_sum<F, C>(src);
  float mean;
  if (F == Flavour::kPil) {   // ImageStat's mean in double, rounded by int(mean + 0.5)
    mean = static_cast<float>(static_cast<int>(static_cast<double>(sum) / static_cast<double>(n) + 0.5));
  } else {                    // torch.mean: the float32 sum (exact below 2**24) / count
    mean = static_cast<float>(sum) / static_cast<float>(n);
  }
  uint8_t lut[256];
  for (int v = 0; v < 256; v++) lut[v] = blend<F>(static_cast<float>(v), mean, k);
  apply_lut(src.data, dst.data, src.size(), lut);
}

template <Flavour F, int C>   // PIL's and torchvision's: a grey image has no saturation (the caller copies)
void saturation(const Image& src, Image& dst, const Factor& k) {
  const int c = channels_of<C>(src);
  const int64_t n = src.size();
  const uint8_t* in = src.data;
  uint8_t* out = dst.data;
  int64_t i = 0;
#ifdef __SSE4_1__
  if constexpr (C == 3) {
    for (; i + 16 <= n; i += 12) {
      const Planes p = load4(in + i);
      const v4f grey = grey4<F>(p);
      store4(out + i, blend4<F>(p.r, grey, k), blend4<F>(p.g, grey, k), blend4<F>(p.b, grey, k));
    }
  }
#endif
  for (; i < n; i += c) {
    const float grey = grey_of<F, C>(in + i, c);
    for (int b = 0; b < c; b++) out[i + b] = blend<F>(in[i + b], grey, k);
  }
}

template <Flavour F, int C>
void grayscale(const Image& src, Image& dst) {
  const int c = channels_of<C>(src);
  const int64_t n = src.size();
  int64_t i = 0;
#ifdef __SSE4_1__
  if constexpr (C == 3) {
    for (; i + 16 <= n; i += 12) {
      const v4i grey = __builtin_convertvector(grey4<F>(load4(src.data + i)), v4i);
      store4(dst.data + i, grey, grey, grey);
    }
  }
#endif
  for (; i < n; i += c) {
    const uint8_t grey = static_cast<uint8_t>(grey_of<F, C>(src.data + i, c));
    for (int b = 0; b < c; b++) dst.data[i + b] = grey;
  }
}

template <int C>   // four partial histograms, pixels taking turns: runs of one value (flat areas)
void histograms(const Image& img, std::vector<int64_t>& hist) {   // don't wait on each other's counts
  const int c = channels_of<C>(img);
  const int64_t n = img.size();
  std::vector<uint32_t> parts(4 * 256 * c, 0);
  uint32_t* part[4] = {parts.data(), parts.data() + 256 * c, parts.data() + 512 * c, parts.data() + 768 * c};
  int64_t i = 0;
  for (; i + 4 * c <= n; i += 4 * c)
    for (int k = 0; k < 4; k++)
      for (int b = 0; b < c; b++) part[k][b * 256 + img.data[i + k * c + b]]++;
  for (; i < n; i += c)
    for (int b = 0; b < c; b++) part[0][b * 256 + img.data[i + b]]++;
  hist.assign(256 * c, 0);
  for (int k = 0; k < 4; k++)
    for (int j = 0; j < 256 * c; j++) hist[j] += part[k][j];
}

template <int C>
void auto_contrast(const Image& src, Image& dst, Flavour f) {
  const int c = channels_of<C>(src);
  std::vector<int64_t> hist;
  histograms<C>(src, hist);
  std::vector<uint8_t> lut(256 * c);
  for (int b = 0; b < c; b++) {
    const int64_t* h = &hist[b * 256];
    int lo = 0, hi = 255;
    while (lo < 255 && !h[lo]) lo++;
    while (hi > 0 && !h[hi]) hi--;
    uint8_t* table = &lut[b * 256];
    for (int x = 0; x < 256; x++) {
      if (hi <= lo) { table[x] = static_cast<uint8_t>(x); continue; }
      if (f == Flavour::kPil) {
        const double scale = 255.0 / (hi - lo), offset = -lo * scale;
        const int v = static_cast<int>(x * scale + offset);
        table[x] = static_cast<uint8_t>(std::min(255, std::max(0, v)));
      } else if (f == Flavour::kTensorV1) {   // torch's 255 / t is t.reciprocal() * 255
        const float scale = (1.0f / static_cast<float>(hi - lo)) * 255.0f;
        table[x] = trunc_clamp((static_cast<float>(x) - lo) * scale);
      } else {
        const float inv_scale = static_cast<float>(hi - lo) * static_cast<float>(1.0 / 255.0);
        table[x] = trunc_clamp((static_cast<float>(x) - lo) / inv_scale);
      }
    }
  }
  apply_luts<C>(src, dst, lut.data());
}

template <int C>   // PIL's ImageOps.equalize; torchvision's kernels compute the same LUT
void equalize(const Image& src, Image& dst) {
  const int c = channels_of<C>(src);
  std::vector<int64_t> hist;
  histograms<C>(src, hist);
  std::vector<uint8_t> lut(256 * c);
  for (int b = 0; b < c; b++) {
    const int64_t* h = &hist[b * 256];
    int64_t total = 0, last = 0;
    int nonzero = 0;
    for (int x = 0; x < 256; x++) if (h[x]) { total += h[x]; last = h[x]; nonzero++; }
    const int64_t step = nonzero <= 1 ? 0 : (total - last) / 255;
    int64_t n = step / 2;
    for (int x = 0; x < 256; x++) {
      lut[b * 256 + x] = step ? static_cast<uint8_t>(std::min<int64_t>(255, n / step)) : static_cast<uint8_t>(x);
      n += h[x];
    }
  }
  apply_luts<C>(src, dst, lut.data());
}

void table_op(const Image& src, Image& dst, const Step& s) {   // the ops that are one LUT for every channel
  uint8_t lut[256];
  for (int x = 0; x < 256; x++) {
    int v = x;
    if (s.op == kPosterize) v = x & (0xff ^ ((1 << (8 - static_cast<int>(s.p[0]))) - 1));
    if (s.op == kSolarize) v = static_cast<float>(x) >= s.p[0] ? 255 - x : x;
    if (s.op == kInvert) v = 255 - x;
    if (s.op == kSolarizeAdd) v = static_cast<float>(x) < s.p[1] ? std::min(255, x + static_cast<int>(s.p[0])) : x;
    lut[x] = static_cast<uint8_t>(v);
  }
  apply_lut(src.data, dst.data, src.size(), lut);
}

void erase(const Image& src, Image& dst, const Step& s, const float* value) {
  if (src.data != dst.data) std::memcpy(dst.data, src.data, src.size());
  const int top = static_cast<int>(s.p[0]), left = static_cast<int>(s.p[1]);
  const int bottom = std::min(dst.height, top + static_cast<int>(s.p[2]));
  const int right = std::min(dst.width, left + static_cast<int>(s.p[3]));
  const int c = dst.channels;
  uint8_t pixel[4];
  for (int b = 0; b < c; b++) pixel[b] = trunc_clamp(value[b]);
  for (int y = std::max(0, top); y < bottom; y++)
    for (int x = std::max(0, left); x < right; x++)
      std::memcpy(dst.data + (static_cast<int64_t>(y) * dst.width + x) * c, pixel, c);
}

// The colour ops that depend on the flavour and the channel count, each instantiated for both
void colour_op(const Image& src, Image& dst, const Step& s, Flavour flavour) {
  by_flavour(flavour, [&](auto f) {
    constexpr Flavour F = decltype(f)::value;
    if (s.op == kBrightness) return brightness<F>(src, dst, Factor(s));
    by_channels(src.channels, [&](auto channels) {
      constexpr int C = decltype(channels)::value;
      if (s.op == kContrast) return contrast<F, C>(src, dst, Factor(s));
      if (src.channels == 1) {   // Color and Grayscale leave a grey image as it is
        if (src.data != dst.data) std::memcpy(dst.data, src.data, src.size());
        return;
      }
      if constexpr (C != 1) {
        if (s.op == kColor) return saturation<F, C>(src, dst, Factor(s));
        grayscale<F, C>(src, dst);
      }
    });
  });
}

}  // namespace

void pointwise(const Image& src, Image& dst, const Step& s, const Settings& settings) {
  const Flavour f = settings.flavour;
  switch (s.op) {
    case kBrightness: case kColor: case kContrast: case kGrayscale: return colour_op(src, dst, s, f);
    case kAutoContrast: return by_channels(src.channels, [&](auto c) { auto_contrast<decltype(c)::value>(src, dst, f); });
    case kEqualize: return by_channels(src.channels, [&](auto c) { equalize<decltype(c)::value>(src, dst); });
    case kHue: return hue(src, dst, s.p[0], f);
    case kErase: return erase(src, dst, s, settings.erase_value);
    case kPosterize: case kSolarize: case kInvert: case kSolarizeAdd: return table_op(src, dst, s);
    default:
      if (src.data != dst.data) std::memcpy(dst.data, src.data, src.size());
  }
}

namespace {

// -- sharpness: a blend with the image smoothed by PIL's SMOOTH kernel, border kept -------------

// The border (first and last rows, first and last pixels of the others): copied, or for v1,
// which blends the border with itself too (float32 may move it by one), through that table
void sharpness_border(const Image& src, Image& dst, const uint8_t* lut) {
  const int64_t row = static_cast<int64_t>(src.width) * src.channels, c = src.channels;
  auto copy = [&](int64_t at, int64_t n) {
    if (lut) apply_lut(src.data + at, dst.data + at, n, lut);
    else std::memcpy(dst.data + at, src.data + at, n);
  };
  copy(0, row);
  for (int y = 1; y < src.height - 1; y++) {
    copy(y * row, c);
    copy((y + 1) * row - c, c);
  }
  copy((src.height - 1) * row, row);
}

// The interior, each byte from the 3x3 neighbourhood of its channel: in a row of interleaved
// channels the neighbours are `c` bytes away, so one loop serves every channel
template <Flavour F, int C>
void sharpness_interior(const Image& src, Image& dst, const Factor& k) {
  const int c = channels_of<C>(src);
  const int64_t row = static_cast<int64_t>(src.width) * c;
  const float edge = 1.0f / 13.0f, centre = 5.0f / 13.0f;
  for (int y = 1; y < src.height - 1; y++) {
    const uint8_t* up = src.data + (y - 1) * row;
    const uint8_t* mid = up + row;
    const uint8_t* down = mid + row;
    uint8_t* out = dst.data + y * row;
    for (int64_t i = c; i < row - c; i++) {
      const float x0 = mid[i];
      float smooth;
      if constexpr (F == Flavour::kPil) {   // rows y+1, y, y-1, each (left * k0 + centre * k1) + right * k2
        float ss = 0.5f;
        ss += (static_cast<float>(down[i - c]) * edge + static_cast<float>(down[i]) * edge) + static_cast<float>(down[i + c]) * edge;
        ss += (static_cast<float>(mid[i - c]) * edge + x0 * centre) + static_cast<float>(mid[i + c]) * edge;
        ss += (static_cast<float>(up[i - c]) * edge + static_cast<float>(up[i]) * edge) + static_cast<float>(up[i + c]) * edge;
        smooth = floor_positive(ss);   // PIL clips to [0, 255] first: ss is in [0.5, 255.5] already
      } else {                              // conv2d in float32, rounded half to even
        float ss = static_cast<float>(up[i - c]) * edge;
        ss = std::fma(static_cast<float>(up[i]), edge, ss);
        ss = std::fma(static_cast<float>(up[i + c]), edge, ss);
        ss = std::fma(static_cast<float>(mid[i - c]), edge, ss);
        ss = std::fma(x0, centre, ss);
        ss = std::fma(static_cast<float>(mid[i + c]), edge, ss);
        ss = std::fma(static_cast<float>(down[i - c]), edge, ss);
        ss = std::fma(static_cast<float>(down[i]), edge, ss);
        ss = std::fma(static_cast<float>(down[i + c]), edge, ss);
        smooth = std::nearbyint(ss);
      }
      if constexpr (F == Flavour::kTensor) out[i] = trunc_clamp(std::fma(smooth - x0, k.rest, x0));
      else out[i] = blend<F>(x0, smooth, k);
    }
  }
}

}  // namespace

void sharpness(const Image& src, Image& dst, const Step& step, Flavour flavour) {
  const Factor factor(step);
  if (src.height <= 2 || src.width <= 2) {
    std::memcpy(dst.data, src.data, src.size());
    return;
  }
  uint8_t self_blend[256];
  if (flavour == Flavour::kTensorV1)
    for (int v = 0; v < 256; v++) self_blend[v] = blend<Flavour::kTensorV1>(v, v, factor);
  sharpness_border(src, dst, flavour == Flavour::kTensorV1 ? self_blend : nullptr);
  by_flavour(flavour, [&](auto f) {
    by_channels(src.channels, [&](auto c) {
      sharpness_interior<decltype(f)::value, decltype(c)::value>(src, dst, factor);
    });
  });
}

// -- the sequence --------------------------------------------------------------------------

const char* check_step(const Step& s, Flavour f) {
  if (s.op < kSkip || s.op >= kNumOps) return "unknown op code";
  const bool warp_op = s.op >= kShearX && s.op <= kRotate;
  if (warp_op) {
    const int r = static_cast<int>(s.p[1]);
    if (r != kNearest && r != kBilinear && r != kBicubic) return "resample must be 0, 2 or 3";
    if (r == kBicubic && f != Flavour::kPil) return "bicubic warps are PIL's only";
    if ((s.op == kShearX || s.op == kShearY) && s.p[2] == 0.0f && f != Flavour::kPil)
      return "timm's shear (p2 = 0) is PIL's only";
    if ((s.op == kShearX || s.op == kShearY) && !(s.p[2] == 0.0f || s.p[2] == 1.0f || s.p[2] == 2.0f))
      return "the shear form p2 must be 0 (timm), 1 (torchvision v2) or 2 (v1)";
  }
  if (s.op == kPosterize && !(s.p[0] >= 0.0f && s.p[0] <= 8.0f)) return "posterize keeps 0 to 8 bits";
  if (s.op == kHue && !(s.p[0] >= -0.5f && s.p[0] <= 0.5f)) return "the hue factor must be in [-0.5, 0.5]";
  if (s.op == kGaussianBlur) {
    if (!(s.p[0] > 0.0f)) return "the blur's sigma must be > 0";
    for (int k = 1; k <= 2; k++)
      if (!(s.p[k] >= 1.0f && s.p[k] <= 1023.0f && std::fmod(s.p[k], 2.0f) == 1.0f))
        return "the blur's kernel sizes must be odd, 1 to 1023";
  }
  if (s.op == kPilBlur && !(s.p[0] >= 0.0f && s.p[0] <= 1000.0f)) return "PIL's blur radius must be in [0, 1000]";
  if ((s.op == kBrightness || s.op == kColor || s.op == kContrast || s.op == kSharpness) && !(static_cast<double>(s.p[0]) + s.p[1] >= 0.0))
    return "the enhancement factor must be >= 0";
  return "";
}

namespace {

bool is_noop(const Step& s) { return s.op == kSkip || s.op == kIdentity; }

// Warps, flips, sharpness and the blur read pixels other than the one they write: not in place
bool needs_new_buffer(const Step& s) {
  return (s.op >= kShearX && s.op <= kRotate) || s.op == kSharpness || s.op == kFlipH || s.op == kFlipV ||
         s.op == kGaussianBlur || s.op == kPilBlur;
}

uint8_t* buffer(std::vector<uint8_t>& v, int64_t size) {
  if (static_cast<int64_t>(v.size()) < size) v.resize(size);
  return v.data();
}

}  // namespace

void augment(const uint8_t* in, uint8_t* out, int height, int width, int channels, const Step* steps,
             int num_steps, const Settings& settings, Scratch& scratch) {
  const int64_t size = static_cast<int64_t>(height) * width * channels;
  int last = -1;
  for (int k = 0; k < num_steps; k++) if (!is_noop(steps[k])) last = k;
  if (last < 0) {
    std::memcpy(out, in, size);
    return;
  }
  // The first op reads `in`, the last writes `out`; between them the scratch buffers take turns,
  // an op that can work in place staying where it is
  Image cur{const_cast<uint8_t*>(in), height, width, channels};
  for (int k = 0; k <= last; k++) {
    const Step& s = steps[k];
    if (is_noop(s)) continue;
    Image next = cur;
    if (k == last) next.data = out;
    else if (needs_new_buffer(s) || cur.data == in) next.data = buffer(cur.data == scratch.a.data() ? scratch.b : scratch.a, size);
    if (s.op >= kShearX && s.op <= kRotate) warp(cur, next, s, settings);
    else if (s.op == kSharpness) sharpness(cur, next, s, settings.flavour);
    else if (s.op == kGaussianBlur) gaussian_blur(cur, next, s, scratch.row);
    else if (s.op == kPilBlur) pil_blur(cur, next, s.p[0], scratch);
    else if (s.op == kFlipH || s.op == kFlipV) flip(cur, next, s.op == kFlipH);
    else pointwise(cur, next, s, settings);
    cur = next;
  }
}

}  // namespace augk
