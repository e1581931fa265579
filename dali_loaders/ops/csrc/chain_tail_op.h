// What DaliLoadersChainTail's CPU and GPU operators share: its arguments, the check of its
// inputs, and a sample's pointers (chain_tail.h's Sample) on either backend.
#pragma once

#include <vector>

#include "chain_tail.h"
#include "dali/pipeline/operator/operator.h"

namespace dali_loaders {

struct ChainTailSpec {
  int stages = 0;
  chain_tail::Columns columns{};
  // the input of each optional stage, in the schema's order (-1: absent)
  int mean = -1, inner = -1, lo = -1, hi = -1, equalized = -1, count = 2;

  explicit ChainTailSpec(const dali::OpSpec &spec) : stages(spec.GetArgument<int>("stages")) {
    const auto at = spec.GetRepeatedArgument<int>("columns");
    DALI_ENFORCE(static_cast<int>(at.size()) == chain_tail::kNumColumns,
                 dali::make_string("DaliLoadersChainTail: columns must name ", int(chain_tail::kNumColumns), " columns"));
    for (int k = 0; k < chain_tail::kNumColumns; k++) columns.at[k] = at[k];
    if (stages & chain_tail::kContrast) mean = count++;
    if (stages & chain_tail::kSharpness) inner = count++;
    if (stages & chain_tail::kAutoContrast) {
      lo = count++;
      hi = count++;
    }
    if (stages & chain_tail::kEqualize) equalized = count++;
  }
};

// The inputs' types and shapes against the stages: type_of(k), shape_of(k, sample)
template <typename TypeOf, typename ShapeOf>
void CheckChainTailInputs(const ChainTailSpec &spec, const dali::Workspace &ws, int n, TypeOf type_of,
                          ShapeOf shape_of) {
  DALI_ENFORCE(ws.NumInput() == spec.count,
               dali::make_string("DaliLoadersChainTail: the stages take ", spec.count, " inputs, got ", ws.NumInput()));
  DALI_ENFORCE(type_of(0) == DALI_UINT8 && type_of(1) == DALI_FLOAT,
               "DaliLoadersChainTail takes uint8 images and float32 rows");
  for (int i = 0; i < n; i++) {
    const auto shape = shape_of(0, i);
    DALI_ENFORCE(shape.size() == 3 && (shape[2] == 1 || shape[2] == 3 || shape[2] == 4),
                 "DaliLoadersChainTail takes HWC images of 1, 3 or 4 channels");
    const int64_t columns = shape_of(1, i).num_elements();
    for (int k = 0; k < chain_tail::kNumColumns; k++)
      DALI_ENFORCE(spec.columns.at[k] < columns, "DaliLoadersChainTail: a column past the row's end");
    if (spec.mean >= 0) DALI_ENFORCE(shape_of(spec.mean, i).num_elements() == 1, "DaliLoadersChainTail: one mean an image");
    if (spec.inner >= 0) {
      const auto inner = shape_of(spec.inner, i);
      DALI_ENFORCE(inner.size() == 3 && inner[0] == std::max<int64_t>(shape[0] - 2, 0) &&
                   inner[1] == std::max<int64_t>(shape[1] - 2, 0) && inner[2] == shape[2],
                   "DaliLoadersChainTail: the smoothed inner image must be the image less its border");
    }
    if (spec.lo >= 0)
      DALI_ENFORCE(shape_of(spec.lo, i).num_elements() == shape[2] && shape_of(spec.hi, i).num_elements() == shape[2],
                   "DaliLoadersChainTail: min and max per channel");
    if (spec.equalized >= 0) DALI_ENFORCE(shape_of(spec.equalized, i) == shape, "DaliLoadersChainTail: equalized, the image's shape");
  }
}

template <typename Backend>
chain_tail::Sample SampleOf(const ChainTailSpec &spec, const dali::Workspace &ws, int i, uint8_t *out) {
  const auto &data = ws.Input<Backend>(0);
  const auto shape = data.tensor_shape(i);
  chain_tail::Sample s{};
  s.in = data.template tensor<uint8_t>(i);
  s.out = out;
  s.row = ws.Input<Backend>(1).template tensor<float>(i);
  if (spec.mean >= 0) s.mean = ws.Input<Backend>(spec.mean).template tensor<float>(i);
  if (spec.inner >= 0) s.inner = ws.Input<Backend>(spec.inner).template tensor<uint8_t>(i);
  if (spec.lo >= 0) {
    s.lo = ws.Input<Backend>(spec.lo).template tensor<uint8_t>(i);
    s.hi = ws.Input<Backend>(spec.hi).template tensor<uint8_t>(i);
  }
  if (spec.equalized >= 0) s.equalized = ws.Input<Backend>(spec.equalized).template tensor<uint8_t>(i);
  s.height = static_cast<int>(shape[0]);
  s.width = static_cast<int>(shape[1]);
  s.channels = static_cast<int>(shape[2]);
  return s;
}

}  // namespace dali_loaders
