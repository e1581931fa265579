// See erase_fill.h. The ziggurat is Marsaglia and Tsang's (2000) with 256 layers of equal area
// under exp(-x^2 / 2): a draw picks a layer and a point across it; inside the part of the layer
// that lies wholly under the curve (all but ~1% of draws) that point is the normal, else the
// wedge is tested against the curve, and the base layer's overhang samples the tail beyond R
// by Marsaglia's exponential method. One 64-bit draw gives the layer (bits 0-7), the sign
// (bit 8) and a 53-bit uniform (bits 11-63).
#include "erase_fill.h"

#include <cmath>

namespace erasek {
namespace {

constexpr int kLayers = 256;
constexpr double kR = 3.6541528853610088;        // where the tail starts
constexpr double kArea = 4.92867323399e-3;       // each layer's area (the base's: R f(R) + the tail)

double curve(double x) { return std::exp(-0.5 * x * x); }

struct Tables {
  double x[kLayers + 1];   // layer i spans [0, x[i]] x [f(x[i]), f(x[i + 1])]; x[0] is the base's width
  double f[kLayers + 1];
  Tables() {
    x[0] = kArea / curve(kR);
    x[1] = kR;
    for (int i = 1; i < kLayers - 1; i++) x[i + 1] = std::sqrt(-2.0 * std::log(kArea / x[i] + curve(x[i])));
    x[kLayers] = 0.0;
    for (int i = 0; i <= kLayers; i++) f[i] = curve(x[i]);
  }
};

const Tables& tables() {
  static const Tables t;   // built once, thread-safe
  return t;
}

class Normals {
 public:
  explicit Normals(uint32_t seed) : state_(0x9E3779B97F4A7C15ull ^ seed), t_(tables()) {}

  float operator()() {
    for (;;) {
      const uint64_t r = Next();
      const int i = static_cast<int>(r & 0xff);
      const bool negative = (r >> 8) & 1;
      const double x = static_cast<double>(r >> 11) * 0x1.0p-53 * t_.x[i];
      if (x < t_.x[i + 1]) return Signed(x, negative);
      if (i == 0) return Signed(Tail(), negative);
      if (t_.f[i] + Uniform() * (t_.f[i + 1] - t_.f[i]) < curve(x)) return Signed(x, negative);
    }
  }

 private:
  static float Signed(double x, bool negative) { return static_cast<float>(negative ? -x : x); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }   // [0, 1)
  double Tail() {   // beyond R: R + a, a ~ exponential(R), kept with probability exp(-a^2 / 2)
    for (;;) {
      const double a = -std::log(1.0 - Uniform()) / kR, b = -std::log(1.0 - Uniform());
      if (b + b >= a * a) return kR + a;
    }
  }
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  uint64_t state_;
  const Tables& t_;
};

}  // namespace

void fill_box(float* image, int c, int h, int w, bool chw, const Box& box, Noise noise, const float* value,
              uint32_t seed) {
  Normals normal(seed);
  float per_channel[kMaxChannels];
  for (int b = 0; b < c; b++)
    per_channel[b] = noise == Noise::kChannel ? normal() : (value ? value[b] : 0.f);
  const bool pixel = noise == Noise::kPixel;
  for (int b = 0; b < c; b++) {
    for (int y = box.top; y < box.top + box.height; y++) {
      if (chw) {
        float* row = image + (static_cast<int64_t>(b) * h + y) * w + box.left;
        for (int x = 0; x < box.width; x++) row[x] = pixel ? normal() : per_channel[b];
      } else {
        float* row = image + (static_cast<int64_t>(y) * w + box.left) * c + b;
        for (int x = 0; x < box.width; x++) row[static_cast<int64_t>(x) * c] = pixel ? normal() : per_channel[b];
      }
    }
  }
}

}  // namespace erasek
