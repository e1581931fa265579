// See noise_kernels.h. The normals come in blocks that stay in the L1 cache; the loops over a
// block are plain C++ that the compiler vectorizes.
#include "noise_kernels.h"

#include <algorithm>

#include "normals.h"

namespace noisek {
namespace {

constexpr int kBlock = 1024;

// Calls add(z, at, n) for the normals z of values at .. at + n - 1, a block at a time
template <typename Add>
void in_blocks(int64_t count, uint32_t seed, bool simd, Add add) {
  NormalStream normals(seed, simd);
  float z[kBlock];
  for (int64_t at = 0; at < count; at += kBlock) {
    const int n = static_cast<int>(std::min<int64_t>(kBlock, count - at));
    normals.fill(z, n);
    add(z, at, n);
  }
}

}  // namespace

void add_noise(const float* in, float* out, int64_t count, float mean, float sigma, bool clip, uint32_t seed,
               bool simd) {
  in_blocks(count, seed, simd, [&](const float* z, int64_t at, int n) {
    const float* src = in + at;
    float* dst = out + at;
    if (clip) {
      for (int k = 0; k < n; k++) dst[k] = std::min(std::max(src[k] + (mean + z[k] * sigma), 0.0f), 1.0f);
    } else {
      for (int k = 0; k < n; k++) dst[k] = src[k] + (mean + z[k] * sigma);
    }
  });
}

void add_noise(const uint8_t* in, uint8_t* out, int64_t count, float mean, float sigma, bool clip, uint32_t seed,
               bool simd) {
  in_blocks(count, seed, simd, [&](const float* z, int64_t at, int n) {
    const uint8_t* src = in + at;
    uint8_t* dst = out + at;
    for (int k = 0; k < n; k++) {
      // beyond +-2^30 the result no longer depends on the noise's size (clip) or its low bits
      // do not fit (torch's cast is undefined there too): held inside int32
      const float noise = std::min(std::max(mean + z[k] * sigma, -1073741824.0f), 1073741824.0f);
      const int32_t sum = static_cast<int32_t>(src[k]) + static_cast<int32_t>(noise);   // toward zero
      dst[k] = static_cast<uint8_t>(clip ? std::min(std::max(sum, 0), 255) : (sum & 0xff));
    }
  });
}

}  // namespace noisek
