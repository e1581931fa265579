// DaliLoadersLinear: torchvision's LinearTransformation on float32 CHW or HWC images, CPU: each
// image flattened in C x H x W order (its logical order, whatever the layout), the mean
// subtracted, times the D x D matrix (linear_kernels.h), put back in the image's layout. The
// matrix and the mean come from a file the library writes (ops/linear.py: raw float32, the mean
// then the matrix row by row) and are read once, when the pipeline is built: as an argument a
// 3072 x 3072 matrix took 4 s and 3 GB to build and 310 MB in the serialized pipeline.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"
#include "linear_kernels.h"

namespace dali_loaders {

using dali::CPUBackend;

class Linear : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit Linear(const dali::OpSpec &spec)
      : dali::StatelessOperator<CPUBackend>(spec), size_(spec.GetArgument<int>("size")) {
    const std::string path = spec.GetArgument<std::string>("matrix_file");
    DALI_ENFORCE(size_ > 0, dali::make_string("DaliLoadersLinear: size must be > 0, got ", size_));
    const size_t count = static_cast<size_t>(size_) * (static_cast<size_t>(size_) + 1);
    values_.resize(count);
    std::unique_ptr<FILE, int (*)(FILE *)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
    DALI_ENFORCE(file != nullptr, dali::make_string("DaliLoadersLinear: cannot open ", path));
    const size_t read = std::fread(values_.data(), sizeof(float), count, file.get());
    char extra;
    DALI_ENFORCE(read == count && std::fread(&extra, 1, 1, file.get()) == 0,
                 dali::make_string("DaliLoadersLinear: ", path, " does not hold ", count,
                                   " float32 values (a mean of ", size_, " and a ", size_, " x ", size_, " matrix)"));
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &input = ws.Input<CPUBackend>(0);
    DALI_ENFORCE(input.type() == DALI_FLOAT, "DaliLoadersLinear takes float32 images");
    DALI_ENFORCE(input.sample_dim() == 3, "DaliLoadersLinear takes CHW or HWC images");
    for (int i = 0; i < input.num_samples(); i++) {
      const auto shape = input.tensor_shape(i);
      DALI_ENFORCE(shape.num_elements() == size_,
                   dali::make_string("LinearTransformation: the image has ", shape[0], " x ", shape[1], " x ", shape[2],
                                     " = ", shape.num_elements(), " values and the transformation matrix is ", size_,
                                     " x ", size_, "; resize or crop the images to the size the matrix was made for"));
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
    const bool hwc = layout == "HWC";
    const int n = input.num_samples();
    const int64_t size = size_;
    centered_.resize(static_cast<size_t>(n) * size);
    product_.resize(static_cast<size_t>(n) * size);
    const float *mean = values_.data(), *matrix = values_.data() + size;
    auto &pool = ws.GetThreadPool();
    // each image in C x H x W order, less the mean; the order of an HWC image's values
    std::vector<std::vector<int32_t>> orders(n);
    for (int i = 0; i < n; i++) {
      pool.AddWork([&, i](int) {
        const auto shape = input.tensor_shape(i);
        const float *src = input.tensor<float>(i);
        float *dst = centered_.data() + i * size;
        if (hwc) {
          orders[i].resize(size);
          lineark::hwc_to_chw_order(static_cast<int>(shape[0]), static_cast<int>(shape[1]), static_cast<int>(shape[2]),
                                    orders[i].data());
          for (int64_t v = 0; v < size; v++) dst[orders[i][v]] = src[v] - mean[orders[i][v]];
        } else {
          for (int64_t v = 0; v < size; v++) dst[v] = src[v] - mean[v];
        }
      }, size);
    }
    pool.RunAll();
    // the product, a block of columns a task
    const int threads = std::max(1, pool.NumThreads());
    const int64_t block = std::max<int64_t>(128, (size / (4 * threads) + 127) / 128 * 128);
    for (int64_t j0 = 0; j0 < size; j0 += block) {
      const int64_t j1 = std::min(size, j0 + block);
      pool.AddWork([&, j0, j1](int) {
        lineark::multiply_columns(centered_.data(), matrix, product_.data(), n, size_, static_cast<int>(j0),
                                  static_cast<int>(j1));
      }, (j1 - j0) * n);
    }
    pool.RunAll();
    for (int i = 0; i < n; i++) {
      pool.AddWork([&, i](int) {
        const float *src = product_.data() + i * size;
        float *dst = output.mutable_tensor<float>(i);
        if (hwc) {
          for (int64_t v = 0; v < size; v++) dst[v] = src[orders[i][v]];
        } else {
          std::copy(src, src + size, dst);
        }
      }, size);
    }
    pool.RunAll();
  }

 private:
  int size_;
  std::vector<float> values_;   // the mean, then the matrix
  std::vector<float> centered_, product_;
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersLinear, ::dali_loaders::Linear, ::dali::CPU);

DALI_SCHEMA(DaliLoadersLinear)
    .DocStr(R"(torchvision's LinearTransformation on float32 CHW or HWC images: each image in
C x H x W order, less the mean, times the matrix (torch.mm(x - mean, M)), in the image's layout.
The mean and the matrix are read from `matrix_file` (float32: `size` values, then size x size).)")
    .NumInput(1)
    .NumOutput(1)
    .AddArg("matrix_file", "The file holding the mean and the matrix (raw float32).", DALI_STRING)
    .AddArg("size", "D = C x H x W: the mean's length and the matrix's side.", DALI_INT32);
