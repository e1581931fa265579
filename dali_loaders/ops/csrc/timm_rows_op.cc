// DaliLoadersTimmRows: the chain's parameter rows of timm's RandAugment / AutoAugment on a GPU
// graph (transforms/timm_chain.py), one per slot and sample, from the slot's draws. In DALI
// arithmetic each slot took some seventy one-number CPU operators (the gathered level row, the
// magnitude's noise and clip, LEVEL_TO_ARG, the row's constants plus the argument), each a
// scheduling round over every sample of the batch; here it is one.
//
// Per sample, inputs (the graph's draws, so checkpoints resume them):
//   indices   int32 (S,): the op row each slot drew (flat_ops' index)
//   uniforms  float32 (S, 3): per slot, whether it applies (u <= the row's probability), its
//             sign (u < 0.5: negative) and, for mstd=inf, the fraction of the magnitude
//   normals   float32 (S,): per slot, the magnitude's N(0, 1) noise
// Arguments: `levels` (rows + 1) x kChainWidth (augment_codes.h's ChainLevel), `base` and `hot`
// (rows + 1) x `columns`, row 0 the skipped slot's. Outputs, float32: (S, columns) per slot the
// row base + argument * hot of the drawn row, or row 0 where the slot does not apply; (S, 2, 3)
// per slot the row's inverse warp map before its rotation: the six columns from
// `matrix_column`, the translation plus the `fraction_columns` (x, y) times the image's `width`
// and `height` (timm's TranslateXRel / YRel; ints, or int32 per sample).
//
// The arithmetic is timm_chain.argument's, float32 one operation at a time in the same order
// (the library is built with -ffp-contract=off), so the rows are the graph's, bit for bit.
#include <algorithm>
#include <cmath>
#include <vector>

#include "augment_codes.h"
#include "dali/pipeline/operator/arg_helper.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"

namespace dali_loaders {

using dali::CPUBackend;

namespace {

// timm_chain.argument: the magnitude with its noise, clipped, then LEVEL_TO_ARG (`per_level`:
// 1 / timm's _LEVEL_DENOM, as float32)
float Argument(const float *level, float per_level, float sign, float fraction, float noise, bool noisy,
               bool uniform) {
  float m = level[augk::kChainMagnitude];
  if (uniform && level[augk::kChainUniform] != 0.0f) m = m * fraction;
  if (noisy) m = m + level[augk::kChainStd] * noise;
  m = std::min(std::max(m, 0.0f), level[augk::kChainUpper]);
  float v = m * per_level * level[augk::kChainScale];
  if (level[augk::kChainFloor] != 0.0f) v = std::floor(v);
  v = std::min(v, level[augk::kChainHi]);
  if (level[augk::kChainSigned] != 0.0f) v = v * sign;
  v = level[augk::kChainOffset] + level[augk::kChainFlip] * v;
  return std::max(v, level[augk::kChainLo]);
}

}  // namespace

class TimmRows : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit TimmRows(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec),
        levels_(spec.GetRepeatedArgument<float>("levels")),
        base_(spec.GetRepeatedArgument<float>("base")),
        hot_(spec.GetRepeatedArgument<float>("hot")),
        columns_(spec.GetArgument<int>("columns")),
        per_level_(spec.GetArgument<float>("per_level")),
        noisy_(spec.GetArgument<bool>("noisy")),
        uniform_(spec.GetArgument<bool>("uniform")),
        matrix_column_(spec.GetArgument<int>("matrix_column")),
        fraction_columns_(spec.GetRepeatedArgument<int>("fraction_columns")),
        height_("height", spec),
        width_("width", spec) {
    DALI_ENFORCE(columns_ > 0 && !base_.empty() && base_.size() % columns_ == 0,
                 "DaliLoadersTimmRows: base must hold rows of `columns` values");
    rows_ = static_cast<int>(base_.size() / columns_);
    DALI_ENFORCE(hot_.size() == base_.size(), "DaliLoadersTimmRows: hot must be the shape of base");
    DALI_ENFORCE(levels_.size() == static_cast<size_t>(rows_) * augk::kChainWidth,
                 "DaliLoadersTimmRows: levels must hold one row of ChainLevel values per row of base");
    DALI_ENFORCE(matrix_column_ >= 0 && matrix_column_ + 6 <= columns_ && fraction_columns_.size() == 2 &&
                 fraction_columns_[0] >= 0 && fraction_columns_[0] < columns_ && fraction_columns_[1] >= 0 &&
                 fraction_columns_[1] < columns_,
                 "DaliLoadersTimmRows: matrix_column and fraction_columns must be columns of a row");
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &indices = ws.Input<CPUBackend>(0);
    const auto &uniforms = ws.Input<CPUBackend>(1);
    const auto &normals = ws.Input<CPUBackend>(2);
    DALI_ENFORCE(indices.type() == DALI_INT32 && uniforms.type() == DALI_FLOAT &&
                 normals.type() == DALI_FLOAT,
                 "DaliLoadersTimmRows takes int32 indices, float32 uniforms and normals");
    const int n = indices.num_samples();
    height_.Acquire(spec_, ws, n);
    width_.Acquire(spec_, ws, n);
    dali::TensorListShape<2> shape(n);
    dali::TensorListShape<3> matrices(n);
    for (int i = 0; i < n; i++) {
      const int64_t slots = indices.tensor_shape(i).num_elements();
      DALI_ENFORCE(uniforms.tensor_shape(i).num_elements() == 3 * slots &&
                   normals.tensor_shape(i).num_elements() == slots,
                   "DaliLoadersTimmRows: per slot one index, three uniforms and one normal");
      shape.set_tensor_shape(i, {slots, columns_});
      matrices.set_tensor_shape(i, {slots, 2, 3});
    }
    output_desc.resize(2);
    output_desc[0] = {shape, DALI_FLOAT};
    output_desc[1] = {matrices, DALI_FLOAT};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &indices = ws.Input<CPUBackend>(0);
    const auto &uniforms = ws.Input<CPUBackend>(1);
    const auto &normals = ws.Input<CPUBackend>(2);
    auto &out = ws.Output<CPUBackend>(0);
    auto &maps = ws.Output<CPUBackend>(1);
    for (int i = 0; i < indices.num_samples(); i++) {
      const float height = static_cast<float>(height_[i].data[0]), width = static_cast<float>(width_[i].data[0]);
      float *map = maps.mutable_tensor<float>(i);
      const int32_t *index = indices.tensor<int32_t>(i);
      const float *u = uniforms.tensor<float>(i), *noise = normals.tensor<float>(i);
      float *row = out.mutable_tensor<float>(i);
      const int64_t slots = indices.tensor_shape(i).num_elements();
      for (int64_t k = 0; k < slots; k++, row += columns_, map += 6) {
        const int drawn = index[k] + 1;   // row 0 is the skipped slot's
        DALI_ENFORCE(drawn >= 0 && drawn < rows_, dali::make_string("DaliLoadersTimmRows: index ", index[k],
                                                                    " outside the ", rows_ - 1, " rows"));
        const float *level = levels_.data() + static_cast<size_t>(drawn) * augk::kChainWidth;
        const bool applied = u[3 * k] <= level[augk::kChainProbability];
        const float sign = u[3 * k + 1] < 0.5f ? -1.0f : 1.0f;
        const float argument = Argument(level, per_level_, sign, u[3 * k + 2], noise[k], noisy_, uniform_);
        const size_t at = static_cast<size_t>(applied ? drawn : 0) * columns_;
        for (int c = 0; c < columns_; c++) row[c] = base_[at + c] + argument * hot_[at + c];
        for (int c = 0; c < 6; c++) map[c] = row[matrix_column_ + c];
        map[2] = map[2] + row[fraction_columns_[0]] * width;
        map[5] = map[5] + row[fraction_columns_[1]] * height;
      }
    }
  }

 private:
  std::vector<float> levels_, base_, hot_;
  int columns_, rows_ = 0;
  float per_level_;
  bool noisy_, uniform_;
  int matrix_column_;
  std::vector<int> fraction_columns_;
  dali::ArgValue<int, 0> height_, width_;
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersTimmRows, ::dali_loaders::TimmRows, ::dali::CPU);

DALI_SCHEMA(DaliLoadersTimmRows)
    .DocStr(R"(timm's RandAugment / AutoAugment on a GPU graph's chain: per slot the row of the
chain's parameters its draws give (inputs: int32 indices (S,), float32 uniforms (S, 3) and
normals (S,)); outputs float32 (S, columns) and each row's inverse warp map (S, 2, 3).)")
    .NumInput(3)
    .NumOutput(2)
    .AddArg("levels", "(rows + 1) x ChainLevel width: how each row's magnitude becomes its argument.",
            DALI_FLOAT_VEC)
    .AddArg("base", "(rows + 1) x columns: each row's parameters without its argument.", DALI_FLOAT_VEC)
    .AddArg("hot", "(rows + 1) x columns: 1 in the column the row's argument goes to.", DALI_FLOAT_VEC)
    .AddArg("columns", "The chain's parameters a row.", DALI_INT32)
    .AddArg("per_level", "1 / timm's _LEVEL_DENOM: a magnitude's fraction of the largest.", DALI_FLOAT)
    .AddArg("noisy", "Whether an op's magnitude has Gaussian noise.", DALI_BOOL)
    .AddArg("uniform", "Whether an op's magnitude is drawn uniform (mstd=inf).", DALI_BOOL)
    .AddArg("matrix_column", "The first of a row's six columns of the inverse warp map.", DALI_INT32)
    .AddArg("fraction_columns", "(x, y): the columns of a translation as a fraction of the size.", DALI_INT_VEC)
    .AddArg("height", "int32 per sample: the image's height.", DALI_INT32, true)
    .AddArg("width", "int32 per sample: the image's width.", DALI_INT32, true);
