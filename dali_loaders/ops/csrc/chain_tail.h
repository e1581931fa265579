// DaliLoadersChainTail: the pixel stages of one slot of the AutoAugment family's chain
// (transforms/augment_chain.py) after its warp, in one pass: the enhance blend (brightness,
// colour, contrast, sharpness), posterize, solarize, timm's solarize-add, and the selections of
// autocontrast and equalize. Each stage is the arithmetic the chain's DALI operators compute,
// float32 one operation at a time in their order (built with contraction off: -ffp-contract=off,
// nvcc --fmad=false), so the pixels are theirs, bit for bit. On a GPU graph those stages were
// some fifty operators a slot, and an operator costs a batch about the same whatever its work.
//
// An image draws one operation a slot, and every other stage leaves it exactly as it is (its
// row's no-op parameters), so the statistics a drawn stage needs are those of the slot's input:
// the graph computes them there, in DALI's operators (the mean grey level, the smoothed inner
// image, each channel's min and max, the equalized image), and hands them in; the mean
// unrounded, rounded here (two GPU operators fewer a slot).
//
// Python reads the enums below (ops/chain_tail.py): keep each entry `kName = integer,` on a line.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define CHAIN_TAIL_HD __host__ __device__
#else
#define CHAIN_TAIL_HD
#endif

namespace chain_tail {

// Which stages run (the flags argument); the inputs after the image and its row follow this
// order, each present only with its stage: the mean (Contrast), the smoothed inner image
// (Sharpness), min and max (AutoContrast), the equalized image (Equalize)
enum Stage : int {
  kEnhance = 1,          // the blend: brightness, colour, contrast or sharpness
  kColor = 2,            // its degenerate image has the grey image's term
  kContrast = 4,         // ... the mean grey level's
  kSharpness = 8,        // ... the smoothed image's
  kPosterizeMask = 16,   // x & the row's mask (torchvision's tables)
  kPosterizeBits = 32,   // x & the mask of the row's bits kept (timm's)
  kSolarize = 64,
  kSolarizeAdd = 128,
  kAutoContrast = 256,
  kEqualize = 512,
  kPilGrey = 1024,       // the grey image is PIL's convert("L"), else torchvision's tensors'
  kRoundMean = 2048,     // the mean grey level comes unrounded: rounded here as PIL rounds it
};

// The row's columns each stage reads (the columns argument, in this order)
enum Column : int {
  kFactor = 0,
  kGreyWeight = 1,
  kMeanWeight = 2,
  kSmoothWeight = 3,
  kPosterize = 4,
  kPosterizeBitsColumn = 5,
  kSolarizeColumn = 6,
  kSolarizeAddColumn = 7,
  kAutoContrastColumn = 8,
  kEqualizeColumn = 9,
  kNumColumns = 10,
};

struct Columns {
  int at[kNumColumns];
};

// One image: HWC uint8 in and out, and what the graph computed for it
struct Sample {
  const uint8_t *in;
  uint8_t *out;
  const float *row;          // the slot's row of parameters
  const float *mean;         // the mean grey level (Contrast)
  const uint8_t *inner;      // (H - 2, W - 2, C): the smoothed image inside its border (Sharpness)
  const uint8_t *lo, *hi;    // C each: the channels' min and max (AutoContrast)
  const uint8_t *equalized;  // HWC (Equalize)
  int height, width, channels;
};

// DALI's cast of a whole float to uint8: saturating (the chain floors first)
CHAIN_TAIL_HD inline uint8_t Saturated(float v) {
  return v <= 0.0f ? uint8_t(0) : v >= 255.0f ? uint8_t(255) : static_cast<uint8_t>(v);
}

// to_uint8: floor, then the saturating cast
CHAIN_TAIL_HD inline uint8_t FlooredUint8(float v) { return Saturated(floorf(v)); }

// A column cast to uint8 as DALI casts floats: rounded to nearest, saturating
CHAIN_TAIL_HD inline uint8_t RoundedUint8(float v) { return Saturated(rintf(v)); }

// The grey level color.luma computes: PIL's 16-bit fixed point (exact in the graph's float32,
// as its comment says), or torchvision's float32 sum, floored; a 1-channel image is its own
CHAIN_TAIL_HD inline float Grey(const uint8_t *p, int channels, bool pil) {
  if (channels == 1) return p[0];
  if (pil) return static_cast<float>((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
  const float r = p[0], g = p[1], b = p[2];
  return floorf((r * 0.2989f + g * 0.587f) + b * 0.114f);
}

// The stages on the pixel at (y, x), all its channels
CHAIN_TAIL_HD inline void Pixel(const Sample &s, const Columns &col, int stages, int y, int x) {
  const int c_count = s.channels;
  const int64_t at = (static_cast<int64_t>(y) * s.width + x) * c_count;
  const uint8_t *p = s.in + at;
  const float *row = s.row;
  const bool terms = stages & (kColor | kContrast | kSharpness);
  const float grey = (stages & kColor) ? Grey(p, c_count, stages & kPilGrey) : 0.0f;
  const bool inside = y > 0 && x > 0 && y < s.height - 1 && x < s.width - 1;
  for (int c = 0; c < c_count; c++) {
    uint8_t v = p[c];
    if (stages & kEnhance) {   // augment_chain.enhanced, augment_ops.blend
      const float factor = row[col.at[kFactor]];
      float mixed;
      if (!terms) {
        mixed = factor * static_cast<float>(v);
      } else {
        float d = 0.0f;
        bool first = true;
        auto add = [&](float term) {
          d = first ? term : d + term;
          first = false;
        };
        if (stages & kColor) add(row[col.at[kGreyWeight]] * grey);
        if (stages & kContrast) {   // augment_ops.mean_grey: floor(mean + 0.5) for PIL
          const float mean = (stages & kRoundMean) ? floorf(s.mean[0] + 0.5f) : s.mean[0];
          add(row[col.at[kMeanWeight]] * mean);
        }
        if (stages & kSharpness) {
          const uint8_t smooth = inside ? s.inner[((static_cast<int64_t>(y) - 1) * (s.width - 2) + (x - 1)) * c_count + c]
                                        : v;
          add(row[col.at[kSmoothWeight]] * static_cast<float>(smooth));
        }
        mixed = d + factor * (static_cast<float>(v) - d);
      }
      v = FlooredUint8(mixed);
    }
    if (stages & kPosterizeBits) {   // augment_ops.posterize_bits
      const float power = powf(2.0f, 8.0f - row[col.at[kPosterizeBitsColumn]]);
      const int32_t mask = 255 - (static_cast<int32_t>(rintf(power)) - 1);
      v &= mask <= 0 ? 0 : mask >= 255 ? 255 : mask;
    } else if (stages & kPosterizeMask) {
      v &= RoundedUint8(row[col.at[kPosterize]]);
    }
    if (stages & kSolarize) {   // augment_ops.solarize
      if (static_cast<float>(v) >= row[col.at[kSolarizeColumn]]) v ^= 255;
    }
    if (stages & kSolarizeAdd) {   // augment_ops.solarize_add
      const float added = (v < 128 ? 1.0f : 0.0f) * row[col.at[kSolarizeAddColumn]];
      v = FlooredUint8((static_cast<float>(v) + added) + 0.5f);
    }
    if (stages & kAutoContrast) {   // augment_ops.auto_contrast, selected
      const uint8_t lo = s.lo[c], hi = s.hi[c];
      const int32_t span = static_cast<uint8_t>(hi - lo);
      const float scale = 255.0f / static_cast<float>(span > 1 ? span : 1);
      const uint8_t stretched = FlooredUint8(static_cast<float>(static_cast<uint8_t>(v - lo)) * scale);
      const uint8_t result = static_cast<uint8_t>(stretched + (hi == lo ? lo : 0));
      v = v ^ ((result ^ v) & RoundedUint8(row[col.at[kAutoContrastColumn]]));
    }
    if (stages & kEqualize) {   // fn.equalize, selected
      const uint8_t result = s.equalized[at + c];
      v = v ^ ((result ^ v) & RoundedUint8(row[col.at[kEqualizeColumn]]));
    }
    s.out[at + c] = v;
  }
}

}  // namespace chain_tail
