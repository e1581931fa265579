// The warps (shear, translate, rotate) and flips of augment_kernels.h.
//
// PIL flavour: Image.transform(AFFINE) / Image.rotate as Pillow's Geometry.c computes them:
// the matrix in double as the Python side builds it (torchvision's _get_inverse_affine_matrix,
// Image.rotate's rounded cos/sin), nearest through Pillow's three paths (the scale-only
// table, 16.16 fixed point, else double), bilinear and bicubic with Pillow's clamped
// neighbours and truncation; the output starts as the fill (torchvision and timm always pass
// a fillcolor).
// Tensor flavour: torchvision's affine grid in float32 (theta / (w/2, h/2), one product and
// sum at a time, which is torch's bmm bit for bit) and grid_sample (align_corners=False,
// zeros outside) of the image and of a channel of ones, the mask that blends in the fill.
//
// Speed: the loops are instantiated per channel count and resample, with per-row work hoisted
// (the products with the row's coordinate: a sum of the same rounded terms in the same order);
// the filters run the channels of a pixel side by side in SIMD lanes (double for PIL, float
// for torch), each lane the scalar arithmetic exactly; where Pillow's doubles hold small
// integers (bicubic's terms on uint8 taps), int lanes compute the same values.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "augment_kernels.h"
#include "simd.h"

namespace augk {
namespace {

constexpr double kPi = 3.141592653589793;
double radians(double degrees) { return degrees * (kPi / 180.0); }   // as Python's math.radians
double to_degrees(double radians) { return radians * (180.0 / kPi); }

// torchvision's _get_inverse_affine_matrix (output pixel -> input pixel, in double): v1's and
// v2's group the products differently, so their last bits differ
void inverse_affine(double cx, double cy, double angle, double tx, double ty, double shear_x, double shear_y,
                    bool v1, double m[6]) {
  const double rot = radians(angle), sx = radians(shear_x), sy = radians(shear_y);
  if (v1) {
    const double a = std::cos(rot - sy) / std::cos(sy);
    const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
    const double c = std::sin(rot - sy) / std::cos(sy);
    const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
    m[0] = d; m[1] = -b; m[2] = 0.0; m[3] = -c; m[4] = a; m[5] = 0.0;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
    return;
  }
  const double cos_sy = std::cos(sy), tan_sx = std::tan(sx), cxt = cx + tx, cyt = cy + ty;
  const double a = std::cos(rot - sy) / cos_sy;
  const double b = -(a * tan_sx + std::sin(rot));
  const double c = std::sin(rot - sy) / cos_sy;
  const double d = std::cos(rot) - c * tan_sx;
  m[0] = d; m[1] = -b; m[2] = 0.0; m[3] = -c; m[4] = a; m[5] = 0.0;
  m[2] += cx - m[0] * cxt - m[1] * cyt;
  m[5] += cy - m[3] * cxt - m[4] * cyt;
}

// Python's round(x, 15): the decimal rounding, printed exactly by the C library
double round15(double x) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.15f", x);
  return std::strtod(text, nullptr);
}

double python_mod(double x, double y) {   // Python's float %: the sign of y
  double r = std::fmod(x, y);
  if (r != 0.0 && ((r < 0.0) != (y < 0.0))) r += y;
  return r == 0.0 ? std::copysign(0.0, y) : r;
}

// The PIL-flavour matrix of a step, or false for Image.rotate's exact fast paths (handled by
// the caller: 0 is a copy, 180 a flip both ways, 90/270 of a square image a transpose).
bool pil_matrix(const Step& s, int w, int h, double m[6], int& quarter_turns) {
  quarter_turns = -1;
  const double v = s.p[0];
  if (s.op == kShearX || s.op == kShearY) {
    const int form = static_cast<int>(s.p[2]);
    if (form != 0) {   // torchvision (1: v2, 2: v1): by atan(m) degrees about (0, 0)
      const double degrees = to_degrees(std::atan(v));
      inverse_affine(0.0, 0.0, 0.0, 0.0, 0.0, s.op == kShearX ? degrees : 0.0, s.op == kShearY ? degrees : 0.0,
                     form == 2, m);
    } else {           // timm: (1, m, 0, 0, 1, 0) or (1, 0, 0, m, 1, 0)
      m[0] = 1.0; m[1] = s.op == kShearX ? v : 0.0; m[2] = 0.0;
      m[3] = s.op == kShearY ? v : 0.0; m[4] = 1.0; m[5] = 0.0;
    }
    return true;
  }
  if (s.op == kTranslateX || s.op == kTranslateY) {
    const double shift = v;
    m[0] = 1.0; m[1] = 0.0; m[2] = s.op == kTranslateX ? -shift : 0.0;
    m[3] = 0.0; m[4] = 1.0; m[5] = s.op == kTranslateY ? -shift : 0.0;
    return true;
  }
  const double angle = python_mod(v, 360.0);   // Image.rotate
  if (angle == 0.0 || angle == 180.0 || ((angle == 90.0 || angle == 270.0) && w == h)) {
    quarter_turns = static_cast<int>(angle / 90.0);
    return false;
  }
  const double r = -radians(angle), cx = w / 2.0, cy = h / 2.0;
  m[0] = round15(std::cos(r)); m[1] = round15(std::sin(r)); m[2] = 0.0;
  m[3] = round15(-std::sin(r)); m[4] = round15(std::cos(r)); m[5] = 0.0;
  const double x = -cx, y = -cy;
  const double c = m[0] * x + m[1] * y + m[2], f = m[3] * x + m[4] * y + m[5];
  m[2] = c + cx;
  m[5] = f + cy;
  return true;
}

// -- pixels as SIMD lanes: channel b in lane b, lanes past the channel count zero ------------

using simd::fma4;
using simd::round_even4;
using simd::v4d;
using simd::v4f;
using simd::v4i;

template <int C>
inline v4i load_pixel(const uint8_t* p, int c) {
#ifdef __SSE4_1__
  if constexpr (C == 3 || C == 4) {
    uint32_t bits = p[0] | (p[1] << 8) | (p[2] << 16);
    if constexpr (C == 4) bits |= static_cast<uint32_t>(p[3]) << 24;
    return reinterpret_cast<v4i>(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(bits))));
  }
#endif
  v4i v = {0, 0, 0, 0};
  for (int b = 0; b < (C ? C : c); b++) v[b] = p[b];
  return v;
}

template <int C>
inline void store_pixel(uint8_t* out, v4i v, int c) {   // lanes already in [0, 255]
#ifdef __SSE4_1__
  if constexpr (C == 3 || C == 4) {
    const __m128i words = _mm_packus_epi32(reinterpret_cast<__m128i>(v), reinterpret_cast<__m128i>(v));
    const uint32_t bytes = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_packus_epi16(words, words)));
    std::memcpy(out, &bytes, C);
    return;
  }
#endif
  for (int b = 0; b < (C ? C : c); b++) out[b] = static_cast<uint8_t>(v[b]);
}

template <int C>
inline void copy_pixel(uint8_t* out, const uint8_t* in, int c) {
  if constexpr (C == 0) std::memcpy(out, in, c);
  else for (int b = 0; b < C; b++) out[b] = in[b];
}

inline v4d to_double(v4i v) {
#ifdef __AVX__   // one instruction; GCC lowers the generic conversion to two halves and a shuffle
  return reinterpret_cast<v4d>(_mm256_cvtepi32_pd(reinterpret_cast<__m128i>(v)));
#else
  return __builtin_convertvector(v, v4d);
#endif
}
inline v4f to_float(v4i v) { return __builtin_convertvector(v, v4f); }

// Where each output pixel of a row comes from: its index in the source (int, as Pillow's
// coordinates are), -1 outside
inline v4i offsets4(v4i sx, v4i sy, int width, int height) {
  const v4i inside = (sx >= 0) & (sx < width) & (sy >= 0) & (sy < height);
  return inside ? sy * width + sx : v4i{} - 1;
}

inline int32_t offset1(int sx, int sy, int width, int height) {
  return sx >= 0 && sx < width && sy >= 0 && sy < height ? sy * width + sx : -1;
}

template <int C>
void copy_row(uint8_t* out, const uint8_t* src, const int32_t* at, int n, const uint8_t* outside, int c) {
  for (int x = 0; x < n; x++, out += c) copy_pixel<C>(out, at[x] >= 0 ? src + static_cast<int64_t>(at[x]) * c : outside, c);
}

template <int C>
void fill_image(Image& dst, const uint8_t* fill) {
  const int c = channels_of<C>(dst);
  for (int64_t i = 0; i < dst.size(); i += c) copy_pixel<C>(dst.data + i, fill, c);
}

// Image.rotate's transposes: quarter turns counter-clockwise
void rotate_quarters(const Image& src, Image& dst, int turns) {
  const int h = src.height, w = src.width, c = src.channels;
  for (int y = 0; y < h; y++) {
    for (int x = 0; x < w; x++) {
      int sy = y, sx = x;
      if (turns == 1) { sy = x; sx = w - 1 - y; }
      if (turns == 2) { sy = h - 1 - y; sx = w - 1 - x; }
      if (turns == 3) { sy = h - 1 - x; sx = y; }
      std::memcpy(dst.data + (static_cast<int64_t>(y) * w + x) * c,
                  src.data + (static_cast<int64_t>(sy) * w + sx) * c, c);
    }
  }
}

inline int coord(double v) { return v < 0.0 ? -1 : static_cast<int>(v); }          // Pillow's COORD
inline int floor_int(double v) { return v < 0.0 ? static_cast<int>(std::floor(v)) : static_cast<int>(v); }

const uint8_t* pixel(const Image& img, int y, int x) {
  return img.data + (static_cast<int64_t>(y) * img.width + x) * img.channels;
}

template <int C>
void pil_nearest_scale(const Image& src, Image& dst, const double a[6]) {   // ImagingScaleAffine
  const int w = dst.width, h = dst.height, c = channels_of<C>(src);
  std::vector<int> column(w, -1);
  double xo = a[2] + a[0] * 0.5, yo = a[5] + a[4] * 0.5;
  for (int x = 0; x < w; x++, xo += a[0]) {
    const int xin = coord(xo);
    if (xin >= 0 && xin < src.width) column[x] = xin;
  }
  for (int y = 0; y < h; y++, yo += a[4]) {
    const int yi = coord(yo);
    if (yi < 0 || yi >= src.height) continue;
    const uint8_t* in = pixel(src, yi, 0);
    uint8_t* out = dst.data + static_cast<int64_t>(y) * w * c;
    for (int x = 0; x < w; x++)
      if (column[x] >= 0) copy_pixel<C>(out + x * c, in + column[x] * c, c);
  }
}

bool fits_fixed(const double a[6], int x, int y) {
  return std::fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && std::fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

template <int C>
void pil_nearest_fixed(const Image& src, Image& dst, const double a[6], const uint8_t* fill) {   // affine_fixed, 16.16
  auto fix = [](double v) { return floor_int(v * 65536.0 + 0.5); };
  const int a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
  int a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5), a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
  const int c = channels_of<C>(src), w = dst.width;
  std::vector<int32_t> at(w);
  // Pillow steps xx += a0 along the row: a2 + x * a0 in the same 32-bit wrap-around
  const v4i lane = {0, 1, 2, 3};
  for (int y = 0; y < dst.height; y++, a2 += a1, a5 += a4) {
    int x = 0;
    for (; x + 4 <= w; x += 4) {
      const v4i xx = reinterpret_cast<v4i>(static_cast<uint32_t>(a2) + (lane + x) * static_cast<uint32_t>(a0));
      const v4i yy = reinterpret_cast<v4i>(static_cast<uint32_t>(a5) + (lane + x) * static_cast<uint32_t>(a3));
      const v4i offsets = offsets4(xx >> 16, yy >> 16, src.width, src.height);
      std::memcpy(at.data() + x, &offsets, sizeof(offsets));
    }
    for (; x < w; x++) {
      const int xin = static_cast<int>(static_cast<uint32_t>(a2) + static_cast<uint32_t>(x) * static_cast<uint32_t>(a0)) >> 16;
      const int yin = static_cast<int>(static_cast<uint32_t>(a5) + static_cast<uint32_t>(x) * static_cast<uint32_t>(a3)) >> 16;
      at[x] = offset1(xin, yin, src.width, src.height);
    }
    copy_row<C>(dst.data + static_cast<int64_t>(y) * w * c, src.data, at.data(), w, fill, c);
  }
}

template <int C>
void pil_nearest_float(const Image& src, Image& dst, const double a[6]) {
  double xo = a[2] + a[1] * 0.5 + a[0] * 0.5, yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
  const int c = channels_of<C>(src);
  for (int y = 0; y < dst.height; y++, xo += a[1], yo += a[4]) {
    double xx = xo, yy = yo;
    uint8_t* out = dst.data + static_cast<int64_t>(y) * dst.width * c;
    for (int x = 0; x < dst.width; x++, xx += a[0], yy += a[3]) {
      const int xin = coord(xx), yin = coord(yy);
      if (xin >= 0 && xin < src.width && yin >= 0 && yin < src.height) copy_pixel<C>(out + x * c, pixel(src, yin, xin), c);
    }
  }
}

template <int C>
void pil_nearest(const Image& src, Image& dst, const double a[6], const uint8_t* fill) {   // ImagingTransformAffine's choice
  const int w = dst.width, h = dst.height;
  if (a[1] == 0 && a[3] == 0) {
    fill_image<C>(dst, fill);
    return pil_nearest_scale<C>(src, dst, a);
  }
  if (fits_fixed(a, 0, 0) && fits_fixed(a, w, h) && fits_fixed(a, 0, h) && fits_fixed(a, w, 0))
    return pil_nearest_fixed<C>(src, dst, a, fill);
  fill_image<C>(dst, fill);
  pil_nearest_float<C>(src, dst, a);
}

inline int clip(int v, int size) { return v < 0 ? 0 : v < size ? v : size - 1; }

// Pillow's BICUBIC macro, on the channels side by side. Pillow's row pass runs in int on
// uint8 taps: the same small integers, exact in double. With d = 0 it is v2 exactly (v2 plus a
// zero product), and so is the bilinear blend a + (b - a) * 0: the shortcuts below
inline v4d cubic(v4d v1, v4d v2, v4d v3, v4d v4, double d) {
  const v4d p2 = -v1 + v3, p3 = 2.0 * (v1 - v2) + v3 - v4, p4 = -v1 + v2 - v3 + v4;
  return v2 + d * (p2 + d * (p3 + d * p4));
}

// The source image's pixels as double lanes: one at a time, or a run of consecutive pixels
// from one 16-byte load where 16 bytes are there to read
template <int C>
struct Source {
  const Image& img;
  int c;
  const uint8_t* end;
  explicit Source(const Image& image) : img(image), c(channels_of<C>(image)), end(image.data + image.size()) {}

  const uint8_t* row(int y) const { return img.data + static_cast<int64_t>(y) * img.width * c; }
  v4i at_int(const uint8_t* p) const {
#ifdef __SSE4_1__
    if constexpr (C == 3) {   // one 4-byte load where there are 4 bytes: lane 3 computed, never stored
      if (p + 4 <= end) {
        int32_t bits;
        std::memcpy(&bits, p, 4);
        return reinterpret_cast<v4i>(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(bits)));
      }
    }
#endif
    return load_pixel<C>(p, c);
  }
  v4d at(const uint8_t* p) const { return to_double(at_int(p)); }

  template <int N>   // N <= 4 pixels from p on, as int lanes; false if this cannot read them at once
  bool run(const uint8_t* p, v4i out[N]) const {
#ifdef __SSE4_1__
    if constexpr (C == 3 || C == 4) {
      if (p + 16 > end) return false;
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      out[0] = reinterpret_cast<v4i>(_mm_cvtepu8_epi32(bytes));
      out[1] = reinterpret_cast<v4i>(_mm_cvtepu8_epi32(_mm_srli_si128(bytes, C)));
      if constexpr (N == 4) {
        out[2] = reinterpret_cast<v4i>(_mm_cvtepu8_epi32(_mm_srli_si128(bytes, 2 * C)));
        out[3] = reinterpret_cast<v4i>(_mm_cvtepu8_epi32(_mm_srli_si128(bytes, 3 * C)));
      }
      return true;   // lane 3 of a 3-channel pixel holds the next byte: computed, never stored
    }
#endif
    return false;
  }
  template <int N>
  bool run(const uint8_t* p, v4d out[N]) const {
    v4i ints[N];
    if (!run<N>(p, ints)) return false;
    for (int k = 0; k < N; k++) out[k] = to_double(ints[k]);
    return true;
  }
};

// cubic() on four uint8 taps: its p2, p3 and p4 are then small integers, which int lanes
// compute exactly as double ones do, in a third of the latency and off the FP ports
inline v4d cubic_taps(v4i v1, v4i v2, v4i v3, v4i v4, double d) {
  const v4i p2 = v3 - v1, p3 = 2 * (v1 - v2) + v3 - v4, p4 = v2 - v1 - v3 + v4;
  return to_double(v2) + d * (to_double(p2) + d * (to_double(p3) + d * to_double(p4)));
}

// Bicubic's row pass at taps xi (contiguous: ix..ix + 3 all inside the row)
template <int C>
inline v4d row_cubic(const Source<C>& src, const uint8_t* row, const int xi[4], bool contiguous, double dx) {
  if (dx == 0.0) return src.at(row + xi[1]);
  v4i t[4];
  if (contiguous && src.template run<4>(row + xi[0], t)) return cubic_taps(t[0], t[1], t[2], t[3], dx);
  return cubic_taps(src.at_int(row + xi[0]), src.at_int(row + xi[1]), src.at_int(row + xi[2]),
                    src.at_int(row + xi[3]), dx);
}

template <int C>
inline v4d row_linear(const Source<C>& src, const uint8_t* row, int x0, int x1, bool contiguous, double dx) {
  if (dx == 0.0) return src.at(row + x0);
  v4d t[2];
  if (!(contiguous && src.template run<2>(row + x0, t))) t[0] = src.at(row + x0), t[1] = src.at(row + x1);
  return t[0] + (t[1] - t[0]) * dx;
}

// The output pixel from the source position (xin, yin), already shifted by -0.5, inside
template <int C>
inline v4i pil_bilinear_at(const Source<C>& src, double xin, double yin) {
  const int xs = src.img.width, ys = src.img.height, c = src.c;
  const int ix = floor_int(xin), iy = floor_int(yin);
  const double dx = xin - ix, dy = yin - iy;
  const int x0 = clip(ix, xs) * c, x1 = clip(ix + 1, xs) * c;
  const bool contiguous = ix >= 0 && ix + 1 < xs;
  const v4d v1 = row_linear(src, src.row(clip(iy, ys)), x0, x1, contiguous, dx);
  if (dy == 0.0) return __builtin_convertvector(v1, v4i);
  const v4d v2 = iy + 1 >= 0 && iy + 1 < ys ? row_linear(src, src.row(iy + 1), x0, x1, contiguous, dx) : v1;
  return __builtin_convertvector(v1 + (v2 - v1) * dy, v4i);   // truncated; within [0, 255]
}

template <int C>
inline v4i pil_bicubic_at(const Source<C>& src, double xin, double yin) {
  const int xs = src.img.width, ys = src.img.height, c = src.c;
  const int ix = floor_int(xin) - 1, iy = floor_int(yin) - 1;
  const double dx = xin - (ix + 1), dy = yin - (iy + 1);
  const int xi[4] = {clip(ix, xs) * c, clip(ix + 1, xs) * c, clip(ix + 2, xs) * c, clip(ix + 3, xs) * c};
  const bool contiguous = ix >= 0 && ix + 3 < xs;
  v4d r;
  if (dy == 0.0) {   // yin is a whole row, inside: row iy + 1 alone
    r = row_cubic(src, src.row(iy + 1), xi, contiguous, dx);
  } else if (dx == 0.0) {   // a whole column: the row pass gives the taps themselves, integers
    v4i v[4];
    v[0] = src.at_int(src.row(clip(iy, ys)) + xi[1]);
    for (int k = 1; k < 4; k++) {
      const int yy = iy + k;
      v[k] = yy >= 0 && yy < ys ? src.at_int(src.row(yy) + xi[1]) : v[k - 1];
    }
    r = cubic_taps(v[0], v[1], v[2], v[3], dy);
  } else {
    v4d v[4];
    v[0] = row_cubic(src, src.row(clip(iy, ys)), xi, contiguous, dx);
    for (int k = 1; k < 4; k++) {   // Pillow repeats the last row inside for rows below the image
      const int yy = iy + k;
      v[k] = yy >= 0 && yy < ys ? row_cubic(src, src.row(yy), xi, contiguous, dx) : v[k - 1];
    }
    r = cubic(v[0], v[1], v[2], v[3], dy);
  }
  const v4d zero = {0.0, 0.0, 0.0, 0.0}, top = {255.0, 255.0, 255.0, 255.0};
  r = r <= zero ? zero : r;
  r = r >= top ? top : r;
  return __builtin_convertvector(r, v4i);
}

template <int C, int R>   // Pillow's generic transform with a filter
void pil_filtered(const Image& src, Image& dst, const double a[6], const uint8_t* fill) {
  const int xs = src.width, ys = src.height, c = channels_of<C>(src);
  const Source<C> source(src);
  for (int y = 0; y < dst.height; y++) {
    const double yo = y + 0.5, a1y = a[1] * yo, a4y = a[4] * yo;
    uint8_t* out = dst.data + static_cast<int64_t>(y) * dst.width * c;
    for (int x = 0; x < dst.width; x++, out += c) {
      const double xo = x + 0.5;
      const double xin = a[0] * xo + a1y + a[2], yin = a[3] * xo + a4y + a[5];
      if (xin < 0.0 || xin >= xs || yin < 0.0 || yin >= ys) {
        copy_pixel<C>(out, fill, c);
        continue;
      }
      if constexpr (R == kBilinear) store_pixel<C>(out, pil_bilinear_at(source, xin - 0.5, yin - 0.5), c);
      else store_pixel<C>(out, pil_bicubic_at(source, xin - 0.5, yin - 0.5), c);
    }
  }
}

void pil_warp(const Image& src, Image& dst, const Step& s, const Settings& settings) {
  double m[6];
  int turns;
  if (!pil_matrix(s, src.width, src.height, m, turns)) return rotate_quarters(src, dst, turns);
  uint8_t fill[4];
  for (int b = 0; b < src.channels; b++)   // torchvision's _parse_fill: int(fill), none is 0
    fill[b] = settings.fill ? static_cast<uint8_t>(static_cast<int>(settings.fill[b])) : 0;
  const int resample = static_cast<int>(s.p[1]);
  by_channels(src.channels, [&](auto channels) {
    constexpr int C = decltype(channels)::value;
    if (resample == kNearest) pil_nearest<C>(src, dst, m, fill);
    else if (resample == kBilinear) pil_filtered<C, kBilinear>(src, dst, m, fill);
    else pil_filtered<C, kBicubic>(src, dst, m, fill);
  });
}

// -- torchvision's tensor warp ---------------------------------------------------------------

void tensor_matrix(const Step& s, int w, int h, bool v1, double m[6]) {
  const double v = s.p[0];
  if (s.op == kShearX || s.op == kShearY) {   // about the corner: centre_f = (0, 0) - size / 2
    const double degrees = to_degrees(std::atan(v));
    inverse_affine(0.0 - w * 0.5, 0.0 - h * 0.5, 0.0, 0.0, 0.0, s.op == kShearX ? degrees : 0.0,
                   s.op == kShearY ? degrees : 0.0, v1, m);
  } else if (s.op == kTranslateX || s.op == kTranslateY) {
    inverse_affine(0.0, 0.0, 0.0, s.op == kTranslateX ? v : 0.0, s.op == kTranslateY ? v : 0.0, 0.0, 0.0, v1, m);
  } else {
    inverse_affine(0.0, 0.0, -v, 0.0, 0.0, 0.0, 0.0, v1, m);
  }
}

// The source position (float32, input pixels) of each output pixel of a row: torch's affine
// grid, then grid_sample's unnormalization (g + 1) * (size / 2) - 0.5, which torch's compiler fuses
struct TensorGrid {
  float r[3][2];
  int w, h;
  TensorGrid(const double m[6], int width, int height) : w(width), h(height) {
    const float half[2] = {static_cast<float>(0.5 * w), static_cast<float>(0.5 * h)};
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 3; k++) r[k][j] = static_cast<float>(m[j * 3 + k]) / half[j];
  }
  void row(int y, float* xs, float* ys) const {
    const float by = static_cast<float>(y) - static_cast<float>(h * 0.5) + 0.5f;
    const float by_x = by * r[1][0], by_y = by * r[1][1];
    const float x_scale = static_cast<float>(w) / 2.0f, y_scale = static_cast<float>(h) / 2.0f;
    const float x_shift = static_cast<float>(w * 0.5);
    for (int x = 0; x < w; x++) {
      const float bx = static_cast<float>(x) - x_shift + 0.5f;
      const float gx = (bx * r[0][0] + by_x) + r[2][0];
      const float gy = (bx * r[0][1] + by_y) + r[2][1];
      xs[x] = std::fma(gx + 1.0f, x_scale, -0.5f);
      ys[x] = std::fma(gy + 1.0f, y_scale, -0.5f);
    }
  }
};

inline uint8_t round_even(float v) { return static_cast<uint8_t>(std::nearbyint(v)); }

template <int C>
void tensor_nearest(const Image& src, Image& dst, const TensorGrid& grid, const float* fill) {
  const int c = channels_of<C>(src), w = dst.width;
  uint8_t outside[4];
  for (int b = 0; b < c; b++) outside[b] = round_even(fill ? fill[b] : 0.0f);
  std::vector<float> xs(w), ys(w);
  std::vector<int32_t> at(w);
  for (int y = 0; y < dst.height; y++) {
    grid.row(y, xs.data(), ys.data());
    int x = 0;
    for (; x + 4 <= w; x += 4) {   // nearbyint, lane by lane (then exact in int)
      v4f xv, yv;
      std::memcpy(&xv, xs.data() + x, sizeof(xv));
      std::memcpy(&yv, ys.data() + x, sizeof(yv));
      const v4i offsets = offsets4(__builtin_convertvector(round_even4(xv), v4i),
                                   __builtin_convertvector(round_even4(yv), v4i), src.width, src.height);
      std::memcpy(at.data() + x, &offsets, sizeof(offsets));
    }
    for (; x < w; x++) {
      const int sx = static_cast<int>(std::nearbyint(xs[x])), sy = static_cast<int>(std::nearbyint(ys[x]));
      at[x] = offset1(sx, sy, src.width, src.height);
    }
    copy_row<C>(dst.data + static_cast<int64_t>(y) * w * c, src.data, at.data(), w, outside, c);
  }
}

// grid_sample bilinear of the image and of the ones mask, then the fill blended by the mask
template <int C, bool kV1, bool kFill>
void tensor_bilinear(const Image& src, Image& dst, const TensorGrid& grid, const float* fill) {
  const int c = channels_of<C>(src), w = src.width, h = src.height;
  const Source<C> source(src);
  v4f fills = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int b = 0; b < c && kFill; b++) fills[b] = fill[b];
  const v4f zero = {0.0f, 0.0f, 0.0f, 0.0f}, top = {255.0f, 255.0f, 255.0f, 255.0f};
  std::vector<float> xs(dst.width), ys(dst.width);
  for (int y = 0; y < dst.height; y++) {
    grid.row(y, xs.data(), ys.data());
    uint8_t* out = dst.data + static_cast<int64_t>(y) * dst.width * c;
    for (int x = 0; x < dst.width; x++, out += c) {
      const float fx = std::floor(xs[x]), fy = std::floor(ys[x]);
      const float we = xs[x] - fx, wn = ys[x] - fy, ee = 1.0f - we, ss = 1.0f - wn;
      const float weights[4] = {ss * ee, ss * we, wn * ee, wn * we};
      const int x0 = static_cast<int>(fx), y0 = static_cast<int>(fy);
      const bool x_in[2] = {x0 >= 0 && x0 < w, x0 + 1 >= 0 && x0 + 1 < w};
      const bool y_in[2] = {y0 >= 0 && y0 < h, y0 + 1 >= 0 && y0 + 1 < h};
      v4i taps[4];   // north-west, north-east, south-west, south-east; zeros outside
      for (int k = 0; k < 4; k += 2) {
        const uint8_t* row = source.row(y0 + k / 2);
        if (x_in[0] && x_in[1] && y_in[k / 2] && source.template run<2>(row + x0 * c, taps + k)) continue;
        for (int j = 0; j < 2; j++)
          taps[k + j] = x_in[j] && y_in[k / 2] ? load_pixel<C>(row + (x0 + j) * c, c) : v4i{0, 0, 0, 0};
      }
      v4f v = to_float(taps[0]) * weights[0];
      float mask = x_in[0] && y_in[0] ? weights[0] : 0.0f;
      for (int k = 1; k < 4; k++) {
        v = fma4(to_float(taps[k]), v4f{} + weights[k], v);
        mask = std::fma(x_in[k & 1] && y_in[k >> 1] ? 1.0f : 0.0f, weights[k], mask);
      }
      if constexpr (kFill) v = kV1 ? v * mask + (1.0f - mask) * fills : (v - fills) * mask + fills;
      v = v < zero ? zero : v;
      v = v > top ? top : v;
      store_pixel<C>(out, __builtin_convertvector(round_even4(v), v4i), c);
    }
  }
}

void tensor_warp(const Image& src, Image& dst, const Step& s, const Settings& settings, bool v1) {
  double m[6];
  tensor_matrix(s, src.width, src.height, v1, m);
  const TensorGrid grid(m, src.width, src.height);
  const float* fill = settings.fill;
  const bool nearest = static_cast<int>(s.p[1]) == kNearest;
  by_channels(src.channels, [&](auto channels) {
    constexpr int C = decltype(channels)::value;
    if (nearest) return tensor_nearest<C>(src, dst, grid, fill);
    if (!fill) return tensor_bilinear<C, false, false>(src, dst, grid, fill);
    if (v1) return tensor_bilinear<C, true, true>(src, dst, grid, fill);
    tensor_bilinear<C, false, true>(src, dst, grid, fill);
  });
}

// One row mirrored: 16 bytes at a time where the pixels are 1, 3 or 4 bytes (16, 5 or 4 pixels
// reversed by one shuffle: a flip is often the first step to read an image the previous
// operator left out of cache, and one load a byte kept few of those reads in flight), the
// rest a pixel at a time. A 3-byte chunk's 16th byte lands on the next pixel, written after.
#ifdef __SSSE3__
template <int C>   // the shuffle that reverses the 16 / C pixels of a 16-byte chunk
__m128i reversed_pixels() {
  constexpr int kPixels = 16 / C;
  alignas(16) int8_t order[16];
  for (int j = 0; j < 16; j++) order[j] = j < kPixels * C ? static_cast<int8_t>((kPixels - 1 - j / C) * C + j % C) : -1;
  return _mm_load_si128(reinterpret_cast<const __m128i*>(order));
}
#endif

template <int C>
void flip_row(const uint8_t* in, uint8_t* out, int w, int c) {
  int x = 0;
#ifdef __SSSE3__
  if constexpr (C == 1 || C == 3 || C == 4) {
    constexpr int kPixels = 16 / C;
    static const __m128i mask = reversed_pixels<C>();
    const int64_t row = static_cast<int64_t>(w) * C;
    if constexpr (C == 3) {   // the first chunk's load would read a byte past the row
      if (w > 0) copy_pixel<C>(out, in + (w - 1) * C, C);
      x = 1;
    }
    for (; static_cast<int64_t>(x) * C + 16 <= row; x += kPixels) {
      const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + (w - kPixels - x) * C));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + x * C), _mm_shuffle_epi8(chunk, mask));
    }
  }
#endif
  for (; x < w; x++) copy_pixel<C>(out + x * c, in + (w - 1 - x) * c, c);
}

template <int C>
void flip_rows(const Image& src, Image& dst, bool horizontal) {
  const int h = src.height, w = src.width, c = channels_of<C>(src);
  const int64_t row = static_cast<int64_t>(w) * c;
  for (int y = 0; y < h; y++) {
    const uint8_t* in = src.data + (horizontal ? y : h - 1 - y) * row;
    uint8_t* out = dst.data + y * row;
    if (!horizontal) { std::memcpy(out, in, row); continue; }
    flip_row<C>(in, out, w, c);
  }
}

}  // namespace

void warp(const Image& src, Image& dst, const Step& step, const Settings& settings) {
  if (settings.flavour == Flavour::kPil) return pil_warp(src, dst, step, settings);
  tensor_warp(src, dst, step, settings, settings.flavour == Flavour::kTensorV1);
}

void flip(const Image& src, Image& dst, bool horizontal) {
  by_channels(src.channels, [&](auto c) { flip_rows<decltype(c)::value>(src, dst, horizontal); });
}

}  // namespace augk
