// The colour and lookup-table ops of augment_kernels.h, and the sequence driver.
//
// PIL flavour: ImageEnhance (Image.blend in C float: degenerate + alpha * (x - degenerate),
// truncated), convert("L") in 16-bit fixed point, ImageStat's mean, the SMOOTH filter (float
// kernel /13, offset 0.5, truncated, border kept), ImageOps' LUTs, convert("HSV") and back.
// Tensor flavour: torchvision's float32 kernels. v2 adds with `alpha` (a fused multiply-add in
// torch's vectorized CPU loops) where v1 multiplies and adds as separate tensor ops.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "augment_kernels.h"

namespace augk {
namespace {

inline uint8_t trunc_clamp(float v) { return static_cast<uint8_t>(v <= 0.0f ? 0.0f : v >= 255.0f ? 255.0f : v); }

// -- the grey image and the blend with a degenerate image -------------------------------------

float tensor_grey(const uint8_t* p, bool v1) {
  const float r = p[0], g = p[1], b = p[2];
  if (v1) return (0.2989f * r + 0.587f * g) + 0.114f * b;
  return std::fma(b, 0.114f, std::fma(g, 0.587f, r * 0.2989f));
}

int pil_grey(const uint8_t* p) { return (p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16; }

// The grey level each flavour blends with (Color, Grayscale), as a float: PIL's and v1's are
// uint8 (rounded, truncated); v2 floors its float grey
float grey_of(const uint8_t* p, int channels, Flavour f) {
  if (channels == 1) return p[0];
  if (f == Flavour::kPil) return static_cast<float>(pil_grey(p));
  return std::floor(tensor_grey(p, f == Flavour::kTensorV1));
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

// out = blend of x with the degenerate value d by the factor
inline uint8_t blend(float x, float d, const Factor& k, Flavour f) {
  if (f == Flavour::kPil) {
    if (k.f == 0.0f) return static_cast<uint8_t>(d);
    if (k.f == 1.0f) return static_cast<uint8_t>(x);
    return trunc_clamp(d + k.f * (x - d));   // in [0, 1] Pillow truncates without clipping: same
  }
  if (f == Flavour::kTensorV1) return trunc_clamp(k.f * x + k.rest * d);
  return trunc_clamp(std::fma(d, k.rest, x * k.f));
}

void brightness(Image& img, const Factor& factor, Flavour f) {
  if (f == Flavour::kTensor) {   // v2: image.mul(factor)
    for (int64_t i = 0; i < img.size(); i++) img.data[i] = trunc_clamp(img.data[i] * factor.f);
    return;
  }
  for (int64_t i = 0; i < img.size(); i++) img.data[i] = blend(img.data[i], 0.0f, factor, f);
}

void saturation(Image& img, const Factor& factor, Flavour f) {
  const int c = img.channels;
  if (c == 1) return;   // PIL's and torchvision's: a grey image has no saturation
  for (int64_t i = 0; i < img.size(); i += c) {
    const float grey = grey_of(img.data + i, c, f);
    for (int b = 0; b < c; b++) img.data[i + b] = blend(img.data[i + b], grey, factor, f);
  }
}

void contrast(Image& img, const Factor& factor, Flavour f) {
  const int c = img.channels;
  const int64_t n = img.size() / c;
  int64_t sum = 0;
  for (int64_t i = 0; i < img.size(); i += c) sum += static_cast<int64_t>(grey_of(img.data + i, c, f));
  float mean;
  if (f == Flavour::kPil) {   // ImageStat's mean in double, rounded by int(mean + 0.5)
    mean = static_cast<float>(static_cast<int>(static_cast<double>(sum) / static_cast<double>(n) + 0.5));
  } else {                    // torch.mean: the float32 sum (exact below 2**24) / count
    mean = static_cast<float>(sum) / static_cast<float>(n);
  }
  for (int64_t i = 0; i < img.size(); i++) img.data[i] = blend(img.data[i], mean, factor, f);
}

// -- lookup tables --------------------------------------------------------------------------

void apply_lut(Image& img, const uint8_t* lut, int channel_stride) {   // stride 0: one LUT for all
  const int c = img.channels;
  for (int64_t i = 0; i < img.size(); i += c)
    for (int b = 0; b < c; b++) img.data[i + b] = lut[b * channel_stride + img.data[i + b]];
}

void histograms(const Image& img, std::vector<int64_t>& hist) {
  const int c = img.channels;
  hist.assign(256 * c, 0);
  for (int64_t i = 0; i < img.size(); i += c)
    for (int b = 0; b < c; b++) hist[b * 256 + img.data[i + b]]++;
}

void auto_contrast(Image& img, Flavour f) {
  const int c = img.channels;
  std::vector<int64_t> hist;
  histograms(img, hist);
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
  apply_lut(img, lut.data(), 256);
}

void equalize(Image& img) {   // PIL's ImageOps.equalize; torchvision's kernels compute the same LUT
  const int c = img.channels;
  std::vector<int64_t> hist;
  histograms(img, hist);
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
  apply_lut(img, lut.data(), 256);
}

void table_op(Image& img, const Step& s) {   // the ops that are one LUT for every channel
  uint8_t lut[256];
  for (int x = 0; x < 256; x++) {
    int v = x;
    if (s.op == kPosterize) v = x & (0xff ^ ((1 << (8 - static_cast<int>(s.p[0]))) - 1));
    if (s.op == kSolarize) v = static_cast<float>(x) >= s.p[0] ? 255 - x : x;
    if (s.op == kInvert) v = 255 - x;
    if (s.op == kSolarizeAdd) v = static_cast<float>(x) < s.p[1] ? std::min(255, x + static_cast<int>(s.p[0])) : x;
    lut[x] = static_cast<uint8_t>(v);
  }
  apply_lut(img, lut, 0);
}

void grayscale(Image& img, Flavour f) {
  const int c = img.channels;
  if (c == 1) return;
  for (int64_t i = 0; i < img.size(); i += c) {
    const uint8_t grey = static_cast<uint8_t>(grey_of(img.data + i, c, f));
    for (int b = 0; b < c; b++) img.data[i + b] = grey;
  }
}

void erase(Image& img, const Step& s, const float* value) {
  const int top = static_cast<int>(s.p[0]), left = static_cast<int>(s.p[1]);
  const int bottom = std::min(img.height, top + static_cast<int>(s.p[2]));
  const int right = std::min(img.width, left + static_cast<int>(s.p[3]));
  const int c = img.channels;
  for (int y = std::max(0, top); y < bottom; y++)
    for (int x = std::max(0, left); x < right; x++)
      for (int b = 0; b < c; b++)
        img.data[(static_cast<int64_t>(y) * img.width + x) * c + b] = trunc_clamp(value[b]);
}

}  // namespace

void pointwise(Image& img, const Step& s, const Settings& settings) {
  const Flavour f = settings.flavour;
  switch (s.op) {
    case kBrightness: return brightness(img, Factor(s), f);
    case kColor: return saturation(img, Factor(s), f);
    case kContrast: return contrast(img, Factor(s), f);
    case kAutoContrast: return auto_contrast(img, f);
    case kEqualize: return equalize(img);
    case kHue: return hue(img, s.p[0], f);
    case kGrayscale: return grayscale(img, f);
    case kErase: return erase(img, s, settings.erase_value);
    case kPosterize: case kSolarize: case kInvert: case kSolarizeAdd: return table_op(img, s);
    default: return;
  }
}

// -- sharpness: a blend with the image smoothed by PIL's SMOOTH kernel, border kept -------------

void sharpness(const Image& src, Image& dst, const Step& step, Flavour f) {
  const Factor factor(step);
  const int h = src.height, w = src.width, c = src.channels;
  std::memcpy(dst.data, src.data, src.size());
  if (h <= 2 || w <= 2) return;
  if (f == Flavour::kTensorV1) {   // v1 blends the border with itself too, which float32 may move by one
    for (int64_t i = 0; i < src.size(); i++) dst.data[i] = blend(src.data[i], src.data[i], factor, f);
  }
  const float edge = 1.0f / 13.0f, centre = 5.0f / 13.0f;
  auto at = [&](int y, int x, int b) { return static_cast<float>(src.data[(static_cast<int64_t>(y) * w + x) * c + b]); };
  for (int y = 1; y < h - 1; y++) {
    for (int x = 1; x < w - 1; x++) {
      for (int b = 0; b < c; b++) {
        float smooth;
        if (f == Flavour::kPil) {   // rows y+1, y, y-1, each (left * k0 + centre * k1) + right * k2
          float ss = 0.5f;
          for (int dy : {1, 0, -1}) {
            const float mid = dy == 0 ? centre : edge;
            ss += (at(y + dy, x - 1, b) * edge + at(y + dy, x, b) * mid) + at(y + dy, x + 1, b) * edge;
          }
          smooth = std::floor(std::min(255.0f, std::max(0.0f, ss)));
        } else {                    // conv2d in float32, rounded half to even
          float ss = 0.0f;
          for (int dy : {-1, 0, 1})
            for (int dx : {-1, 0, 1}) ss = std::fma(at(y + dy, x + dx, b), dy == 0 && dx == 0 ? centre : edge, ss);
          smooth = std::nearbyint(ss);
        }
        const float x0 = at(y, x, b);
        uint8_t out;
        if (f == Flavour::kTensor) out = trunc_clamp(std::fma(smooth - x0, factor.rest, x0));
        else out = blend(x0, smooth, factor, f);
        dst.data[(static_cast<int64_t>(y) * w + x) * c + b] = out;
      }
    }
  }
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
  if ((s.op == kBrightness || s.op == kColor || s.op == kContrast || s.op == kSharpness) && !(static_cast<double>(s.p[0]) + s.p[1] >= 0.0))
    return "the enhancement factor must be >= 0";
  return "";
}

void augment(const uint8_t* in, uint8_t* out, int height, int width, int channels, const Step* steps,
             int num_steps, const Settings& settings, Scratch& scratch) {
  const int64_t size = static_cast<int64_t>(height) * width * channels;
  scratch.a.resize(size);
  scratch.b.resize(size);
  Image cur{scratch.a.data(), height, width, channels}, other{scratch.b.data(), height, width, channels};
  std::memcpy(cur.data, in, size);
  for (int k = 0; k < num_steps; k++) {
    const Step& s = steps[k];
    if (s.op == kSkip || s.op == kIdentity) continue;
    if (s.op >= kShearX && s.op <= kRotate) {
      warp(cur, other, s, settings);
    } else if (s.op == kSharpness) {
      sharpness(cur, other, s, settings.flavour);
    } else if (s.op == kFlipH || s.op == kFlipV) {
      flip(cur, other, s.op == kFlipH);
    } else {
      pointwise(cur, s, settings);
      continue;
    }
    std::swap(cur, other);
  }
  std::memcpy(out, cur.data, size);
}

}  // namespace augk
