// The numbers DaliLoadersAugment and its Python side agree on, written once: the op codes, the
// parameter and table row widths, the columns of a table row and of a timm level row, the
// resample numbers. ops/augment.py reads this file when it is imported, so keep its simple
// form: each enum `enum Name ... {`, one `kEntry = integer,` per line (a comment may follow),
// closed by `};`. tests/test_augment_op.py checks that the compiled operator agrees.
#pragma once

#include <cstdint>

namespace augk {

// What a step does (augment_kernels.h lists each one's parameters); the Python names drop the k.
enum OpCode : int32_t {
  kSkip = -1,   // an empty slot
  kIdentity = 0,
  kShearX = 1,
  kShearY = 2,
  kTranslateX = 3,
  kTranslateY = 4,
  kRotate = 5,
  kBrightness = 6,
  kColor = 7,
  kContrast = 8,
  kSharpness = 9,
  kPosterize = 10,
  kSolarize = 11,
  kAutoContrast = 12,
  kEqualize = 13,
  kInvert = 14,
  kSolarizeAdd = 15,
  kHue = 16,
  kFlipH = 17,
  kFlipV = 18,
  kErase = 19,
  kGrayscale = 20,
  kGaussianBlur = 21,
  kPilBlur = 22,
  kNumOps = 23,   // one past the last code
};

enum Widths : int {
  kNumParams = 4,       // a step's parameters p0 .. p3
  kTableColumns = 9,    // a table row: TableColumn
  kLevelColumns = 20,   // a timm level row: LevelColumn
  kLevelDraws = 5,      // timm's uniforms per slot: magnitude noise (two), fraction, sign, resample
};

// A table row (augment_op.cc): the step's code and parameters, then how it is drawn
enum TableColumn : int {
  kRowCode = 0,
  kRowP0 = 1,            // p0 .. p3 follow
  kRowRelativeX = 5,     // p0 is a fraction of the width: trunc(p0 * width)
  kRowRelativeY = 6,     // ... of the height
  kRowSpan = 7,          // p0 gains draw * span
  kRowProbability = 8,   // the row applies if draw <= probability
};

// A timm level row (augment_op.cc's Level): how a magnitude becomes p0 and p1
enum LevelColumn : int {
  kLevelActive = 0,      // 0: the row has no level
  kLevelMagnitude = 1,
  kLevelStd = 2,         // the magnitude's noise
  kLevelUniform = 3,     // the magnitude drawn uniform in 0 .. magnitude (timm's std = inf)
  kLevelUpper = 4,       // the magnitude's clip
  kLevelScale = 5,
  kLevelOffset = 6,
  kLevelFlip = 7,
  kLevelFloor = 8,
  kLevelHi = 9,
  kLevelLo = 10,
  kLevelSigned = 11,
  kLevelDirection = 12,
  kLevelRelativeX = 13,
  kLevelRelativeY = 14,
  kLevelWarp = 15,       // p1 is the drawn resample
  kLevelP1 = 16,         // else this fixed p1
  kLevelFixedPlus = 17,  // without noise: the argument for each sign
  kLevelFixedMinus = 18,
  kLevelNoisy = 19,
};

// A row of timm's levels on a GPU graph's chain (transforms/timm_chain.py, DaliLoadersTimmRows):
// how one op's magnitude becomes its argument there
enum ChainLevel : int {
  kChainMagnitude = 0,
  kChainStd = 1,           // the magnitude's Gaussian noise
  kChainUniform = 2,       // 1: the magnitude drawn uniform in 0 .. magnitude instead
  kChainUpper = 3,         // the magnitude's clip
  kChainScale = 4,
  kChainOffset = 5,
  kChainFlip = 6,
  kChainFloor = 7,
  kChainHi = 8,
  kChainLo = 9,
  kChainSigned = 10,
  kChainProbability = 11,
  kChainWidth = 12,        // the row's width
};

// A warp's resample: PIL's numbers (bicubic: PIL flavour only)
enum Resample : int {
  kNearest = 0,
  kBilinear = 2,
  kBicubic = 3,
};

}  // namespace augk
