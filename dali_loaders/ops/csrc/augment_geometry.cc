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
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "augment_kernels.h"

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

void fill_image(Image& dst, const uint8_t* fill) {
  const int c = dst.channels;
  for (int64_t i = 0; i < dst.size(); i += c) std::memcpy(dst.data + i, fill, c);
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

void pil_nearest_scale(const Image& src, Image& dst, const double a[6]) {   // ImagingScaleAffine
  const int w = dst.width, h = dst.height, c = src.channels;
  std::vector<int> column(w, -1);
  double xo = a[2] + a[0] * 0.5, yo = a[5] + a[4] * 0.5;
  for (int x = 0; x < w; x++, xo += a[0]) {
    const int xin = coord(xo);
    if (xin >= 0 && xin < src.width) column[x] = xin;
  }
  for (int y = 0; y < h; y++, yo += a[4]) {
    const int yi = coord(yo);
    if (yi < 0 || yi >= src.height) continue;
    for (int x = 0; x < w; x++)
      if (column[x] >= 0) std::memcpy(dst.data + (static_cast<int64_t>(y) * w + x) * c, pixel(src, yi, column[x]), c);
  }
}

bool fits_fixed(const double a[6], int x, int y) {
  return std::fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && std::fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

void pil_nearest_fixed(const Image& src, Image& dst, const double a[6]) {   // affine_fixed, 16.16
  auto fix = [](double v) { return floor_int(v * 65536.0 + 0.5); };
  const int a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
  int a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5), a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
  const int c = src.channels;
  for (int y = 0; y < dst.height; y++, a2 += a1, a5 += a4) {
    int xx = a2, yy = a5;
    for (int x = 0; x < dst.width; x++, xx += a0, yy += a3) {
      const int xin = xx >> 16, yin = yy >> 16;
      if (xin >= 0 && xin < src.width && yin >= 0 && yin < src.height)
        std::memcpy(dst.data + (static_cast<int64_t>(y) * dst.width + x) * c, pixel(src, yin, xin), c);
    }
  }
}

void pil_nearest_float(const Image& src, Image& dst, const double a[6]) {
  double xo = a[2] + a[1] * 0.5 + a[0] * 0.5, yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
  const int c = src.channels;
  for (int y = 0; y < dst.height; y++, xo += a[1], yo += a[4]) {
    double xx = xo, yy = yo;
    for (int x = 0; x < dst.width; x++, xx += a[0], yy += a[3]) {
      const int xin = coord(xx), yin = coord(yy);
      if (xin >= 0 && xin < src.width && yin >= 0 && yin < src.height)
        std::memcpy(dst.data + (static_cast<int64_t>(y) * dst.width + x) * c, pixel(src, yin, xin), c);
    }
  }
}

void pil_nearest(const Image& src, Image& dst, const double a[6]) {   // ImagingTransformAffine's choice
  const int w = dst.width, h = dst.height;
  if (a[1] == 0 && a[3] == 0) return pil_nearest_scale(src, dst, a);
  if (fits_fixed(a, 0, 0) && fits_fixed(a, w, h) && fits_fixed(a, 0, h) && fits_fixed(a, w, 0))
    return pil_nearest_fixed(src, dst, a);
  pil_nearest_float(src, dst, a);
}

inline int clip(int v, int size) { return v < 0 ? 0 : v < size ? v : size - 1; }

// Pillow's BICUBIC macro; T is int for the row pass (uint8 taps), double for the column pass
template <typename T>
double cubic(T v1, T v2, T v3, T v4, double d) {
  const T p2 = -v1 + v3, p3 = 2 * (v1 - v2) + v3 - v4, p4 = -v1 + v2 - v3 + v4;
  const double p1 = v2;
  return p1 + d * (p2 + d * (p3 + d * p4));
}

void pil_filtered(const Image& src, Image& dst, const double a[6], int resample) {   // generic transform
  const int xs = src.width, ys = src.height, c = src.channels;
  for (int y = 0; y < dst.height; y++) {
    for (int x = 0; x < dst.width; x++) {
      const double xo = x + 0.5, yo = y + 0.5;
      double xin = a[0] * xo + a[1] * yo + a[2], yin = a[3] * xo + a[4] * yo + a[5];
      if (xin < 0.0 || xin >= xs || yin < 0.0 || yin >= ys) continue;   // the fill stays
      uint8_t* out = dst.data + (static_cast<int64_t>(y) * dst.width + x) * c;
      xin -= 0.5;
      yin -= 0.5;
      int ix = floor_int(xin), iy = floor_int(yin);
      const double dx = xin - ix, dy = yin - iy;
      if (resample == kBilinear) {
        const int x0 = clip(ix, xs), x1 = clip(ix + 1, xs);
        for (int b = 0; b < c; b++) {
          const uint8_t* row = pixel(src, clip(iy, ys), 0);
          double v1 = row[x0 * c + b] + (row[x1 * c + b] - row[x0 * c + b]) * dx, v2 = v1;
          if (iy + 1 >= 0 && iy + 1 < ys) {
            row = pixel(src, iy + 1, 0);
            v2 = row[x0 * c + b] + (row[x1 * c + b] - row[x0 * c + b]) * dx;
          }
          out[b] = static_cast<uint8_t>(v1 + (v2 - v1) * dy);
        }
        continue;
      }
      ix--;
      iy--;
      const int xi[4] = {clip(ix, xs) * c, clip(ix + 1, xs) * c, clip(ix + 2, xs) * c, clip(ix + 3, xs) * c};
      for (int b = 0; b < c; b++) {
        double v[4];
        for (int k = 0; k < 4; k++) {
          const int yy = iy + k;
          if (k > 0 && !(yy >= 0 && yy < ys)) { v[k] = v[k - 1]; continue; }
          const uint8_t* row = pixel(src, k == 0 ? clip(yy, ys) : yy, 0) + b;
          v[k] = cubic<int>(row[xi[0]], row[xi[1]], row[xi[2]], row[xi[3]], dx);
        }
        const double r = cubic<double>(v[0], v[1], v[2], v[3], dy);
        out[b] = r <= 0.0 ? 0 : r >= 255.0 ? 255 : static_cast<uint8_t>(r);
      }
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
  fill_image(dst, fill);
  const int resample = static_cast<int>(s.p[1]);
  if (resample == kNearest) return pil_nearest(src, dst, m);
  pil_filtered(src, dst, m, resample);
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

inline float fma_f(float a, float b, float c) { return std::fma(a, b, c); }

// The source position (float32, input pixels) of each output pixel: torch's affine grid, then
// grid_sample's unnormalization (g + 1) * (size / 2) - 0.5, which torch's compiler fuses
void tensor_grid(const double m[6], int w, int h, std::vector<float>& xs, std::vector<float>& ys) {
  const float half[2] = {static_cast<float>(0.5 * w), static_cast<float>(0.5 * h)};
  float r[3][2];
  for (int j = 0; j < 2; j++)
    for (int k = 0; k < 3; k++) r[k][j] = static_cast<float>(m[j * 3 + k]) / half[j];
  xs.resize(static_cast<size_t>(w) * h);
  ys.resize(xs.size());
  for (int y = 0; y < h; y++) {
    const float by = static_cast<float>(y) - static_cast<float>(h * 0.5) + 0.5f;
    for (int x = 0; x < w; x++) {
      const float bx = static_cast<float>(x) - static_cast<float>(w * 0.5) + 0.5f;
      const float gx = (bx * r[0][0] + by * r[1][0]) + r[2][0];
      const float gy = (bx * r[0][1] + by * r[1][1]) + r[2][1];
      xs[static_cast<size_t>(y) * w + x] = fma_f(gx + 1.0f, static_cast<float>(w) / 2.0f, -0.5f);
      ys[static_cast<size_t>(y) * w + x] = fma_f(gy + 1.0f, static_cast<float>(h) / 2.0f, -0.5f);
    }
  }
}

inline uint8_t round_even(float v) { return static_cast<uint8_t>(std::nearbyint(v)); }

void tensor_nearest(const Image& src, Image& dst, const float* xs, const float* ys, const float* fill) {
  const int c = src.channels;
  for (int64_t i = 0; i < static_cast<int64_t>(dst.width) * dst.height; i++) {
    const int x = static_cast<int>(std::nearbyint(xs[i])), y = static_cast<int>(std::nearbyint(ys[i]));
    uint8_t* out = dst.data + i * c;
    const bool inside = x >= 0 && x < src.width && y >= 0 && y < src.height;
    for (int b = 0; b < c; b++) out[b] = inside ? pixel(src, y, x)[b] : round_even(fill ? fill[b] : 0.0f);
  }
}

// grid_sample bilinear of the image and of the ones mask, then the fill blended by the mask
void tensor_bilinear(const Image& src, Image& dst, const float* xs, const float* ys, const float* fill, bool v1) {
  const int c = src.channels, w = src.width, h = src.height;
  for (int64_t i = 0; i < static_cast<int64_t>(dst.width) * dst.height; i++) {
    const float fx = std::floor(xs[i]), fy = std::floor(ys[i]);
    const float we = xs[i] - fx, wn = ys[i] - fy, ee = 1.0f - we, ss = 1.0f - wn;
    const float weights[4] = {ss * ee, ss * we, wn * ee, wn * we};
    const int x0 = static_cast<int>(fx), y0 = static_cast<int>(fy);
    const int tx[4] = {x0, x0 + 1, x0, x0 + 1}, ty[4] = {y0, y0, y0 + 1, y0 + 1};
    bool in[4];
    for (int k = 0; k < 4; k++) in[k] = tx[k] >= 0 && tx[k] < w && ty[k] >= 0 && ty[k] < h;
    float mask = 0.0f;
    for (int k = 0; k < 4; k++) mask = k == 0 ? (in[0] ? weights[0] : 0.0f) : fma_f(in[k] ? 1.0f : 0.0f, weights[k], mask);
    uint8_t* out = dst.data + i * c;
    for (int b = 0; b < c; b++) {
      float v = 0.0f;
      for (int k = 0; k < 4; k++) {
        const float tap = in[k] ? pixel(src, ty[k], tx[k])[b] : 0.0f;
        v = k == 0 ? tap * weights[0] : fma_f(tap, weights[k], v);
      }
      if (fill) {
        const float f = fill[b];
        v = v1 ? v * mask + (1.0f - mask) * f : (v - f) * mask + f;
      }
      out[b] = round_even(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
    }
  }
}

void tensor_warp(const Image& src, Image& dst, const Step& s, const Settings& settings, bool v1) {
  double m[6];
  tensor_matrix(s, src.width, src.height, v1, m);
  std::vector<float> xs, ys;
  tensor_grid(m, src.width, src.height, xs, ys);
  if (static_cast<int>(s.p[1]) == kNearest) return tensor_nearest(src, dst, xs.data(), ys.data(), settings.fill);
  tensor_bilinear(src, dst, xs.data(), ys.data(), settings.fill, v1);
}

}  // namespace

void warp(const Image& src, Image& dst, const Step& step, const Settings& settings) {
  if (settings.flavour == Flavour::kPil) return pil_warp(src, dst, step, settings);
  tensor_warp(src, dst, step, settings, settings.flavour == Flavour::kTensorV1);
}

void flip(const Image& src, Image& dst, bool horizontal) {
  const int h = src.height, w = src.width, c = src.channels;
  const int64_t row = static_cast<int64_t>(w) * c;
  for (int y = 0; y < h; y++) {
    const uint8_t* in = src.data + (horizontal ? y : h - 1 - y) * row;
    uint8_t* out = dst.data + y * row;
    if (!horizontal) { std::memcpy(out, in, row); continue; }
    for (int x = 0; x < w; x++) std::memcpy(out + x * c, in + (w - 1 - x) * c, c);
  }
}

}  // namespace augk
