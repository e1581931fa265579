// DaliLoadersErase: RandomErasing (torchvision's, timm's) on a normalized float image, CHW or
// HWC, one box per image, in one pass. The random draws are the graph's (fn.random, so
// checkpoints resume them), handed in per sample:
//   draws       float32 (2 * attempts + 3,) uniforms in [0, 1): per attempt an area fraction
//               and a log aspect ratio, then the coin, then the box's row and column offsets
//   noise_seed  int32: seeds the normal noise of value="random" / timm's "rand" and "pixel"
// The box is drawn as both libraries draw it: up to `attempts` tries of an area
// (scale * H * W) and aspect (exp of a uniform log ratio), h = round(sqrt(area * aspect)),
// w = round(sqrt(area / aspect)); the first with h < H and w < W wins, placed at a uniform
// offset; none fitting (or the coin) leaves the image as it is. In the graph this took ~100
// small arithmetic operators per batch and several passes over the image (transforms/erasing.py).
//
// DaliLoadersEraseBox: the same box from the same draws, for GPU graphs, which erase with DALI's
// fn.erase: per sample its anchor (top, left) and shape (height, width), float32, from the
// image's height and width. One CPU operator, where the box in DALI arithmetic took some fifty,
// each a scheduling round over every sample of the batch.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "dali/pipeline/operator/arg_helper.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"
#include "erase_box.h"
#include "erase_fill.h"

namespace dali_loaders {

using dali::CPUBackend;

class Erase : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit Erase(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec), draws_("draws", spec), seeds_("noise_seed", spec),
        box_(spec, "DaliLoadersErase"), simd_(!spec.GetArgument<bool>("_portable")) {
    value_ = spec.GetRepeatedArgument<float>("value");
    noise_ = ParseNoise(spec.GetArgument<std::string>("noise"), "DaliLoadersErase");
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(input.type() == DALI_FLOAT, "DaliLoadersErase takes float32 images");
    DALI_ENFORCE(input.sample_dim() == 3, "DaliLoadersErase takes CHW or HWC images");
    const int n = input.num_samples();
    draws_.Acquire(spec_, ws, n);
    seeds_.Acquire(spec_, ws, n);
    for (int i = 0; i < n; i++) {
      const std::string problem = box_.DrawsProblem("DaliLoadersErase", draws_[i].shape[0]);
      DALI_ENFORCE(problem.empty(), problem);
    }
    output_desc.resize(1);
    output_desc[0] = {input.shape(), DALI_FLOAT};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    auto &output = ws.Output<CPUBackend>(0);
    const auto layout = input.GetLayout();
    output.SetLayout(layout);
    const bool chw = layout.empty() || layout[0] == 'C';
    auto &pool = ws.GetThreadPool();
    for (int i = 0; i < input.num_samples(); i++) {
      const auto shape = input.tensor_shape(i);
      pool.AddWork([&, i, shape](int) {
        const int c = static_cast<int>(chw ? shape[0] : shape[2]);
        const int h = static_cast<int>(chw ? shape[1] : shape[0]);
        const int w = static_cast<int>(chw ? shape[2] : shape[1]);
        DALI_ENFORCE(value_.empty() || static_cast<int>(value_.size()) == c,
                     dali::make_string("DaliLoadersErase: value must have one entry per channel (", c, ")"));
        DALI_ENFORCE(c <= erasek::kMaxChannels,
                     dali::make_string("DaliLoadersErase: at most ", erasek::kMaxChannels, " channels, got ", c));
        float *out = output.mutable_tensor<float>(i);
        std::memcpy(out, input.tensor<float>(i), sizeof(float) * c * h * w);
        const erasek::Box box = box_.Draw(draws_[i].data, h, w);
        if (box.height > 0 && box.width > 0)
          erasek::fill_box(out, c, h, w, chw, box, noise_, value_.empty() ? nullptr : value_.data(),
                           static_cast<uint32_t>(seeds_[i].data[0]), simd_);
      }, shape.num_elements());
    }
    pool.RunAll();
  }

 private:
  dali::ArgValue<float, 1> draws_;
  dali::ArgValue<int, 0> seeds_;
  BoxSpec box_;
  std::vector<float> value_;
  erasek::Noise noise_;
  bool simd_;
};

// The box alone (a GPU graph's fn.erase fills it): outputs anchor (top, left) and shape
// (height, width), float32 (2,), per sample; an empty box (0, 0) where none is drawn
class EraseBoxOp : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit EraseBoxOp(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec), height_("height", spec), width_("width", spec),
        box_(spec, "DaliLoadersEraseBox") {}

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &draws = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(draws.type() == DALI_FLOAT, "DaliLoadersEraseBox takes float32 draws");
    const int n = draws.num_samples();
    height_.Acquire(spec_, ws, n);
    width_.Acquire(spec_, ws, n);
    for (int i = 0; i < n; i++) {
      const std::string problem = box_.DrawsProblem("DaliLoadersEraseBox", draws.tensor_shape(i).num_elements());
      DALI_ENFORCE(problem.empty(), problem);
    }
    output_desc.resize(2);
    const auto pair = dali::uniform_list_shape(n, dali::TensorShape<1>(2));
    output_desc[0] = {pair, DALI_FLOAT};
    output_desc[1] = {pair, DALI_FLOAT};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &draws = ws.Input<CPUBackend>(0);
    auto &anchor = ws.Output<CPUBackend>(0);
    auto &shape = ws.Output<CPUBackend>(1);
    for (int i = 0; i < draws.num_samples(); i++) {
      const int h = height_[i].data[0], w = width_[i].data[0];
      DALI_ENFORCE(h >= 0 && w >= 0, dali::make_string("DaliLoadersEraseBox: sample ", i, " has size ", h, " x ", w));
      const erasek::Box box = box_.Draw(draws.tensor<float>(i), h, w);
      float *a = anchor.mutable_tensor<float>(i), *s = shape.mutable_tensor<float>(i);
      a[0] = static_cast<float>(box.top);
      a[1] = static_cast<float>(box.left);
      s[0] = static_cast<float>(box.height);
      s[1] = static_cast<float>(box.width);
    }
  }

 private:
  dali::ArgValue<int, 0> height_, width_;
  BoxSpec box_;
};

}  // namespace dali_loaders

// The box's arguments, the parent of both schemas
DALI_SCHEMA(DaliLoadersEraseBoxArguments)
    .DocStr("The arguments of an erased box (DaliLoadersErase, DaliLoadersEraseBox).")
    .MakeInternal()
    .AddArg("scale", "(lo, hi): the box's area as a fraction of the image's.", DALI_FLOAT_VEC)
    .AddArg("log_ratio", "(lo, hi): the log of the box's aspect ratio.", DALI_FLOAT_VEC)
    .AddArg("probability", "The chance that an image is erased.", DALI_FLOAT)
    .AddOptionalArg("attempts", "Tries before the image is left as it is.", 10);

DALI_REGISTER_OPERATOR(DaliLoadersErase, ::dali_loaders::Erase, ::dali::CPU);

DALI_SCHEMA(DaliLoadersErase)
    .DocStr(R"(RandomErasing on float32 CHW or HWC images: one box per image drawn from the
per-sample uniforms `draws` (2 * attempts + 3 of them) as torchvision and timm draw it, filled
with `value` (per channel), or with normal noise per pixel or per channel seeded by `noise_seed`.)")
    .NumInput(1)
    .NumOutput(1)
    .AddParent("DaliLoadersEraseBoxArguments")
    .AddArg("draws", "float32 (2 * attempts + 3,) uniforms in [0, 1) per sample.", DALI_FLOAT_VEC, true)
    .AddArg("noise_seed", "int32 per sample: the seed of the normal noise.", DALI_INT32, true)
    .AddOptionalArg("value", "Per channel, the fill (noise \"none\"); empty: zeros.", std::vector<float>())
    .AddOptionalArg("noise", "\"none\" (value), \"pixel\" or \"channel\" (standard normal).", std::string("none"))
    .AddOptionalArg("_portable", "Tests: the noise by the plain C++ path even where AVX2 is (the same values).", false);

DALI_REGISTER_OPERATOR(DaliLoadersEraseBox, ::dali_loaders::EraseBoxOp, ::dali::CPU);

DALI_SCHEMA(DaliLoadersEraseBox)
    .DocStr(R"(The box DaliLoadersErase would erase, drawn from the same per-sample uniforms `draws`
(its input, 2 * attempts + 3 values) for an image of `height` x `width`: outputs its anchor
(top, left) and shape (height, width) as float32 pairs, for fn.erase; (0, 0) where none is drawn.)")
    .NumInput(1)
    .NumOutput(2)
    .AddParent("DaliLoadersEraseBoxArguments")
    .AddArg("height", "int32 per sample: the image's height.", DALI_INT32, true)
    .AddArg("width", "int32 per sample: the image's width.", DALI_INT32, true);
