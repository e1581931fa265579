// Standard normal draws that are a function of a 32-bit seed alone (the same values on every
// machine, with or without AVX2), compiled at -O3 with the kernels that need many of them:
// RandomErasing's noise (erase_fill.cc) and GaussianNoise (noise_kernels.cc). A ziggurat: a
// table lookup and a product for 98.5% of draws, 8 at a time (normals.cc).
#pragma once

#include <cstdint>

namespace noisek {

// One whole draw at a time (a value per channel), and the few draws that leave
// NormalStream's fast path
class Normals {
 public:
  explicit Normals(uint32_t seed);
  float operator()();
  // A draw at x across layer i that is not wholly under the curve: the tail, a point under
  // the wedge, or NaN (rejected: the ziggurat starts over)
  float Finish(int i, double x, bool negative);

 private:
  static float Signed(double x, bool negative);
  double Uniform();
  double Tail();
  uint64_t Next();

  uint64_t state_;
};

// The stream of one seed: successive fill() calls continue it. `simd`: the AVX2 path where the
// CPU has it (the same values as the plain C++ one)
class NormalStream {
 public:
  NormalStream(uint32_t seed, bool simd);
  void fill(float* out, int n);

 private:
  unsigned Draws(float* out, uint32_t* lo, uint32_t* hi) const;
  float Finish(uint32_t lo, uint32_t hi);

  uint64_t start_;
  uint32_t index_ = 0;
  Normals slow_;
  bool simd_;
};

}  // namespace noisek
