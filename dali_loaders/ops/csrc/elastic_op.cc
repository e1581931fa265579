// ElasticTransform's two CPU operators (elastic_kernels.h has the arithmetic):
// DaliLoadersElasticMaps: per sample, from a (2, H, W) field of uniforms in [-1, 1), or from an
//   int32 (seed, H, W) to draw that field here (the seed is the graph's fn.random.uniform, so
//   checkpoints resume it; DALI's generator took 1.5 ms for a 224 x 224 field, this one a
//   tenth), the source pixel of every output pixel, x and y as two (H, W) maps, as
//   torchvision's get_params and elastic_transform make them.
//   GPU graphs hand the maps to DALI's fn.experimental.remap; CPU graphs to the next one.
// DaliLoadersGridSample: an HWC uint8 image sampled at those maps as torchvision samples it
//   (grid_sample with a mask channel, then the fill), which DALI has no CPU operator for.
#include <algorithm>
#include <string>
#include <vector>

#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"
#include "elastic_kernels.h"

namespace dali_loaders {

using dali::CPUBackend;

class ElasticMaps : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit ElasticMaps(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec), alpha_(spec.GetRepeatedArgument<float>("alpha")),
        sigma_(spec.GetRepeatedArgument<float>("sigma")), sizes_(spec.GetRepeatedArgument<int>("sizes")) {
    DALI_ENFORCE(alpha_.size() == 2 && sigma_.size() == 2 && sizes_.size() == 2,
                 "DaliLoadersElasticMaps: alpha, sigma and sizes take two values each (x, y)");
    for (int axis = 0; axis < 2; axis++)
      DALI_ENFORCE(sigma_[axis] <= 0.0f || (sizes_[axis] > 0 && sizes_[axis] % 2 == 1),
                   "DaliLoadersElasticMaps: a blurred axis needs an odd, positive kernel size");
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &field = ws.Input<CPUBackend>(0);
    const int n = field.num_samples();
    dali::TensorListShape<2> maps(n);
    if (field.type() == DALI_INT32) {   // (seed, H, W): the field drawn here
      for (int i = 0; i < n; i++) {
        DALI_ENFORCE(field.tensor_shape(i).num_elements() == 3,
                     "DaliLoadersElasticMaps takes int32 (seed, height, width) per sample, or a field");
        const int32_t *drawn = field.tensor<int32_t>(i);
        DALI_ENFORCE(drawn[1] >= 0 && drawn[2] >= 0,
                     dali::make_string("DaliLoadersElasticMaps: sample ", i, " has size ", drawn[1], " x ", drawn[2]));
        maps.set_tensor_shape(i, dali::TensorShape<2>(drawn[1], drawn[2]));
      }
    } else {
      DALI_ENFORCE(field.type() == DALI_FLOAT, "DaliLoadersElasticMaps takes a float32 field, or int32 (seed, H, W)");
      DALI_ENFORCE(field.sample_dim() == 3, "DaliLoadersElasticMaps takes a (2, H, W) field per sample");
      for (int i = 0; i < n; i++) {
        const auto shape = field.tensor_shape(i);
        DALI_ENFORCE(shape[0] == 2, dali::make_string("DaliLoadersElasticMaps: sample ", i, "'s field has ",
                                                      shape[0], " planes; it takes 2 (x, y)"));
        maps.set_tensor_shape(i, dali::TensorShape<2>(shape[1], shape[2]));
      }
    }
    output_desc.resize(2);
    output_desc[0] = {maps, DALI_FLOAT};
    output_desc[1] = {maps, DALI_FLOAT};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &field = ws.Input<CPUBackend>(0);
    auto &xs = ws.Output<CPUBackend>(0);
    auto &ys = ws.Output<CPUBackend>(1);
    xs.SetLayout("HW");
    ys.SetLayout("HW");
    auto &pool = ws.GetThreadPool();
    const bool drawn = field.type() == DALI_INT32;
    for (int i = 0; i < field.num_samples(); i++) {
      const auto shape = xs.tensor_shape(i);
      pool.AddWork([&, i, shape](int) {
        const int h = static_cast<int>(shape[0]), w = static_cast<int>(shape[1]);
        const int64_t plane = static_cast<int64_t>(h) * w;
        std::vector<float> planes(2 * plane), scratch(plane);
        if (drawn)
          elastick::draw_field(static_cast<uint32_t>(field.tensor<int32_t>(i)[0]), 2 * plane, planes.data());
        else
          std::copy(field.tensor<float>(i), field.tensor<float>(i) + 2 * plane, planes.begin());
        for (int axis = 0; axis < 2; axis++) {
          float *displacement = planes.data() + axis * plane;
          if (sigma_[axis] > 0.0f)
            elastick::blur(displacement, h, w, sizes_[axis], sigma_[0], sigma_[1], scratch.data());
          float *out = axis == 0 ? xs.mutable_tensor<float>(i) : ys.mutable_tensor<float>(i);
          elastick::source_coordinates(displacement, h, w, axis == 0, alpha_[axis], out);
        }
      }, 2 * shape.num_elements());
    }
    pool.RunAll();
  }

 private:
  std::vector<float> alpha_, sigma_;
  std::vector<int> sizes_;
};

class GridSample : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit GridSample(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec), fill_(spec.GetRepeatedArgument<float>("fill")),
        nearest_(spec.GetArgument<bool>("nearest")), v1_(spec.GetArgument<bool>("v1")) {
    DALI_ENFORCE(!fill_.empty(), "DaliLoadersGridSample: fill takes one value, or one a channel");
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &image = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(image.type() == DALI_UINT8, "DaliLoadersGridSample takes uint8 images");
    DALI_ENFORCE(image.sample_dim() == 3, "DaliLoadersGridSample takes HWC images");
    for (int k = 1; k <= 2; k++) {
      const auto &map = ws.Input<CPUBackend>(k);
      DALI_ENFORCE(map.type() == DALI_FLOAT, "DaliLoadersGridSample takes float32 maps");
      for (int i = 0; i < image.num_samples(); i++) {
        const auto shape = image.tensor_shape(i), map_shape = map.tensor_shape(i);
        DALI_ENFORCE(map_shape.size() == 2 && map_shape[0] == shape[0] && map_shape[1] == shape[1],
                     dali::make_string("DaliLoadersGridSample: sample ", i, "'s map is not the image's H x W"));
        DALI_ENFORCE(fill_.size() == 1 || static_cast<int64_t>(fill_.size()) == shape[2],
                     dali::make_string("DaliLoadersGridSample: fill has ", fill_.size(), " values for ", shape[2],
                                       " channels"));
      }
    }
    output_desc.resize(1);
    output_desc[0] = {image.shape(), DALI_UINT8};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &image = ws.Input<CPUBackend>(0);
    const auto &xs = ws.Input<CPUBackend>(1);
    const auto &ys = ws.Input<CPUBackend>(2);
    auto &output = ws.Output<CPUBackend>(0);
    output.SetLayout(image.GetLayout());
    auto &pool = ws.GetThreadPool();
    for (int i = 0; i < image.num_samples(); i++) {
      const auto shape = image.tensor_shape(i);
      pool.AddWork([&, i, shape](int) {
        elastick::grid_sample(image.tensor<uint8_t>(i), static_cast<int>(shape[0]), static_cast<int>(shape[1]),
                              static_cast<int>(shape[2]), xs.tensor<float>(i), ys.tensor<float>(i), nearest_, v1_,
                              fill_.data(), static_cast<int>(fill_.size()), output.mutable_tensor<uint8_t>(i));
      }, shape.num_elements());
    }
    pool.RunAll();
  }

 private:
  std::vector<float> fill_;
  bool nearest_, v1_;
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersElasticMaps, ::dali_loaders::ElasticMaps, ::dali::CPU);

DALI_SCHEMA(DaliLoadersElasticMaps)
    .DocStr(R"(ElasticTransform's source pixels: from a float32 (2, H, W) field of uniforms in
[-1, 1) per sample, or from int32 (seed, H, W) to draw that field here, plane 0 blurred (if sigma[0] > 0) by sizes[0] x sizes[0] gaussian taps, plane
1 (if sigma[1] > 0) by sizes[1] x sizes[1], sigma[0] across and sigma[1] down, reflect-101
borders; times alpha over the width (x) or height (y), plus torchvision's identity grid, as
pixel coordinates (centres at integers). Outputs x and y, float32 (H, W) each, layout HW.)")
    .NumInput(1)
    .NumOutput(2)
    .AddArg("alpha", "(x, y): the displacement's magnitude.", DALI_FLOAT_VEC)
    .AddArg("sigma", "(x, y): the blur's standard deviations.", DALI_FLOAT_VEC)
    .AddArg("sizes", "(x, y): the blur's kernel sizes, odd (torchvision's int(8 * sigma + 1), made odd).",
            DALI_INT_VEC);

DALI_REGISTER_OPERATOR(DaliLoadersGridSample, ::dali_loaders::GridSample, ::dali::CPU);

DALI_SCHEMA(DaliLoadersGridSample)
    .DocStr(R"(An HWC uint8 image (input 0) sampled at the pixel coordinates x (input 1) and y
(input 2), float32 (H, W) each, as torchvision's grid_sample with zeros outside and a mask
channel: bilinear, the fill blended by the mask as v1 or v2 blends it; or nearest, the fill
where the source is outside; rounded half to even.)")
    .NumInput(3)
    .NumOutput(1)
    .AddOptionalArg("fill", "One value, or one a channel.", std::vector<float>{0.0f})
    .AddOptionalArg("nearest", "Nearest neighbour (else bilinear).", false)
    .AddOptionalArg("v1", "torchvision.transforms' blend (img * mask + (1 - mask) * fill); else v2's.", false);
