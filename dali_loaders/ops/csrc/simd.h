// The SIMD helpers the kernels share (augment_*.cc, normalize_kernels.cc, gather_windows.cc,
// pil_resample.h): which CPU this is, whether it has AVX2 (the libraries are built for
// x86-64-v2, SSE4.1, and pick their AVX2 paths at run time), and 4-lane vectors with a
// per-lane fused multiply-add and round-to-even that give exactly what std::fma and
// std::nearbyint give one value at a time.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>

#if defined(__x86_64__) || defined(_M_X64)
#define DALI_LOADERS_X86 1
#include <immintrin.h>
#endif

namespace simd {
// Internal linkage: each library is compiled with its own flags (the augmentations with -mfma
// where the CPU has it), so none may end up calling another library's copy of these.
namespace {

// DALI_LOADERS_PORTABLE=1 in the environment: the plain C++ paths even where AVX2 is, as a CPU
// without it runs them (the tests compare the two).
inline bool have_avx2() {
#ifdef DALI_LOADERS_X86
  const char* portable = std::getenv("DALI_LOADERS_PORTABLE");
  if (portable != nullptr && portable[0] != '\0' && portable[0] != '0') return false;
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));

inline v4f fma4(v4f a, v4f b, v4f c) {   // std::fma per lane
#ifdef __FMA__
  return reinterpret_cast<v4f>(_mm_fmadd_ps(reinterpret_cast<__m128>(a), reinterpret_cast<__m128>(b),
                                            reinterpret_cast<__m128>(c)));
#else
  return v4f{std::fma(a[0], b[0], c[0]), std::fma(a[1], b[1], c[1]), std::fma(a[2], b[2], c[2]),
             std::fma(a[3], b[3], c[3])};
#endif
}

inline v4f round_even4(v4f v) {   // std::nearbyint per lane, in the default rounding mode
#ifdef __SSE4_1__
  return reinterpret_cast<v4f>(_mm_round_ps(reinterpret_cast<__m128>(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  return v4f{std::nearbyint(v[0]), std::nearbyint(v[1]), std::nearbyint(v[2]), std::nearbyint(v[3])};
#endif
}

}  // namespace
}  // namespace simd
