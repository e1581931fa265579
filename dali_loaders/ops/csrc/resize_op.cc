// DaliLoadersResize: a DALI CPU operator that resizes HWC uint8 images exactly as PIL's
// Image.resize does (pil_resample.h), or, with dtype=FLOAT, as torch resizes a float tensor
// (tensor_resample.h), threaded over the samples with DALI's thread pool.
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

// The geometry arguments both operators take (see the schemas), and the two axes of a resize
// they describe for an image of a given size.
class Geometry {
 public:
  explicit Geometry(const dali::OpSpec &spec)
      : size_("size", spec),
        roi_start_("roi_start", spec),
        roi_end_("roi_end", spec),
        resized_size_("resized_size", spec),
        window_start_("window_start", spec),
        short_side_(spec.GetArgument<int>("short_side")) {
    const std::string filter = spec.GetArgument<std::string>("filter");
    DALI_ENFORCE(filter == "bilinear" || filter == "bicubic" || filter == "nearest",
                 "DaliLoadersResize: filter must be \"bilinear\", \"bicubic\" or \"nearest\", got \"" + filter +
                 "\"");
    filter_ = filter == "bicubic" ? pilrs::Filter::kBicubic
              : filter == "nearest" ? pilrs::Filter::kNearest : pilrs::Filter::kBilinear;
  }

  void Acquire(const dali::OpSpec &spec, const dali::Workspace &ws, int n) {
    size_.Acquire(spec, ws, n, TensorShape<1>(2));
    for (auto *arg : {&roi_start_, &roi_end_, &resized_size_, &window_start_}) {
      if (arg->HasExplicitValue()) arg->Acquire(spec, ws, n, TensorShape<1>(2));
    }
  }

  pilrs::Filter filter() const { return filter_; }

  // Sample i's two axes (height, width) for an h x w image: the box (default: the whole image),
  // the size the box is resized to (default: `size`), and the window of that resize to output
  // (default: all). With short_side: torchvision's Resize(short_side) of this image (the long
  // side scaled and truncated), of which the centred `size` window is output (CenterCrop's
  // offsets, rounded half to even as Python's round): the graph needs no arithmetic on the
  // image's shape.
  std::array<pilrs::Axis, 2> Axes(int i, int h, int w) const {
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

 private:
  static int Round(float v) { return static_cast<int>(std::lround(v)); }

  dali::ArgValue<float, 1> size_, roi_start_, roi_end_, resized_size_, window_start_;
  int short_side_;
  pilrs::Filter filter_;
};

// Stateless (nothing to save in a checkpoint), so the loaders' resumable pipelines can use it
class Resize : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit Resize(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec),
        geometry_(spec),
        image_size_("image_size", spec),
        region_start_("region_start", spec),
        pillow_major_(spec.GetArgument<int>("pillow_major")),
        simd_(!spec.GetArgument<bool>("_portable")),
        dtype_(spec.GetArgument<dali::DALIDataType>("dtype")) {
    DALI_ENFORCE(image_size_.HasExplicitValue() == region_start_.HasExplicitValue(),
                 "DaliLoadersResize: image_size and region_start go together (the input is a region of an image)");
    DALI_ENFORCE(dtype_ == DALI_UINT8 || dtype_ == DALI_FLOAT, "DaliLoadersResize: dtype is UINT8 or FLOAT");
    DALI_ENFORCE(dtype_ == DALI_UINT8 || (geometry_.filter() != pilrs::Filter::kNearest &&
                                         !image_size_.HasExplicitValue()),
                 "DaliLoadersResize: dtype=FLOAT (torch's float resize) takes a bilinear or bicubic filter "
                 "and whole images");
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(input.type() == DALI_UINT8 || (dtype_ == DALI_FLOAT && input.type() == DALI_FLOAT),
                 "DaliLoadersResize takes uint8 images (and float32 ones with dtype=FLOAT)");
    DALI_ENFORCE(input.sample_dim() == 3, "DaliLoadersResize takes HWC images");
    const int n = input.num_samples();
    geometry_.Acquire(spec_, ws, n);
    const bool region = image_size_.HasExplicitValue();
    if (region) {
      image_size_.Acquire(spec_, ws, n, TensorShape<1>(2));
      region_start_.Acquire(spec_, ws, n, TensorShape<1>(2));
    }
    planar_ = input.GetLayout() == "CHW";
    DALI_ENFORCE(!planar_ || dtype_ == DALI_FLOAT, "DaliLoadersResize: CHW images take dtype=FLOAT");
    TensorListShape<3> shape(n);
    axes_.resize(n);
    regions_.resize(n);
    images_.resize(n);
    for (int i = 0; i < n; i++) {   // the input: a whole image, or the region of one it holds
      const auto in = input.tensor_shape(i);
      const int h = static_cast<int>(in[planar_ ? 1 : 0]), w = static_cast<int>(in[planar_ ? 2 : 1]);
      images_[i] = region ? std::array<int, 2>{image_size_[i].data[0], image_size_[i].data[1]}
                          : std::array<int, 2>{h, w};
      regions_[i] = region ? pilrs::Region{region_start_[i].data[0], region_start_[i].data[1], h, w}
                           : pilrs::Region{0, 0, h, w};
      axes_[i] = geometry_.Axes(i, images_[i][0], images_[i][1]);
      shape.set_tensor_shape(i, planar_ ? TensorShape<3>(in[0], axes_[i][0].count, axes_[i][1].count)
                                        : TensorShape<3>(axes_[i][0].count, axes_[i][1].count, in[2]));
    }
    output_desc.resize(1);
    output_desc[0] = {shape, dtype_};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    auto &output = ws.Output<CPUBackend>(0);
    output.SetLayout(input.GetLayout());
    auto &pool = ws.GetThreadPool();
    scratch_.resize(pool.NumThreads());
    const int n = input.num_samples();
    held_.assign(n, 1);
    for (int i = 0; i < n; i++) {
      const int c = static_cast<int>(input.tensor_shape(i)[planar_ ? 0 : 2]);
      const auto &a = axes_[i];
      const auto &r = regions_[i];
      const auto &image = images_[i];
      if (dtype_ == DALI_FLOAT) {
        pool.AddWork([&, i, c](int thread) {
          float *out = output.mutable_tensor<float>(i);
          if (planar_) {   // CHW (the converted image, float): each channel a one-channel image
            const size_t plane = static_cast<size_t>(r.height) * r.width;
            const size_t out_plane = static_cast<size_t>(a[0].count) * a[1].count;
            for (int k = 0; k < c; k++) {
              pilrs::resample_tensor_image(input.tensor<float>(i) + k * plane, r.width, 1, out + k * out_plane, a[0],
                                           a[1], geometry_.filter(), scratch_[thread]);
            }
          } else if (input.type() == DALI_FLOAT) {
            pilrs::resample_tensor_image(input.tensor<float>(i), r.width * c, c, out, a[0], a[1], geometry_.filter(),
                                         scratch_[thread]);
          } else {
            pilrs::resample_tensor_image(input.tensor<uint8_t>(i), r.width * c, c, out, a[0], a[1],
                                         geometry_.filter(), scratch_[thread]);
          }
        }, static_cast<int64_t>(a[0].count) * a[1].count);
        continue;
      }
      pool.AddWork([&, i, c](int thread) {
        held_[i] = pilrs::resample_image(input.tensor<uint8_t>(i), image[0], image[1], r.width * c, c,
                                         output.mutable_tensor<uint8_t>(i), a[0], a[1], geometry_.filter(),
                                         pillow_major_, scratch_[thread], simd_, &r);
      }, static_cast<int64_t>(a[0].count) * a[1].count);   // the biggest first
    }
    pool.RunAll();
    for (int i = 0; i < n; i++) {
      const auto &r = regions_[i];
      DALI_ENFORCE(held_[i], dali::make_string(
          "DaliLoadersResize: sample ", i, ": the region at (", r.top, ", ", r.left, ") of ", r.height, " x ",
          r.width, " pixels lacks pixels the resize reads; decode the region DaliLoadersResizeRegion gives"));
    }
  }

 private:
  Geometry geometry_;
  dali::ArgValue<int, 1> image_size_, region_start_;
  int pillow_major_;
  bool simd_;
  dali::DALIDataType dtype_;   // UINT8: PIL's resize; FLOAT: torch's of a float tensor
  bool planar_ = false;        // CHW input (dtype FLOAT only)
  std::vector<std::array<pilrs::Axis, 2>> axes_;
  std::vector<std::array<int, 2>> images_;   // (height, width) of each image
  std::vector<pilrs::Region> regions_;       // the part of it each input holds
  std::vector<char> held_;
  std::vector<pilrs::Scratch> scratch_;   // one per thread
};

// The region (start, shape; int32 (y, x) each) of each image that DaliLoadersResize with the same
// arguments reads, from the images' sizes (peek_image_shape's HWC or HW): a decoder asked for
// only that region (decoders.image_slice) decodes less and loses no output pixel.
class ResizeRegion : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit ResizeRegion(const dali::OpSpec &spec) : dali::StatelessOperator<CPUBackend>(spec), geometry_(spec) {}

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &sizes = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(sizes.type() == DALI_INT32 && sizes.sample_dim() == 1,
                 "DaliLoadersResizeRegion takes int32 image sizes (peek_image_shape's, dtype=INT32)");
    const int n = sizes.num_samples();
    geometry_.Acquire(spec_, ws, n);
    output_desc.assign(2, {TensorListShape<1>::make_uniform(n, TensorShape<1>(2)), DALI_INT32});
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &sizes = ws.Input<CPUBackend>(0);
    auto &start = ws.Output<CPUBackend>(0);
    auto &shape = ws.Output<CPUBackend>(1);
    for (int i = 0; i < sizes.num_samples(); i++) {
      DALI_ENFORCE(sizes.tensor_shape(i)[0] >= 2, "DaliLoadersResizeRegion: an image size needs (height, width)");
      const int32_t *hw = sizes.tensor<int32_t>(i);
      const auto axes = geometry_.Axes(i, hw[0], hw[1]);
      for (int d = 0; d < 2; d++) {
        int first, last;
        pilrs::read_span(hw[d], axes[d], geometry_.filter(), &first, &last);
        start.mutable_tensor<int32_t>(i)[d] = first;
        shape.mutable_tensor<int32_t>(i)[d] = last - first;
      }
    }
  }

 private:
  Geometry geometry_;
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersResize, ::dali_loaders::Resize, ::dali::CPU);
DALI_REGISTER_OPERATOR(DaliLoadersResizeRegion, ::dali_loaders::ResizeRegion, ::dali::CPU);

// The geometry both operators read (class Geometry)
DALI_SCHEMA(DaliLoadersResizeGeometry)
    .DocStr("The arguments that describe a resize of DaliLoadersResize.")
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
                    "Resize(int)), and the centred `size` window of it is output (CenterCrop).", 0);

DALI_SCHEMA(DaliLoadersResize)
    .DocStr(R"(Resizes HWC uint8 images as PIL's Image.resize (BILINEAR or BICUBIC, which are
antialiased): the same taps, 22-bit fixed-point weights and pass order, so the output equals
PIL's bit for bit; NEAREST too (Pillow's source pixel positions, to the rounding of ties). Optionally a box of the input (Image.resize's box) and a window of the
resized image (a crop of the whole resize, computed without the rest of it).)")
    .NumInput(1)
    .NumOutput(1)
    .InputLayout(0, {"HWC", "CHW"})
    .AddOptionalArg<std::vector<int>>("image_size", "(height, width) of the image when the input holds only "
                                      "a region of it (a region decode), with region_start.", nullptr, true)
    .AddOptionalArg<std::vector<int>>("region_start", "(top, left) of the input in the image of image_size.",
                                      nullptr, true)
    .AddParent("DaliLoadersResizeGeometry")
    .AddOptionalArg("pillow_major", "The Pillow major version whose pass order to follow.", 13)
    .AddOptionalTypeArg("dtype", "UINT8: PIL's resize; FLOAT: torch's antialiased resize of a float tensor "
                    "(torchvision's Resize after ToTensor), in the input's units, unrounded: bilinear or bicubic, "
                    "whole images, the box's start a whole pixel; uint8 or float32 HWC input, or float32 CHW.",
                    DALI_UINT8)
    .AddOptionalArg("_portable", "Tests: the plain C++ path (as on aarch64) even where AVX2 is.", false);

DALI_SCHEMA(DaliLoadersResizeRegion)
    .DocStr(R"(The region (start, shape: int32 (y, x) each) of each image that DaliLoadersResize
with the same arguments reads, given the images' int32 sizes (peek_image_shape's): decoding only
that region (decoders.image_slice(data, start, shape, axis_names="HW")) loses no output pixel.)")
    .NumInput(1)
    .NumOutput(2)
    .AddParent("DaliLoadersResizeGeometry");
