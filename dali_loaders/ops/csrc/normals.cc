// See normals.h. The ziggurat is Marsaglia and Tsang's (2000) with 256 layers of equal area
// under exp(-x^2 / 2): a draw picks a layer and a point across it; inside the part of the layer
// that lies wholly under the curve (all but ~1.5% of draws) that point is the normal, else the
// wedge is tested against the curve, and the base layer's overhang samples the tail beyond R
// by Marsaglia's exponential method.
//
// Speed: the fast path runs 8 draws at a time. Draw k of an image is SplitMix64's word k of a
// stream the image's seed starts (a counter through a 64-bit mix, so 8 words are SIMD lanes):
// the layer (bits 0-7), the sign (bit 8) and the point across the layer (bits 41-63, the
// middle of one of 2^23 steps, never 0), in float32. The few draws that leave the fast path
// finish on a second SplitMix64 stream of the seed, in double. The AVX2 path and the plain C++
// one compute the same operations on the same words: the same values.
#include "normals.h"

#include <algorithm>
#include <cmath>

#include "simd.h"

namespace noisek {
namespace {

constexpr int kLayers = 256;
constexpr double kR = 3.6541528853610088;        // where the tail starts
constexpr double kArea = 4.92867323399e-3;       // each layer's area (the base's: R f(R) + the tail)
constexpr int kLanes = 8;

double curve(double x) { return std::exp(-0.5 * x * x); }

struct Tables {
  double x[kLayers + 1];   // layer i spans [0, x[i]] x [f(x[i]), f(x[i + 1])]; x[0] is the base's width
  double f[kLayers + 1];
  float step[kLayers];     // x[i] / 2^23: a draw's point is (its 23 bits + 0.5) * step[i]
  float inner[kLayers];    // x[i + 1] rounded down: a point below it is under the curve
  Tables() {
    x[0] = kArea / curve(kR);
    x[1] = kR;
    for (int i = 1; i < kLayers - 1; i++) x[i + 1] = std::sqrt(-2.0 * std::log(kArea / x[i] + curve(x[i])));
    x[kLayers] = 0.0;
    for (int i = 0; i <= kLayers; i++) f[i] = curve(x[i]);
    for (int i = 0; i < kLayers; i++) {
      step[i] = static_cast<float>(x[i]) * 0x1.0p-23f;
      const float below = static_cast<float>(x[i + 1]);
      inner[i] = static_cast<double>(below) > x[i + 1] ? std::nextafter(below, 0.0f) : below;
    }
  }
};

const Tables& tables() {
  static const Tables t;   // built once, thread-safe
  return t;
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;   // SplitMix64's increment
constexpr uint64_t kMix1 = 0xBF58476D1CE4E5B9ull, kMix2 = 0x94D049BB133111EBull;

inline uint64_t mix64(uint64_t z) {   // SplitMix64's output function
  z = (z ^ (z >> 30)) * kMix1;
  z = (z ^ (z >> 27)) * kMix2;
  return z ^ (z >> 31);
}

// The fast path of draws index .. index + 7 of the stream that starts at `start`: their normals
// into out, their words' low and high halves into lo[] and hi[], and a bit per draw that left
// the fast path
inline unsigned draws_portable(uint64_t start, uint32_t index, float* out, uint32_t* lo, uint32_t* hi) {
  const Tables& t = tables();
  unsigned slow = 0;
  for (int k = 0; k < kLanes; k++) {
    const uint64_t r = mix64(start + (static_cast<uint64_t>(index) + k + 1) * kGolden);
    lo[k] = static_cast<uint32_t>(r);
    hi[k] = static_cast<uint32_t>(r >> 32);
    const int i = static_cast<int>(lo[k] & 0xff);
    const float x = (static_cast<float>(hi[k] >> 9) + 0.5f) * t.step[i];
    out[k] = (lo[k] & 0x100) ? -x : x;
    slow |= static_cast<unsigned>(!(x < t.inner[i])) << k;
  }
  return slow;
}

#ifdef DALI_LOADERS_X86
__attribute__((target("avx2"))) inline __m256i times(__m256i a, uint64_t c) {   // 64-bit lanes, mod 2^64
  const __m256i c_lo = _mm256_set1_epi64x(static_cast<int64_t>(c & 0xffffffffu));
  const __m256i c_hi = _mm256_set1_epi64x(static_cast<int64_t>(c >> 32));
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo), _mm256_mul_epu32(a, c_hi));
  return _mm256_add_epi64(_mm256_mul_epu32(a, c_lo), _mm256_slli_epi64(cross, 32));
}

__attribute__((target("avx2"))) inline __m256i mix64x4(__m256i z) {
  z = times(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), kMix1);
  z = times(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), kMix2);
  return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

__attribute__((target("avx2"))) unsigned draws_avx2(uint64_t start, uint32_t index, float* out, uint32_t* lo,
                                                    uint32_t* hi) {
  const Tables& t = tables();
  const uint64_t first = start + (static_cast<uint64_t>(index) + 1) * kGolden;
  const auto counter = [&](int k) { return static_cast<int64_t>(first + k * kGolden); };
  const __m256 a = _mm256_castsi256_ps(mix64x4(_mm256_setr_epi64x(counter(0), counter(1), counter(2), counter(3))));
  const __m256 b = _mm256_castsi256_ps(mix64x4(_mm256_setr_epi64x(counter(4), counter(5), counter(6), counter(7))));
  // the eight words' halves in draw order (shuffle_ps works within 128-bit lanes)
  const __m256i low = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(a, b, 0x88)), 0xD8);
  const __m256i high = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8);
  const __m256i layer = _mm256_and_si256(low, _mm256_set1_epi32(0xff));
  const __m256 across = _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(high, 9)), _mm256_set1_ps(0.5f));
  const __m256 x = _mm256_mul_ps(across, _mm256_i32gather_ps(t.step, layer, 4));
  const __m256 sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(low, _mm256_set1_epi32(0x100)), 23));
  _mm256_storeu_ps(out, _mm256_xor_ps(x, sign));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), low);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), high);
  const __m256 inside = _mm256_cmp_ps(x, _mm256_i32gather_ps(t.inner, layer, 4), _CMP_LT_OQ);
  return static_cast<unsigned>(~_mm256_movemask_ps(inside)) & 0xffu;
}
#endif

}  // namespace

Normals::Normals(uint32_t seed) : state_(kGolden ^ seed) {}

float Normals::operator()() {
  const Tables& t = tables();
  for (;;) {
    const uint64_t r = Next();
    const int i = static_cast<int>(r & 0xff);
    const double x = static_cast<double>(r >> 11) * 0x1.0p-53 * t.x[i];
    if (x < t.x[i + 1]) return Signed(x, (r >> 8) & 1);
    if (const float v = Finish(i, x, (r >> 8) & 1); !std::isnan(v)) return v;
  }
}

float Normals::Finish(int i, double x, bool negative) {
  const Tables& t = tables();
  if (i == 0) return Signed(Tail(), negative);
  if (t.f[i] + Uniform() * (t.f[i + 1] - t.f[i]) < curve(x)) return Signed(x, negative);
  return NAN;
}

float Normals::Signed(double x, bool negative) { return static_cast<float>(negative ? -x : x); }

double Normals::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }   // [0, 1)

double Normals::Tail() {   // beyond R: R + a, a ~ exponential(R), kept with probability exp(-a^2 / 2)
  for (;;) {
    const double a = -std::log(1.0 - Uniform()) / kR, b = -std::log(1.0 - Uniform());
    if (b + b >= a * a) return kR + a;
  }
}

uint64_t Normals::Next() { return mix64(state_ += kGolden); }

NormalStream::NormalStream(uint32_t seed, bool simd)
    : start_(mix64(seed ^ 0xD1B54A32D192ED03ull)), slow_(seed), simd_(simd && simd::have_avx2()) {}

void NormalStream::fill(float* out, int n) {
  float block[kLanes];
  uint32_t lo[kLanes], hi[kLanes];
  for (int at = 0; at < n; at += kLanes, index_ += kLanes) {
    const int count = std::min(kLanes, n - at);
    float* dst = count == kLanes ? out + at : block;
    for (unsigned slow = Draws(dst, lo, hi); slow; slow &= slow - 1) {
      const int k = __builtin_ctz(slow);
      dst[k] = Finish(lo[k], hi[k]);
    }
    if (dst == block) std::copy(block, block + count, out + at);
  }
}

unsigned NormalStream::Draws(float* out, uint32_t* lo, uint32_t* hi) const {
#ifdef DALI_LOADERS_X86
  if (simd_) return draws_avx2(start_, index_, out, lo, hi);
#endif
  return draws_portable(start_, index_, out, lo, hi);
}

float NormalStream::Finish(uint32_t lo, uint32_t hi) {   // a draw (its word's halves) that left the fast path
  const int i = static_cast<int>(lo & 0xff);
  const float x = (static_cast<float>(hi >> 9) + 0.5f) * tables().step[i];
  const float v = slow_.Finish(i, x, lo & 0x100);
  return std::isnan(v) ? slow_() : v;
}

}  // namespace noisek
