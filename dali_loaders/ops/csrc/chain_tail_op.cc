// DaliLoadersChainTail on the CPU (chain_tail.h says what it computes): what the tests run here,
// against the chain's DALI operators; chain_tail_op.cu registers the GPU operator of the same name.
#include <vector>

#include "chain_tail.h"
#include "chain_tail_op.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"

namespace dali_loaders {

using dali::CPUBackend;

class ChainTailCpu : public dali::StatelessOperator<CPUBackend> {
 public:
  explicit ChainTailCpu(const dali::OpSpec &spec) : dali::StatelessOperator<CPUBackend>(spec), tail_(spec) {}

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &data = ws.Input<CPUBackend>(0);
    CheckChainTailInputs(tail_, ws, data.num_samples(), [&](int k) { return ws.Input<CPUBackend>(k).type(); },
                         [&](int k, int i) { return ws.Input<CPUBackend>(k).tensor_shape(i); });
    output_desc.resize(1);
    output_desc[0] = {data.shape(), DALI_UINT8};
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const auto &data = ws.Input<CPUBackend>(0);
    auto &out = ws.Output<CPUBackend>(0);
    out.SetLayout(data.GetLayout());
    auto &pool = ws.GetThreadPool();
    for (int i = 0; i < data.num_samples(); i++) {
      const auto shape = data.tensor_shape(i);
      pool.AddWork([&, i, shape](int) {
        const chain_tail::Sample s = SampleOf<CPUBackend>(tail_, ws, i, out.mutable_tensor<uint8_t>(i));
        for (int y = 0; y < s.height; y++)
          for (int x = 0; x < s.width; x++) chain_tail::Pixel(s, tail_.columns, tail_.stages, y, x);
      }, shape.num_elements());
    }
    pool.RunAll();
  }

 private:
  ChainTailSpec tail_;
};

}  // namespace dali_loaders

DALI_REGISTER_OPERATOR(DaliLoadersChainTail, ::dali_loaders::ChainTailCpu, ::dali::CPU);

DALI_SCHEMA(DaliLoadersChainTail)
    .DocStr(R"(The pixel stages of one slot of the AutoAugment family's chain after its warp, in one
pass (csrc/chain_tail.h): inputs the HWC uint8 images, the slot's float32 row of parameters, then,
each with its stage, the mean grey level, the smoothed inner image, each channel's min and max,
and the equalized image. Output: uint8, the images' shape.)")
    .NumInput(2, 7)
    .NumOutput(1)
    .AddArg("stages", "chain_tail.h's Stage flags, or-ed.", DALI_INT32)
    .AddArg("columns", "The row's column for each of chain_tail.h's Column entries (-1: unused).",
            DALI_INT_VEC);
