// DaliLoadersNormalize: a DALI CPU operator for the last step of a CPU graph: HWC uint8 images,
// each flipped horizontally or not, to float32 normalized per channel (or uint8 as they are),
// CHW or HWC. It computes what crop_mirror_normalize computes with the same mean and std (no
// crop), bit for bit, in a fraction of its time on small images (normalize_kernels.h).
// With erase_draws given, it also erases a box per image, as DaliLoadersErase would right after
// it (erase_op.cc, the same draws and noise): the box is written over the normalized image,
// where the separate operator copied every image once more first.
// dali_loaders/ops/plugin.py compiles this file against the installed DALI on first use.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "dali/pipeline/operator/arg_helper.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/common.h"
#include "dali/pipeline/operator/operator.h"
#include "erase_box.h"
#include "erase_fill.h"
#include "normalize_kernels.h"
#include "simd.h"

namespace dali_loaders {

using dali::CPUBackend;
using dali::TensorListShape;

class Normalize : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit Normalize(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec),
        dtype_(spec.GetArgument<dali::DALIDataType>("dtype")),
        simd_(!spec.GetArgument<bool>("_portable") && simd::have_avx2()) {
    const std::string layout = spec.GetArgument<std::string>("output_layout");
    DALI_ENFORCE(layout == "CHW" || layout == "HWC",
                 "DaliLoadersNormalize: output_layout must be \"CHW\" or \"HWC\", got \"" + layout + "\"");
    DALI_ENFORCE(dtype_ == DALI_FLOAT || dtype_ == DALI_UINT8,
                 "DaliLoadersNormalize: dtype must be FLOAT or UINT8");
    chw_ = layout == "CHW";
    // As crop_mirror_normalize: the inverse std computed in double and rounded to float.
    const auto mean = spec.GetRepeatedArgument<float>("mean");
    const auto stddev = spec.GetRepeatedArgument<float>("std");
    DALI_ENFORCE(mean.size() == stddev.size(), "DaliLoadersNormalize: mean and std must be as long");
    mean_ = mean;
    for (float s : stddev) inv_std_.push_back(static_cast<float>(1.0 / static_cast<double>(s)));
    if (spec.HasTensorArgument("erase_draws")) {
      DALI_ENFORCE(dtype_ == DALI_FLOAT, "DaliLoadersNormalize: erasing needs FLOAT output");
      erase_box_ = std::make_unique<BoxSpec>(spec, "DaliLoadersNormalize", "erase_");
      erase_value_ = spec.GetRepeatedArgument<float>("erase_value");
      erase_noise_ = ParseNoise(spec.GetArgument<std::string>("erase_noise"), "DaliLoadersNormalize");
    }
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(input.type() == DALI_UINT8, "DaliLoadersNormalize takes uint8 images");
    DALI_ENFORCE(input.sample_dim() == 3, "DaliLoadersNormalize takes HWC images");
    const int n = input.num_samples();
    mirror_.assign(n, 0);
    if (spec_.HasTensorArgument("mirror")) dali::GetPerSampleArgument<int>(mirror_, "mirror", spec_, ws, n);
    TensorListShape<3> shape(n);
    for (int i = 0; i < n; i++) {
      const auto in = input.tensor_shape(i);
      DALI_ENFORCE(dtype_ == DALI_UINT8 || static_cast<size_t>(in[2]) == mean_.size(),
                   dali::make_string("DaliLoadersNormalize: mean and std have ", mean_.size(),
                                     " values; sample ", i, " has ", in[2], " channels"));
      shape.set_tensor_shape(i, chw_ ? dali::TensorShape<3>(in[2], in[0], in[1])
                                     : dali::TensorShape<3>(in[0], in[1], in[2]));
      DALI_ENFORCE(!erase_box_ || erase_value_.empty() || static_cast<int64_t>(erase_value_.size()) == in[2],
                   dali::make_string("DaliLoadersNormalize: erase_value must have one entry per channel (", in[2],
                                     ")"));
      DALI_ENFORCE(!erase_box_ || in[2] <= erasek::kMaxChannels,
                   dali::make_string("DaliLoadersNormalize: erasing takes at most ", erasek::kMaxChannels,
                                     " channels, got ", in[2]));
    }
    if (erase_box_) {
      erase_draws_.Acquire(spec_, ws, n);
      erase_seeds_.Acquire(spec_, ws, n);
      for (int i = 0; i < n; i++) {
        const std::string problem = erase_box_->DrawsProblem("DaliLoadersNormalize", erase_draws_[i].shape[0]);
        DALI_ENFORCE(problem.empty(), problem);
      }
    }
    output_desc.resize(1);
    output_desc[0] = {shape, dtype_};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    auto &output = ws.Output<CPUBackend>(0);
    output.SetLayout(chw_ ? "CHW" : "HWC");
    auto &pool = ws.GetThreadPool();
    const int n = input.num_samples();
    // Small images cost less than a task: a task per run of samples, a few per thread.
    const int tasks = std::max(1, std::min(n, 4 * pool.NumThreads()));
    for (int t = 0; t < tasks; t++) {
      const int begin = static_cast<int>(static_cast<int64_t>(n) * t / tasks);
      const int end = static_cast<int>(static_cast<int64_t>(n) * (t + 1) / tasks);
      pool.AddWork([&, begin, end](int) {
        for (int i = begin; i < end; i++) RunSample(input, output, i);
      }, end - begin);
    }
    pool.RunAll();
  }

 private:
  void RunSample(const dali::TensorList<CPUBackend> &input, dali::TensorList<CPUBackend> &output, int i) const {
    const auto shape = input.tensor_shape(i);
    const normk::Image image{input.tensor<uint8_t>(i), static_cast<int>(shape[0]), static_cast<int>(shape[1]),
                             static_cast<int>(shape[2]), mirror_[i] != 0};
    if (dtype_ != DALI_FLOAT) {
      normk::to_uint8(image, output.mutable_tensor<uint8_t>(i), chw_);
      return;
    }
    float *out = output.mutable_tensor<float>(i);
    normk::to_float(image, out, chw_, mean_.data(), inv_std_.data(), simd_);
    if (!erase_box_) return;
    const erasek::Box box = erase_box_->Draw(erase_draws_[i].data, image.height, image.width);
    if (box.height > 0 && box.width > 0)
      erasek::fill_box(out, image.channels, image.height, image.width, chw_, box, erase_noise_,
                       erase_value_.empty() ? nullptr : erase_value_.data(),
                       static_cast<uint32_t>(erase_seeds_[i].data[0]), simd_);
  }

  dali::DALIDataType dtype_;
  bool simd_;
  bool chw_ = true;
  std::vector<float> mean_, inv_std_;
  std::vector<int> mirror_;
  // RandomErasing on the normalized image, where erase_draws is given
  std::unique_ptr<BoxSpec> erase_box_;
  std::vector<float> erase_value_;
  erasek::Noise erase_noise_ = erasek::Noise::kNone;
  dali::ArgValue<float, 1> erase_draws_{"erase_draws", spec_};
  dali::ArgValue<int, 0> erase_seeds_{"erase_noise_seed", spec_};
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersNormalize, ::dali_loaders::Normalize, ::dali::CPU);

DALI_SCHEMA(DaliLoadersNormalize)
    .DocStr(R"(HWC uint8 images, each flipped horizontally where `mirror` is nonzero, converted to
float32 as (x - mean) / std per channel (the inverse std rounded to float, as
crop_mirror_normalize does), or kept uint8, in the output layout CHW or HWC.)")
    .NumInput(1)
    .NumOutput(1)
    .InputLayout(0, "HWC")
    .AddOptionalArg("mirror", "Per sample: nonzero flips the image horizontally.", 0, true)
    .AddOptionalArg("mean", "Per channel; FLOAT output only.", std::vector<float>{})
    .AddOptionalArg("std", "Per channel; FLOAT output only.", std::vector<float>{})
    .AddOptionalTypeArg("dtype", "FLOAT or UINT8.", DALI_FLOAT)
    .AddOptionalArg("output_layout", "\"CHW\" or \"HWC\".", std::string("CHW"))
    .AddOptionalArg("_portable", "Tests: the plain C++ path even where AVX2 is.", false)
    .AddOptionalArg<std::vector<float>>("erase_draws", "float32 (2 * erase_attempts + 3,) uniforms in [0, 1) per "
                                        "sample: given, a box is erased as DaliLoadersErase erases it.", nullptr, true)
    .AddOptionalArg("erase_noise_seed", "int32 per sample: the seed of the erased box's noise.", 0, true)
    .AddOptionalArg("erase_scale", "(lo, hi): the box's area as a fraction of the image's.", std::vector<float>{0.f, 0.f})
    .AddOptionalArg("erase_log_ratio", "(lo, hi): the log of the box's aspect ratio.", std::vector<float>{0.f, 0.f})
    .AddOptionalArg("erase_probability", "The chance that an image is erased.", 0.f)
    .AddOptionalArg("erase_attempts", "Tries before the image is left as it is.", 10)
    .AddOptionalArg("erase_value", "Per channel, the fill (erase_noise \"none\"); empty: zeros.", std::vector<float>())
    .AddOptionalArg("erase_noise", "\"none\" (erase_value), \"pixel\" or \"channel\" (standard normal).",
                    std::string("none"));
