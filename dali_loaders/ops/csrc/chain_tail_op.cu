// DaliLoadersChainTail on the GPU: chain_tail.h's Pixel, one thread a pixel, the samples'
// pointers handed to each launch by value (kChunk samples a launch, within the 4 KiB of kernel
// parameters every CUDA version takes), so that nothing is copied to the device first.
#include <algorithm>
#include <vector>

#include "chain_tail.h"
#include "chain_tail_op.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"

namespace dali_loaders {

namespace {

constexpr int kChunk = 40;   // 40 samples of 80 bytes: 3,200 bytes of parameters
constexpr int kThreads = 256;
constexpr int kMaxBlocksPerSample = 1024;   // a grid-stride loop does the rest

struct Chunk {
  chain_tail::Sample samples[kChunk];
};

__global__ void ChainTailKernel(const Chunk chunk, const chain_tail::Columns columns, int stages) {
  const chain_tail::Sample &s = chunk.samples[blockIdx.y];
  const int64_t pixels = static_cast<int64_t>(s.height) * s.width;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < pixels;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    chain_tail::Pixel(s, columns, stages, static_cast<int>(k / s.width), static_cast<int>(k % s.width));
  }
}

}  // namespace

class ChainTailGpu : public dali::StatelessOperator<dali::GPUBackend> {
 public:
  explicit ChainTailGpu(const dali::OpSpec &spec) : dali::StatelessOperator<dali::GPUBackend>(spec), tail_(spec) {}

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &data = ws.Input<dali::GPUBackend>(0);
    CheckChainTailInputs(tail_, ws, data.num_samples(), [&](int k) { return ws.Input<dali::GPUBackend>(k).type(); },
                         [&](int k, int i) { return ws.Input<dali::GPUBackend>(k).tensor_shape(i); });
    output_desc.resize(1);
    output_desc[0] = {data.shape(), DALI_UINT8};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &data = ws.Input<dali::GPUBackend>(0);
    auto &out = ws.Output<dali::GPUBackend>(0);
    out.SetLayout(data.GetLayout());
    const int n = data.num_samples();
    for (int first = 0; first < n; first += kChunk) {
      Chunk chunk{};
      const int count = std::min(kChunk, n - first);
      int64_t most = 0;
      for (int j = 0; j < count; j++) {
        chunk.samples[j] = SampleOf<dali::GPUBackend>(tail_, ws, first + j, out.mutable_tensor<uint8_t>(first + j));
        most = std::max<int64_t>(most, static_cast<int64_t>(chunk.samples[j].height) * chunk.samples[j].width);
      }
      if (most == 0) continue;
      const int blocks = static_cast<int>(std::min<int64_t>((most + kThreads - 1) / kThreads, kMaxBlocksPerSample));
      ChainTailKernel<<<dim3(blocks, count), kThreads, 0, ws.stream()>>>(chunk, tail_.columns, tail_.stages);
      CUDA_CALL(cudaGetLastError());
    }
  }

 private:
  ChainTailSpec tail_;
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersChainTail, ::dali_loaders::ChainTailGpu, ::dali::GPU);
