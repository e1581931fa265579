// DaliLoadersGaussianNoise: v2's GaussianNoise on CPU graphs, normal noise added to every value
// of a uint8 or float32 image (any layout) in one pass, the normals drawn here from a seed per
// sample (the graph's fn.random.uniform, so checkpoints resume it). DALI's fn.random.normal
// took ~45 ns a value on the CPU; the noise alone was 10x the rest of a crop-and-flip graph.
#include <string>
#include <vector>

#include "dali/pipeline/operator/arg_helper.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"
#include "noise_kernels.h"

namespace dali_loaders {

using dali::CPUBackend;

class GaussianNoise : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit GaussianNoise(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec), seeds_("noise_seed", spec), mean_(spec.GetArgument<float>("mean")),
        sigma_(spec.GetArgument<float>("sigma")), clip_(spec.GetArgument<bool>("clip")),
        simd_(!spec.GetArgument<bool>("_portable")) {
    DALI_ENFORCE(sigma_ >= 0.0f, dali::make_string("DaliLoadersGaussianNoise: sigma must be >= 0, got ", sigma_));
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(input.type() == DALI_UINT8 || input.type() == DALI_FLOAT,
                 "DaliLoadersGaussianNoise takes uint8 or float32 images");
    seeds_.Acquire(spec_, ws, input.num_samples());
    output_desc.resize(1);
    output_desc[0] = {input.shape(), input.type()};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    auto &output = ws.Output<CPUBackend>(0);
    output.SetLayout(input.GetLayout());
    const bool bytes = input.type() == DALI_UINT8;
    auto &pool = ws.GetThreadPool();
    for (int i = 0; i < input.num_samples(); i++) {
      const int64_t count = input.tensor_shape(i).num_elements();
      pool.AddWork([&, i, count, bytes](int) {
        const auto seed = static_cast<uint32_t>(seeds_[i].data[0]);
        if (bytes)
          noisek::add_noise(input.tensor<uint8_t>(i), output.mutable_tensor<uint8_t>(i), count, mean_, sigma_, clip_,
                            seed, simd_);
        else
          noisek::add_noise(input.tensor<float>(i), output.mutable_tensor<float>(i), count, mean_, sigma_, clip_, seed,
                            simd_);
      }, count);
    }
    pool.RunAll();
  }

 private:
  dali::ArgValue<int, 0> seeds_;
  float mean_, sigma_;
  bool clip_, simd_;
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersGaussianNoise, ::dali_loaders::GaussianNoise, ::dali::CPU);

DALI_SCHEMA(DaliLoadersGaussianNoise)
    .DocStr(R"(v2's GaussianNoise: mean + sigma * N(0, 1) added to every value of a uint8 or float32
image, as torchvision adds it (uint8: mean and sigma in levels, the noise truncated toward zero,
then clamped or wrapped; float32: clamped to 0 .. 1 or not), the normals drawn from `noise_seed`.)")
    .NumInput(1)
    .NumOutput(1)
    .AddArg("noise_seed", "int32 per sample: the seed of its normals.", DALI_INT32, true)
    .AddArg("mean", "The noise's mean, in the image's units (levels for uint8).", DALI_FLOAT)
    .AddArg("sigma", "The noise's deviation, in the image's units (levels for uint8).", DALI_FLOAT)
    .AddOptionalArg("clip", "Clamp to the image's range (else uint8 wraps, floats are left).", true)
    .AddOptionalArg("_portable", "Tests: the normals by the plain C++ path even where AVX2 is (the same values).",
                    false);
