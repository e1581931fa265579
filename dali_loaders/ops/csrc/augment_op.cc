// DaliLoadersAugment: a DALI CPU operator that applies to each HWC uint8 image its own short
// sequence of augmentations (augment_kernels.h: the op codes and their parameters), in the
// arithmetic of torchvision's tensor kernels or of PIL. The random choices (which ops, their
// magnitudes, signs and order) are the graph's own fn.random draws, handed in as argument
// inputs: the operator is stateless and deterministic, so checkpoints need nothing from it.
//
// A sample's steps come as `ops` + `params` rows, or as slots into a constant `table` (each
// table row: code, p0 .. p3, relative x, relative y, span, probability), drawn here from one
// uniform vector per sample (`uniforms`), so that a graph draws every slot of a call with one
// random operator, where a random operator, a lookup and a stack per slot each cost a
// scheduling round over the batch. `slot_plan` holds four ints a slot: the key it picks
// through (or -1: one fixed row), where its rows start in `picks`, the column of its uniform
// draw (-1: 0) and the first of its five level columns (-1: none). Key k reads column k:
// `keys` holds (count, start of its cumulative weights in `key_cdf` or -1: uniform) a key; the
// pick is the first index whose cumulative weight exceeds the uniform, or floor(uniform *
// count). Slots that share a key draw together (a sub-policy's steps). A row applies if its
// draw <= its probability, p0 gains draw * span, and a relative translation becomes whole
// pixels of this image (trunc(p0 * (rel_x * W + rel_y * H))). A row of -1 skips the slot;
// -2 - k takes the k-th of the sample's `ops`/`params` instead. `mirror` (per sample, nonzero:
// flip) puts a horizontal flip before slot `mirror_slot`.
//
// timm's ops (`levels`, a row per table row, and per slot five level uniforms) turn a
// magnitude into p0 and p1 as timm's AugmentOp does: the magnitude, uniform in 0 .. m (std inf)
// or plus std * N(0, 1) (Box-Muller on the first two uniforms), clipped to 0 .. upper; then
// LEVEL_TO_ARG: v = m / 10 * scale, floored, at most hi, negated on the fourth uniform < 0.5,
// offset + flip * v, at least lo; without noise the argument precomputed for each sign. p0 is
// the argument times direction times the size for relative translations; p1 is the warp's
// resample (the fifth uniform picks one of `resamples`) or the row's fixed p1.
// dali_loaders/ops/plugin.py compiles this file against the installed DALI on first use.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "augment_kernels.h"
#include "dali/pipeline/operator/arg_helper.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"

namespace dali_loaders {

using dali::CPUBackend;
using dali::TensorShape;

class Augment : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit Augment(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec),
        ops_("ops", spec),
        params_("params", spec),
        uniforms_("uniforms", spec),
        mirror_("mirror", spec),
        fill_("fill", spec),
        erase_value_("erase_value", spec) {
    const std::string kernels = spec.GetArgument<std::string>("kernels");
    DALI_ENFORCE(kernels == "pil" || kernels == "tensor" || kernels == "tensor_v1",
                 "DaliLoadersAugment: kernels must be \"pil\", \"tensor\" or \"tensor_v1\", got \"" + kernels + "\"");
    flavour_ = kernels == "pil" ? augk::Flavour::kPil
               : kernels == "tensor" ? augk::Flavour::kTensor : augk::Flavour::kTensorV1;
    record_ = spec.GetArgument<bool>("_record");
    record_rows_ = spec.GetArgument<bool>("_record_rows");
    table_ = spec.GetRepeatedArgument<float>("table");
    levels_ = spec.GetRepeatedArgument<float>("levels");
    resamples_ = spec.GetRepeatedArgument<float>("resamples");
    DALI_ENFORCE(levels_.empty() || levels_.size() / augk::kLevelColumns == table_.size() / augk::kTableColumns,
                 dali::make_string("DaliLoadersAugment: levels must hold ", augk::kLevelColumns,
                                   " values per table row"));
    DALI_ENFORCE(levels_.empty() || !resamples_.empty(), "DaliLoadersAugment: levels need resamples");
    DALI_ENFORCE(table_.size() % augk::kTableColumns == 0,
                 dali::make_string("DaliLoadersAugment: table must hold rows of ", augk::kTableColumns, " values"));
    slot_plan_ = spec.GetRepeatedArgument<int>("slot_plan");
    picks_ = spec.GetRepeatedArgument<int>("picks");
    keys_ = spec.GetRepeatedArgument<int>("keys");
    key_cdf_ = spec.GetRepeatedArgument<float>("key_cdf");
    mirror_slot_ = spec.GetArgument<int>("mirror_slot");
    fixed_sign_ = spec.GetArgument<float>("_fixed_sign");
    equal_priority_ = spec.GetArgument<bool>("_equal_priority");
    CheckPlan();
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(input.type() == DALI_UINT8, "DaliLoadersAugment takes uint8 images");
    DALI_ENFORCE(input.sample_dim() == 3, "DaliLoadersAugment takes HWC images");
    const int n = input.num_samples();
    if (ops_.HasExplicitValue()) {
      ops_.Acquire(spec_, ws, n, dali::ArgValue_AllowEmpty);
      params_.Acquire(spec_, ws, n, dali::ArgValue_AllowEmpty,
                      [](int64_t size) { return TensorShape<2>(size / augk::kNumParams, augk::kNumParams); });
    }
    if (uniforms_.HasExplicitValue()) uniforms_.Acquire(spec_, ws, n, dali::ArgValue_AllowEmpty);
    if (mirror_.HasExplicitValue()) mirror_.Acquire(spec_, ws, n);
    if (fill_.HasExplicitValue()) fill_.Acquire(spec_, ws, n);
    if (erase_value_.HasExplicitValue()) erase_value_.Acquire(spec_, ws, n);
    steps_.resize(n);
    drawn_.resize(n);
    for (int i = 0; i < n; i++) {
      const auto shape = input.tensor_shape(i);
      ReadSteps(i, static_cast<int>(shape[0]), static_cast<int>(shape[1]), static_cast<int>(shape[2]));
    }
    output_desc.resize(1);
    output_desc[0] = {input.shape(), DALI_UINT8};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    auto &output = ws.Output<CPUBackend>(0);
    output.SetLayout(input.GetLayout());
    if (record_ || record_rows_) return Record(input, output);
    auto &pool = ws.GetThreadPool();
    scratch_.resize(pool.NumThreads());
    for (int i = 0; i < input.num_samples(); i++) {
      const auto shape = input.tensor_shape(i);
      const int h = static_cast<int>(shape[0]), w = static_cast<int>(shape[1]), c = static_cast<int>(shape[2]);
      pool.AddWork([&, i, h, w, c](int thread) {
        const augk::Settings settings{flavour_, fill_.HasExplicitValue() ? fill_[i].data : nullptr,
                                      erase_value_.HasExplicitValue() ? erase_value_[i].data : zeros_};
        augk::augment(input.tensor<uint8_t>(i), output.mutable_tensor<uint8_t>(i), h, w, c, steps_[i].data(),
                      static_cast<int>(steps_[i].size()), settings, scratch_[thread]);
      }, static_cast<int64_t>(h) * w * (equal_priority_ ? 1 : PassesOf(steps_[i], flavour_)));
    }
    pool.RunAll();
  }

 private:
  // What a sample's steps cost, in quarters of a pass over its pixels (a copy in and out, then
  // each step), as `python -m benchmarks.augment_kernels` times them on a 224 x 224 image: a
  // pointwise op ~37 us, sharpness ~200, hue ~220 (PIL) or ~115-140 (tensors), PIL's bicubic
  // rotation ~870. The thread pool runs the costliest samples first, so that a batch's slow
  // ones do not start last and keep the other threads waiting at its end.
  static int64_t PassesOf(const std::vector<augk::Step> &steps, augk::Flavour flavour) {
    const bool pil = flavour == augk::Flavour::kPil;
    int64_t quarters = 4;
    for (const auto &s : steps) {
      const int resample = static_cast<int>(s.p[1]);
      switch (s.op) {
        case augk::kSkip: case augk::kIdentity: break;
        case augk::kFlipH: case augk::kFlipV: quarters += 1; break;
        case augk::kAutoContrast: case augk::kEqualize: quarters += 10; break;
        case augk::kSharpness: quarters += 22; break;
        case augk::kHue: quarters += pil ? 24 : 14; break;
        case augk::kPilBlur: quarters += 12; break;
        case augk::kGaussianBlur: quarters += 4 + static_cast<int64_t>((s.p[1] + s.p[2]) * 5 / 8); break;   // 23 x 23: ~310 us
        case augk::kShearX: case augk::kShearY: case augk::kTranslateX: case augk::kTranslateY: case augk::kRotate:
          quarters += resample == augk::kNearest ? 6
                      : resample == augk::kBicubic ? (s.op == augk::kRotate ? 94 : s.op >= augk::kTranslateX ? 22 : 40)
                      : !pil ? 30
                      : (s.op == augk::kRotate ? 37 : s.op >= augk::kTranslateX ? 20 : 28);
          break;
        default: quarters += 4;   // one pointwise pass
      }
    }
    return quarters;
  }

  // Sample i's steps, checked: the op codes against the parameter rows, the per-channel values
  void ReadSteps(int i, int height, int width, int channels) {
    DALI_ENFORCE(channels <= 4, "DaliLoadersAugment: images of up to 4 channels");
    if (fill_.HasExplicitValue()) CheckPerChannel(fill_, i, channels);
    if (erase_value_.HasExplicitValue()) CheckPerChannel(erase_value_, i, channels);
    const int direct = DirectSteps(i);
    auto &steps = steps_[i];
    steps.clear();
    drawn_[i].clear();
    if (slot_plan_.empty() && !mirror_.HasExplicitValue()) {
      for (int j = 0; j < direct; j++) steps.push_back(Direct(i, j));
    } else {
      PlannedSteps(i, direct, height, width);
    }
    for (size_t j = 0; j < steps.size(); j++) {
      const int op = steps[j].op;   // their grey reads R, G and B: neither torchvision nor PIL has a 2-channel one
      DALI_ENFORCE(channels != 2 || (op != augk::kColor && op != augk::kGrayscale && op != augk::kContrast),
                   dali::make_string("DaliLoadersAugment: step ", j, " (op ", op, ") of sample ", i,
                                     " needs 1, 3 or 4 channels, not 2"));
      const std::string why = augk::check_step(steps[j], flavour_);
      DALI_ENFORCE(why.empty(), dali::make_string("DaliLoadersAugment: step ", j, " (op ", steps[j].op, ") of sample ",
                                                  i, ": ", why));
    }
  }

  // Slot j of sample i: table row r (-1 skips, -2 - k the k-th direct step) drawn with u
  augk::Step Slot(int i, int j, int r, float u, const float *level_u, int direct, int height, int width) {
    DALI_ENFORCE(r >= -1 - direct && r < static_cast<int>(table_.size() / augk::kTableColumns),
                 dali::make_string("DaliLoadersAugment: rows[", j, "] = ", r, " of sample ", i, " is out of range"));
    const augk::Step step = r >= 0 ? FromTable(r, u, level_u, height, width)
                            : r == -1 ? augk::Step{augk::kSkip, {0, 0, 0, 0}} : Direct(i, -2 - r);
    if (record_rows_) drawn_[i].push_back(r >= 0 && step.op == augk::kSkip ? -1 : r);   // left out by its draw: -1
    return step;
  }

  // The slots of sample i drawn from its uniforms as slot_plan says (see the top of the file)
  void PlannedSteps(int i, int direct, int height, int width) {
    const int slots = static_cast<int>(slot_plan_.size() / 4);
    const float *u = nullptr;
    if (uniforms_.HasExplicitValue()) {
      DALI_ENFORCE(uniforms_[i].shape[0] == columns_,
                   dali::make_string("DaliLoadersAugment: uniforms must hold ", columns_, " values per sample; sample ",
                                     i, " has ", uniforms_[i].shape[0]));
      u = uniforms_[i].data;
    }
    DALI_ENFORCE(columns_ == 0 || u != nullptr, "DaliLoadersAugment: slot_plan draws from uniforms, which are missing");
    auto &steps = steps_[i];
    const int flip_at = mirror_.HasExplicitValue() && mirror_[i].data[0] != 0 ? std::min(mirror_slot_, slots) : -1;
    for (int j = 0; j <= slots; j++) {
      if (j == flip_at) steps.push_back(augk::Step{augk::kFlipH, {0, 0, 0, 0}});
      if (j == slots) break;
      const int *plan = &slot_plan_[static_cast<size_t>(j) * 4];
      const int row = plan[0] < 0 ? picks_[plan[1]] : picks_[plan[1] + Pick(plan[0], u[plan[0]])];
      const float draw = plan[2] < 0 ? 0.0f : u[plan[2]];
      steps.push_back(Slot(i, j, row, draw, plan[3] < 0 ? nullptr : u + plan[3], direct, height, width));
    }
  }

  // Key k's choice at uniform v: by its cumulative weights, else floor(v * count)
  int Pick(int k, float v) const {
    const int count = keys_[2 * k], start = keys_[2 * k + 1];
    int index;
    if (start < 0) {
      index = static_cast<int>(static_cast<double>(v) * count);
    } else {
      const float *cdf = &key_cdf_[start];
      index = static_cast<int>(std::upper_bound(cdf, cdf + count, v) - cdf);
    }
    return std::min(std::max(index, 0), count - 1);
  }

  // slot_plan, picks and keys agree with each other (once, when the operator is made)
  void CheckPlan() {
    DALI_ENFORCE(slot_plan_.size() % 4 == 0 && keys_.size() % 2 == 0,
                 "DaliLoadersAugment: slot_plan holds 4 ints a slot, keys 2 a key");
    const int keys = static_cast<int>(keys_.size() / 2);
    columns_ = 0;
    for (int k = 0; k < keys; k++) {
      const int count = keys_[2 * k], start = keys_[2 * k + 1];
      DALI_ENFORCE(count >= 1 && (start < 0 || start + count <= static_cast<int>(key_cdf_.size())),
                   dali::make_string("DaliLoadersAugment: key ", k, " is malformed"));
      columns_ = std::max(columns_, k + 1);
    }
    for (size_t j = 0; j < slot_plan_.size() / 4; j++) {
      const int *plan = &slot_plan_[j * 4];
      const int span = plan[0] < 0 ? 1 : keys_.at(2 * plan[0]);
      DALI_ENFORCE(plan[0] < keys && plan[1] >= 0 && plan[1] + span <= static_cast<int>(picks_.size()),
                   dali::make_string("DaliLoadersAugment: slot ", j, " of slot_plan is out of range"));
      columns_ = std::max({columns_, plan[2] + 1, plan[3] < 0 ? 0 : plan[3] + augk::kLevelDraws});
    }
  }

  int DirectSteps(int i) {
    if (!ops_.HasExplicitValue()) return 0;
    const int k = static_cast<int>(ops_[i].shape[0]);
    const auto params = params_[i];
    DALI_ENFORCE(params.shape[0] == k && params.shape[1] == augk::kNumParams,
                 dali::make_string("DaliLoadersAugment: params must be (len(ops), ", augk::kNumParams,
                                   ") per sample; sample ", i, " has ", k, " ops and params of shape ", params.shape));
    return k;
  }

  augk::Step Direct(int i, int j) {
    augk::Step step;
    step.op = ops_[i].data[j];
    for (int p = 0; p < augk::kNumParams; p++) step.p[p] = params_[i].data[j * augk::kNumParams + p];
    return step;
  }

  // Tests: each sample's resolved steps (op code, p0 .. p3 as float32), or with _record_rows its
  // slots' rows (int32; -1 where a row's draw left it out), in its output's first bytes, in
  // place of the augmented image, so that the draws can be compared with torchvision's and timm's
  void Record(const dali::TensorList<CPUBackend> &input, dali::TensorList<CPUBackend> &output) {
    for (int i = 0; i < input.num_samples(); i++) {
      std::vector<float> values;
      for (const auto &step : steps_[i]) {
        values.push_back(static_cast<float>(step.op));
        values.insert(values.end(), step.p, step.p + augk::kNumParams);
      }
      const void *data = record_rows_ ? static_cast<const void *>(drawn_[i].data()) : values.data();
      const int64_t bytes = record_rows_ ? static_cast<int64_t>(drawn_[i].size() * sizeof(int))
                                         : static_cast<int64_t>(values.size() * sizeof(float));
      DALI_ENFORCE(bytes <= input.tensor_shape(i).num_elements(), "DaliLoadersAugment: _record needs bigger images");
      uint8_t *out = output.mutable_tensor<uint8_t>(i);
      std::memset(out, 0, input.tensor_shape(i).num_elements());
      std::memcpy(out, data, bytes);
    }
  }

  // Table row r, drawn with u (and level_u, timm's), for a height x width image
  augk::Step FromTable(int r, float u, const float *level_u, int height, int width) const {
    const float *row = &table_[static_cast<size_t>(r) * augk::kTableColumns];
    augk::Step step;
    step.op = u <= row[augk::kRowProbability] ? static_cast<int32_t>(row[augk::kRowCode]) : augk::kSkip;
    for (int p = 0; p < augk::kNumParams; p++) step.p[p] = row[augk::kRowP0 + p];
    step.p[0] += u * row[augk::kRowSpan];
    const float relative_x = row[augk::kRowRelativeX], relative_y = row[augk::kRowRelativeY];
    if (relative_x != 0.0f || relative_y != 0.0f) {   // a fraction of the size, to whole pixels (toward zero)
      const float size = relative_x * static_cast<float>(width) + relative_y * static_cast<float>(height);
      step.p[0] = std::trunc(step.p[0] * size);
    }
    if (!levels_.empty() && levels_[static_cast<size_t>(r) * augk::kLevelColumns + augk::kLevelActive] != 0.0f) {
      DALI_ENFORCE(level_u != nullptr, "DaliLoadersAugment: a row with a level needs a level column in slot_plan");
      Level(&levels_[static_cast<size_t>(r) * augk::kLevelColumns], level_u, height, width, step);
    }
    return step;
  }

  // timm's magnitude -> argument (see the top of the file); L: a row of `levels`
  void Level(const float *L, const float *u, int height, int width, augk::Step &step) const {
    const float sign = fixed_sign_ != 0.0f ? fixed_sign_ : u[3] < 0.5f ? -1.0f : 1.0f;
    float arg;
    if (L[augk::kLevelNoisy] != 0.0f) {
      float m = L[augk::kLevelMagnitude];
      if (L[augk::kLevelUniform] != 0.0f) m = m * u[2];
      const double gaussian = std::sqrt(-2.0 * std::log(1.0 - static_cast<double>(u[0]))) *
                              std::cos(6.283185307179586 * static_cast<double>(u[1]));
      m = m + L[augk::kLevelStd] * static_cast<float>(gaussian);
      m = std::min(std::max(m, 0.0f), L[augk::kLevelUpper]);
      float v = (m / 10.0f) * L[augk::kLevelScale];
      if (L[augk::kLevelFloor] != 0.0f) v = std::floor(v);
      v = std::min(v, L[augk::kLevelHi]);
      if (L[augk::kLevelSigned] != 0.0f) v = v * sign;
      arg = std::max(L[augk::kLevelOffset] + L[augk::kLevelFlip] * v, L[augk::kLevelLo]);
    } else {
      arg = sign > 0.0f ? L[augk::kLevelFixedPlus] : L[augk::kLevelFixedMinus];
    }
    const float relative_x = L[augk::kLevelRelativeX], relative_y = L[augk::kLevelRelativeY];
    const float unit = (1.0f - relative_x - relative_y) + relative_x * static_cast<float>(width) +
                       relative_y * static_cast<float>(height);
    step.p[0] = arg * L[augk::kLevelDirection] * unit;
    const int choices = static_cast<int>(resamples_.size());
    const float resample = resamples_[std::min(choices - 1, static_cast<int>(u[4] * choices))];
    step.p[1] = L[augk::kLevelWarp] * resample + L[augk::kLevelP1];
    step.p[2] = step.p[3] = 0.0f;
  }

  void CheckPerChannel(const dali::ArgValue<float, 1> &arg, int i, int channels) {
    DALI_ENFORCE(arg[i].shape[0] == channels,
                 dali::make_string("DaliLoadersAugment: ", arg.name(), " must have one value per channel (", channels,
                                   "), got ", arg[i].shape[0]));
  }

  dali::ArgValue<int, 1> ops_;
  dali::ArgValue<float, 2> params_;
  dali::ArgValue<float, 1> uniforms_;
  dali::ArgValue<int, 0> mirror_;
  std::vector<float> table_, levels_, resamples_, key_cdf_;
  std::vector<int> slot_plan_, picks_, keys_;
  int mirror_slot_ = -1, columns_ = 0;
  float fixed_sign_ = 0.0f;
  bool record_ = false, record_rows_ = false;
  dali::ArgValue<float, 1> fill_, erase_value_;
  augk::Flavour flavour_;
  const float zeros_[4] = {0, 0, 0, 0};
  std::vector<std::vector<augk::Step>> steps_;
  std::vector<std::vector<int>> drawn_;   // per sample, each slot's row as drawn (_record_rows)
  bool equal_priority_ = false;
  std::vector<augk::Scratch> scratch_;   // one per thread
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersAugment, ::dali_loaders::Augment, ::dali::CPU);

DALI_SCHEMA(DaliLoadersAugment)
    .DocStr(R"(Applies to each HWC uint8 image its own sequence of augmentations (shear, translate,
rotate, brightness, colour, contrast, sharpness, hue, posterize, solarize, autocontrast,
equalize, invert, timm's solarize-add, flips, erase, grayscale) in the arithmetic of
torchvision's uint8 tensor kernels (v2 or v1) or of PIL. `ops` and `params` are per-sample
argument inputs, drawn by the graph; see augment_kernels.h for the op codes.)")
    .NumInput(1)
    .NumOutput(1)
    .InputLayout(0, "HWC")
    .AddOptionalArg<std::vector<int>>("ops", "Op codes, int32 (K,) per sample, applied in order; -1 skips.",
                                      nullptr, true)
    .AddOptionalArg<std::vector<float>>("params", "float32 (K, 4) per sample: row k the parameters of ops[k].",
                                        nullptr, true)
    .AddOptionalArg("table", "Rows of (code, p0, p1, p2, p3, relative x, relative y, span, probability), "
                    "flattened; slot_plan's slots pick them.", std::vector<float>())
    .AddOptionalArg("levels", "timm's magnitude -> argument, 20 values per table row (all 0: none); see the "
                    "top of augment_op.cc.", std::vector<float>())
    .AddOptionalArg<std::vector<float>>("uniforms", "float32 (U,) per sample, uniforms in [0, 1) that "
                                        "slot_plan draws the slots from.", nullptr, true)
    .AddOptionalArg("slot_plan", "Per slot (key or -1, start in picks, draw column or -1, first level column "
                    "or -1): the slots drawn from `uniforms` (see the top of augment_op.cc).", std::vector<int>())
    .AddOptionalArg("picks", "The rows slot_plan's slots pick among.", std::vector<int>())
    .AddOptionalArg("keys", "Per key (count, start in key_cdf or -1 for uniform); key k reads uniforms[k].",
                    std::vector<int>())
    .AddOptionalArg("key_cdf", "The weighted keys' cumulative weights.", std::vector<float>())
    .AddOptionalArg<int>("mirror", "int32 per sample: nonzero flips the image horizontally before slot "
                         "mirror_slot.", nullptr, true)
    .AddOptionalArg("mirror_slot", "The slot the flip comes before (with slot_plan).", -1)
    .AddOptionalArg("_fixed_sign", "Tests: +1 or -1, every signed timm argument's sign; 0: drawn.", 0.0f)
    .AddOptionalArg("_equal_priority", "Benchmarks: every sample of a size first alike, not the costliest first.",
                    false)
    .AddOptionalArg("_record", "Tests: output each sample's resolved steps (op code, p0 .. p3, float32) in "
                    "its first bytes instead of augmenting it.", false)
    .AddOptionalArg("_record_rows", "Tests: output each sample's slots' rows (int32, -1 where a row's draw "
                    "left it out) in its first bytes instead of augmenting it.", false)
    .AddOptionalArg("resamples", "The resamples (PIL's numbers) a warp with a level draws among.",
                    std::vector<float>())
    .AddOptionalArg<std::vector<float>>("fill", "Per channel, where a warp has no source pixel; "
                                        "absent: torchvision's fill=None.", nullptr, true)
    .AddOptionalArg<std::vector<float>>("erase_value", "Per channel, the value of an erased box.", nullptr, true)
    .AddOptionalArg("kernels", "\"tensor\" (torchvision v2's uint8 tensor kernels), \"tensor_v1\" or \"pil\".",
                    std::string("tensor"));
