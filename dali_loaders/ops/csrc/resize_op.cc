// DaliLoadersResize: a DALI CPU operator that resizes HWC uint8 images exactly as PIL's
// Image.resize does (pil_resample.h), threaded over the samples with DALI's thread pool.
// dali_loaders/plugin.py compiles this file against the installed DALI on first use.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "dali/pipeline/operator/arg_helper.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"
#include "pil_resample_api.h"

namespace dali_loaders {

using dali::CPUBackend;
using dali::TensorListShape;
using dali::TensorShape;

// Stateless (nothing to save in a checkpoint), so the loaders' resumable pipelines can use it
class Resize : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit Resize(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec),
        size_("size", spec),
        roi_start_("roi_start", spec),
        roi_end_("roi_end", spec),
        resized_size_("resized_size", spec),
        window_start_("window_start", spec),
        pillow_major_(spec.GetArgument<int>("pillow_major")),
        short_side_(spec.GetArgument<int>("short_side")),
        simd_(!spec.GetArgument<bool>("_portable")) {
    const std::string filter = spec.GetArgument<std::string>("filter");
    DALI_ENFORCE(filter == "bilinear" || filter == "bicubic" || filter == "nearest",
                 "DaliLoadersResize: filter must be \"bilinear\", \"bicubic\" or \"nearest\", got \"" + filter +
                 "\"");
    filter_ = filter == "bicubic" ? pilrs::Filter::kBicubic
              : filter == "nearest" ? pilrs::Filter::kNearest : pilrs::Filter::kBilinear;
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(input.type() == DALI_UINT8, "DaliLoadersResize takes uint8 images");
    DALI_ENFORCE(input.sample_dim() == 3, "DaliLoadersResize takes HWC images");
    const int n = input.num_samples();
    const auto pair = TensorShape<1>(2);
    size_.Acquire(spec_, ws, n, pair);
    AcquireOptional(roi_start_, ws, n);
    AcquireOptional(roi_end_, ws, n);
    AcquireOptional(resized_size_, ws, n);
    AcquireOptional(window_start_, ws, n);
    TensorListShape<3> shape(n);
    geometry_.resize(n);
    for (int i = 0; i < n; i++) {
      const auto in = input.tensor_shape(i);
      geometry_[i] = Geometry(i, static_cast<int>(in[0]), static_cast<int>(in[1]));
      shape.set_tensor_shape(i, TensorShape<3>(geometry_[i][0].count, geometry_[i][1].count, in[2]));
    }
    output_desc.resize(1);
    output_desc[0] = {shape, DALI_UINT8};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    auto &output = ws.Output<CPUBackend>(0);
    output.SetLayout(input.GetLayout());
    auto &pool = ws.GetThreadPool();
    scratch_.resize(pool.NumThreads());
    for (int i = 0; i < input.num_samples(); i++) {
      const auto in = input.tensor_shape(i);
      const int h = static_cast<int>(in[0]), w = static_cast<int>(in[1]), c = static_cast<int>(in[2]);
      const auto &g = geometry_[i];
      pool.AddWork([&, i, h, w, c](int thread) {
        pilrs::resample_image(input.tensor<uint8_t>(i), h, w, w * c, c, output.mutable_tensor<uint8_t>(i),
                        g[0], g[1], filter_, pillow_major_, scratch_[thread], simd_);
      }, static_cast<int64_t>(g[0].count) * g[1].count);   // the biggest first
    }
    pool.RunAll();
  }

 private:
  void AcquireOptional(dali::ArgValue<float, 1> &arg, const dali::Workspace &ws, int n) {
    if (arg.HasExplicitValue()) arg.Acquire(spec_, ws, n, TensorShape<1>(2));
  }

  static int Round(float v) { return static_cast<int>(std::lround(v)); }

  // Sample i's two axes (height, width): the box (default: the whole image), the size the box
  // is resized to (default: `size`), and the window of that resize to output (default: all).
  // With short_side: torchvision's Resize(short_side) of this image (the long side scaled and
  // truncated), of which the centred `size` window is output (CenterCrop's offsets, rounded
  // half to even as Python's round): the graph needs no arithmetic on the image's shape.
  std::array<pilrs::Axis, 2> Geometry(int i, int h, int w) const {
    std::array<pilrs::Axis, 2> axes;
    const int extent[2] = {h, w};
    if (short_side_ > 0) {
      const bool width_short = w <= h;
      const int64_t long_side = static_cast<int64_t>(short_side_) * (width_short ? h : w) / (width_short ? w : h);
      const int resized[2] = {width_short ? static_cast<int>(long_side) : short_side_,
                              width_short ? short_side_ : static_cast<int>(long_side)};
      for (int d = 0; d < 2; d++) {
        pilrs::Axis &a = axes[d];
        a.count = Round(size_[i].data[d]);
        DALI_ENFORCE(a.count > 0 && a.count <= resized[d],
                     "DaliLoadersResize: with short_side, size must fit inside the resized image");
        a.start = 0.0f;
        a.end = static_cast<float>(extent[d]);
        a.resized = resized[d];
        a.offset = static_cast<int>(std::nearbyint((resized[d] - a.count) / 2.0));
      }
      return axes;
    }
    for (int d = 0; d < 2; d++) {
      pilrs::Axis &a = axes[d];
      a.count = Round(size_[i].data[d]);
      DALI_ENFORCE(a.count > 0, "DaliLoadersResize: the output size must be positive");
      a.start = roi_start_.HasExplicitValue() ? roi_start_[i].data[d] : 0.0f;
      a.end = roi_end_.HasExplicitValue() ? roi_end_[i].data[d] : static_cast<float>(extent[d]);
      DALI_ENFORCE(a.end > a.start, "DaliLoadersResize: roi_end must be past roi_start");
      a.resized = resized_size_.HasExplicitValue() ? Round(resized_size_[i].data[d]) : a.count;
      DALI_ENFORCE(a.resized > 0, "DaliLoadersResize: resized_size must be positive");
      a.offset = window_start_.HasExplicitValue() ? Round(window_start_[i].data[d]) : 0;
    }
    return axes;
  }

  dali::ArgValue<float, 1> size_, roi_start_, roi_end_, resized_size_, window_start_;
  int pillow_major_;
  int short_side_;
  bool simd_;
  pilrs::Filter filter_;
  std::vector<std::array<pilrs::Axis, 2>> geometry_;
  std::vector<pilrs::Scratch> scratch_;   // one per thread
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersResize, ::dali_loaders::Resize, ::dali::CPU);

DALI_SCHEMA(DaliLoadersResize)
    .DocStr(R"(Resizes HWC uint8 images as PIL's Image.resize (BILINEAR or BICUBIC, which are
antialiased): the same taps, 22-bit fixed-point weights and pass order, so the output equals
PIL's bit for bit; NEAREST too (Pillow's source pixel positions, to the rounding of ties). Optionally a box of the input (Image.resize's box) and a window of the
resized image (a crop of the whole resize, computed without the rest of it).)")
    .NumInput(1)
    .NumOutput(1)
    .InputLayout(0, "HWC")
    .AddArg("size", "Output (height, width), per sample.", DALI_FLOAT_VEC, true)
    .AddOptionalArg<std::vector<float>>("roi_start", "Box start (y, x) in input pixels; default (0, 0).",
                                        nullptr, true)
    .AddOptionalArg<std::vector<float>>("roi_end", "Box end (y, x) in input pixels; default the image size.",
                                        nullptr, true)
    .AddOptionalArg<std::vector<float>>("resized_size",
                                        "(height, width) the box is resized to, of which `size` pixels are "
                                        "output from `window_start`; default `size`.", nullptr, true)
    .AddOptionalArg<std::vector<float>>("window_start", "(top, left) of the output in the resized image.",
                                        nullptr, true)
    .AddOptionalArg("filter", "\"bilinear\", \"bicubic\" or \"nearest\".", std::string("bilinear"))
    .AddOptionalArg("short_side", "If > 0: the image is resized so that its short side is this (torchvision's "
                    "Resize(int)), and the centred `size` window of it is output (CenterCrop).", 0)
    .AddOptionalArg("pillow_major", "The Pillow major version whose pass order to follow.", 13)
    .AddOptionalArg("_portable", "Tests: the plain C++ path (as on aarch64) even where AVX2 is.", false);
