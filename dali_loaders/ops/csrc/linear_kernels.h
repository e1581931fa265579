// LinearTransformation (ZCA whitening and the like) on the CPU (DaliLoadersLinear, linear_op.cc):
// each image flattened in C x H x W order, the mean subtracted, times a D x D matrix, as
// torchvision computes torch.mm(x - mean, M). Compiled at -O3 with the augmentation kernels.
#pragma once

#include <cstdint>

namespace lineark {

// Columns j0 .. j1 - 1 of out[b] = centered[b] @ matrix for b < batch: centered and out are
// batch x size, matrix size x size, row-major. A column block at a time, so a batch reads each
// row of the matrix once (a D = 3072 matrix is 36 MiB, past every cache).
void multiply_columns(const float* centered, const float* matrix, float* out, int batch, int size, int j0, int j1);

// The flat index in C x H x W order of each value of an H x W x C image: index[v] for value v
void hwc_to_chw_order(int h, int w, int c, int32_t* index);

}  // namespace lineark
