// DaliLoadersFloatJitter: torchvision's ColorJitter (and the grey image of Grayscale(3) and
// RandomGrayscale) on float32 images (CHW or HWC, 1 or 3 channels), CPU: each image's
// adjustments in the order drawn for it (one of the `orders` rows, picked per sample), with its
// factors (float_color_kernels.h). In DALI's arithmetic
// operators the order needs every adjustment at every position, masked: about 60 operators an
// image a position, each a pass over it.
#include <algorithm>
#include <vector>

#include "dali/pipeline/operator/arg_helper.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"
#include "float_color_kernels.h"

namespace dali_loaders {

using dali::CPUBackend;
using floatcolor::kNumAdjustments;

class FloatJitter : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit FloatJitter(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec), factors_("factors", spec), picks_("pick", spec),
        orders_(spec.GetRepeatedArgument<int>("orders")), v1_(spec.GetArgument<bool>("v1")) {
    DALI_ENFORCE(!orders_.empty() && orders_.size() % kNumAdjustments == 0,
                 dali::make_string("DaliLoadersFloatJitter: orders holds rows of ", kNumAdjustments,
                                   " adjustments, got ", orders_.size(), " values"));
    for (int which : orders_)
      DALI_ENFORCE(which >= -1 && which <= floatcolor::kGrey,
                   dali::make_string("DaliLoadersFloatJitter: adjustment ", which, " is not one of -1 .. ",
                                     static_cast<int>(floatcolor::kGrey)));
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(input.type() == DALI_FLOAT, "DaliLoadersFloatJitter takes float32 images");
    DALI_ENFORCE(input.sample_dim() == 3, "DaliLoadersFloatJitter takes CHW or HWC images");
    const auto layout = input.GetLayout();
    DALI_ENFORCE(layout == "CHW" || layout == "HWC",
                 dali::make_string("DaliLoadersFloatJitter takes CHW or HWC images, got layout \"", layout, "\""));
    const int channel_axis = layout == "CHW" ? 0 : 2;
    const int n = input.num_samples();
    for (int i = 0; i < n; i++) {
      const auto channels = input.tensor_shape(i)[channel_axis];
      DALI_ENFORCE(channels == 1 || channels == 3,
                   dali::make_string("ColorJitter: an image of ", channels, " channels; torchvision's takes 1 or 3"));
    }
    factors_.Acquire(spec_, ws, n, dali::TensorShape<1>(kNumAdjustments));
    picks_.Acquire(spec_, ws, n);
    const int rows = static_cast<int>(orders_.size()) / kNumAdjustments;
    for (int i = 0; i < n; i++)
      DALI_ENFORCE(picks_[i].data[0] >= 0 && picks_[i].data[0] < rows,
                   dali::make_string("DaliLoadersFloatJitter: pick ", picks_[i].data[0], " is not a row of orders (",
                                     rows, " rows)"));
    output_desc.resize(1);
    output_desc[0] = {input.shape(), DALI_FLOAT};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    auto &output = ws.Output<CPUBackend>(0);
    const auto layout = input.GetLayout();
    output.SetLayout(layout);
    const bool chw = layout == "CHW";
    auto &pool = ws.GetThreadPool();
    for (int i = 0; i < input.num_samples(); i++) {
      const auto shape = input.tensor_shape(i);
      const int64_t count = shape.num_elements();
      pool.AddWork([&, i, shape, count, chw](int) {
        float *out = output.mutable_tensor<float>(i);
        const float *in = input.tensor<float>(i);
        std::copy(in, in + count, out);
        const int channels = static_cast<int>(chw ? shape[0] : shape[2]);
        const int64_t pixels = chw ? shape[1] * shape[2] : shape[0] * shape[1];
        const floatcolor::FloatImage image{out, pixels, channels, chw ? pixels : 1, chw ? 1 : channels};
        const int32_t *order = orders_.data() + picks_[i].data[0] * kNumAdjustments;
        floatcolor::jitter(image, order, factors_[i].data, v1_);
      }, count);
    }
    pool.RunAll();
  }

 private:
  dali::ArgValue<float, 1> factors_;
  dali::ArgValue<int, 0> picks_;
  std::vector<int32_t> orders_;
  bool v1_;
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersFloatJitter, ::dali_loaders::FloatJitter, ::dali::CPU);

DALI_SCHEMA(DaliLoadersFloatJitter)
    .DocStr(R"(torchvision's ColorJitter on float32 images (CHW or HWC, 1 or 3 channels), in its
tensor kernels' float32 arithmetic: brightness, contrast and saturation blends clamped to 0 .. 1
and the hue shift in HSV, in the order of the `orders` row `pick` names, with `factors`.)")
    .NumInput(1)
    .NumOutput(1)
    .AddArg("factors", "float32 (4,) per sample: the brightness, contrast and saturation factors and the hue shift.",
            DALI_FLOAT_VEC, true)
    .AddArg("pick", "int32 per sample: the row of `orders` it runs.", DALI_INT32, true)
    .AddArg("orders", "Rows of 4 adjustments (0 brightness, 1 contrast, 2 saturation, 3 hue, 4 the grey image, "
            "-1 none), flattened.",
            DALI_INT_VEC)
    .AddOptionalArg("v1", "torchvision's v1 tensor arithmetic (else v2's).", false);
