// See linear_kernels.h. Each output value is a sum over k in order, one rounding a product and
// one a sum (no contraction): float32 throughout, as torch's float32 mm, whose blocking orders
// the sum differently (the two agree to a few units in the last place of the largest terms).
#include "linear_kernels.h"

#include <algorithm>
#include <vector>

namespace lineark {

constexpr int kColumns = 128;   // a block's accumulators: batch x 128 floats

void multiply_columns(const float* centered, const float* matrix, float* out, int batch, int size, int j0, int j1) {
  std::vector<float> sums(static_cast<size_t>(batch) * kColumns);
  for (int start = j0; start < j1; start += kColumns) {
    const int width = std::min(kColumns, j1 - start);
    std::fill(sums.begin(), sums.end(), 0.0f);
    for (int k = 0; k < size; k++) {
      const float* row = matrix + static_cast<int64_t>(k) * size + start;
      for (int b = 0; b < batch; b++) {
        const float a = centered[static_cast<int64_t>(b) * size + k];
        float* acc = sums.data() + static_cast<int64_t>(b) * kColumns;
        for (int j = 0; j < width; j++) acc[j] += a * row[j];
      }
    }
    for (int b = 0; b < batch; b++)
      std::copy(sums.data() + static_cast<int64_t>(b) * kColumns, sums.data() + static_cast<int64_t>(b) * kColumns + width,
                out + static_cast<int64_t>(b) * size + start);
  }
}

void hwc_to_chw_order(int h, int w, int c, int32_t* index) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int ch = 0; ch < c; ch++) index[(y * w + x) * c + ch] = (ch * h + y) * w + x;
}

}  // namespace lineark
