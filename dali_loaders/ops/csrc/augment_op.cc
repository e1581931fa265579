// DaliLoadersAugment: a DALI CPU operator that applies to each HWC uint8 image its own short
// sequence of augmentations (augment_kernels.h: the op codes and their parameters), in the
// arithmetic of torchvision's tensor kernels or of PIL. The random choices (which ops, their
// magnitudes, signs and order) are the graph's own fn.random draws, handed in as argument
// inputs: the operator is stateless and deterministic, so checkpoints need nothing from it.
// dali_loaders/ops/plugin.py compiles this file against the installed DALI on first use.
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
        fill_("fill", spec),
        erase_value_("erase_value", spec) {
    const std::string kernels = spec.GetArgument<std::string>("kernels");
    DALI_ENFORCE(kernels == "pil" || kernels == "tensor" || kernels == "tensor_v1",
                 "DaliLoadersAugment: kernels must be \"pil\", \"tensor\" or \"tensor_v1\", got \"" + kernels + "\"");
    flavour_ = kernels == "pil" ? augk::Flavour::kPil
               : kernels == "tensor" ? augk::Flavour::kTensor : augk::Flavour::kTensorV1;
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(input.type() == DALI_UINT8, "DaliLoadersAugment takes uint8 images");
    DALI_ENFORCE(input.sample_dim() == 3, "DaliLoadersAugment takes HWC images");
    const int n = input.num_samples();
    ops_.Acquire(spec_, ws, n, dali::ArgValue_AllowEmpty);
    params_.Acquire(spec_, ws, n, dali::ArgValue_AllowEmpty,
                    [](int64_t size) { return TensorShape<2>(size / augk::kNumParams, augk::kNumParams); });
    if (fill_.HasExplicitValue()) fill_.Acquire(spec_, ws, n);
    if (erase_value_.HasExplicitValue()) erase_value_.Acquire(spec_, ws, n);
    steps_.resize(n);
    for (int i = 0; i < n; i++) ReadSteps(i, static_cast<int>(input.tensor_shape(i)[2]));
    output_desc.resize(1);
    output_desc[0] = {input.shape(), DALI_UINT8};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    auto &output = ws.Output<CPUBackend>(0);
    output.SetLayout(input.GetLayout());
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
      }, static_cast<int64_t>(h) * w * (1 + static_cast<int64_t>(steps_[i].size())));
    }
    pool.RunAll();
  }

 private:
  // Sample i's steps, checked: the op codes against the parameter rows, the per-channel values
  void ReadSteps(int i, int channels) {
    const auto ops = ops_[i];
    const auto params = params_[i];
    const int k = static_cast<int>(ops.shape[0]);
    DALI_ENFORCE(params.shape[0] == k && params.shape[1] == augk::kNumParams,
                 dali::make_string("DaliLoadersAugment: params must be (len(ops), ", augk::kNumParams,
                                   ") per sample; sample ", i, " has ", k, " ops and params of shape ", params.shape));
    DALI_ENFORCE(channels <= 4, "DaliLoadersAugment: images of up to 4 channels");
    if (fill_.HasExplicitValue()) CheckPerChannel(fill_, i, channels);
    if (erase_value_.HasExplicitValue()) CheckPerChannel(erase_value_, i, channels);
    auto &steps = steps_[i];
    steps.resize(k);
    for (int j = 0; j < k; j++) {
      steps[j].op = ops.data[j];
      for (int p = 0; p < augk::kNumParams; p++) steps[j].p[p] = params.data[j * augk::kNumParams + p];
      const std::string why = augk::check_step(steps[j], flavour_);
      DALI_ENFORCE(why.empty(), dali::make_string("DaliLoadersAugment: ops[", j, "] = ", steps[j].op, " of sample ", i,
                                                  ": ", why));
    }
  }

  void CheckPerChannel(const dali::ArgValue<float, 1> &arg, int i, int channels) {
    DALI_ENFORCE(arg[i].shape[0] == channels,
                 dali::make_string("DaliLoadersAugment: ", arg.name(), " must have one value per channel (", channels,
                                   "), got ", arg[i].shape[0]));
  }

  dali::ArgValue<int, 1> ops_;
  dali::ArgValue<float, 2> params_;
  dali::ArgValue<float, 1> fill_, erase_value_;
  augk::Flavour flavour_;
  const float zeros_[4] = {0, 0, 0, 0};
  std::vector<std::vector<augk::Step>> steps_;
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
    .AddArg("ops", "Op codes, int32 (K,) per sample, applied in order; -1 skips.", DALI_INT_VEC, true)
    .AddArg("params", "float32 (K, 4) per sample: row k the parameters of ops[k].", DALI_FLOAT_VEC, true)
    .AddOptionalArg<std::vector<float>>("fill", "Per channel, where a warp has no source pixel; "
                                        "absent: torchvision's fill=None.", nullptr, true)
    .AddOptionalArg<std::vector<float>>("erase_value", "Per channel, the value of an erased box.", nullptr, true)
    .AddOptionalArg("kernels", "\"tensor\" (torchvision v2's uint8 tensor kernels), \"tensor_v1\" or \"pil\".",
                    std::string("tensor"));
