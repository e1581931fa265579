// DaliLoadersMix: AugMix's mix of an image and its augmented chains, torchvision's or timm's,
// uint8 in, uint8 out, in one pass (mix_kernels.h), where DALI's arithmetic operators take
// several passes and float32 copies of each image (benchmarks/mix_cost.py times both).
#include <vector>

#include "dali/pipeline/operator/arg_helper.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"
#include "mix_kernels.h"

namespace dali_loaders {

using dali::CPUBackend;

class Mix : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit Mix(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec), weights_("weights", spec), blend_(spec.GetArgument<bool>("blend")) {}

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &image = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(image.type() == DALI_UINT8, "DaliLoadersMix takes uint8 images");
    const int n = image.num_samples(), inputs = ws.NumInput();
    for (int k = 1; k < inputs; k++) {
      const auto &chain = ws.Input<CPUBackend>(k);
      DALI_ENFORCE(chain.type() == DALI_UINT8, "DaliLoadersMix takes uint8 images");
      for (int i = 0; i < n; i++)
        DALI_ENFORCE(chain.tensor_shape(i) == image.tensor_shape(i),
                     dali::make_string("DaliLoadersMix: input ", k, " of sample ", i, " has another shape than the image"));
    }
    weights_.Acquire(spec_, ws, n);
    for (int i = 0; i < n; i++)
      DALI_ENFORCE(weights_[i].shape[0] == inputs,
                   dali::make_string("DaliLoadersMix: ", inputs, " weights a sample (one an input), got ",
                                     weights_[i].shape[0]));
    output_desc.resize(1);
    output_desc[0] = {image.shape(), DALI_UINT8};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &image = ws.Input<CPUBackend>(0);
    auto &output = ws.Output<CPUBackend>(0);
    output.SetLayout(image.GetLayout());
    auto &pool = ws.GetThreadPool();
    const int inputs = ws.NumInput();
    for (int i = 0; i < image.num_samples(); i++) {
      const int64_t size = image.tensor_shape(i).num_elements();
      pool.AddWork([&, i, size](int) {
        std::vector<const uint8_t *> images(inputs);
        for (int k = 0; k < inputs; k++) images[k] = ws.Input<CPUBackend>(k).tensor<uint8_t>(i);
        if (blend_)
          mixk::blend_mix_image(images.data(), inputs, weights_[i].data, size, output.mutable_tensor<uint8_t>(i));
        else
          mixk::mix_image(images.data(), inputs, weights_[i].data, size, output.mutable_tensor<uint8_t>(i));
      }, size * inputs);
    }
    pool.RunAll();
  }

 private:
  dali::ArgValue<float, 1> weights_;
  bool blend_;
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersMix, ::dali_loaders::Mix, ::dali::CPU);

DALI_SCHEMA(DaliLoadersMix)
    .DocStr(R"(AugMix's mix: the uint8 image (input 0) and its chains (inputs 1 ..), each times its
weight (`weights`, float32, one an input, per sample), summed in float32 in input order and
truncated to uint8, as torchvision computes it; with `blend`, timm's: the chains' weighted sum
truncated to uint8, then PIL's blend of the image towards it by weights[0].)")
    .NumInput(2, 64)
    .NumOutput(1)
    .AddArg("weights", "float32 (inputs,) per sample: each input's weight (with `blend`, the first the blend's).",
            DALI_FLOAT_VEC, true)
    .AddOptionalArg("blend", "timm's mix: the chains summed, then blended with the image (PIL's Image.blend).", false);
