// See erase_fill.h; the normals are normals.h's.
#include "erase_fill.h"

#include <algorithm>

#include "normals.h"

namespace erasek {

void fill_box(float* image, int c, int h, int w, bool chw, const Box& box, Noise noise, const float* value,
              uint32_t seed, bool simd) {
  if (noise == Noise::kPixel) {   // each box row is one run of values in either layout
    noisek::NormalStream normals(seed, simd);
    for (int b = 0; b < (chw ? c : 1); b++) {
      for (int y = box.top; y < box.top + box.height; y++) {
        if (chw) normals.fill(image + (static_cast<int64_t>(b) * h + y) * w + box.left, box.width);
        else normals.fill(image + (static_cast<int64_t>(y) * w + box.left) * c, box.width * c);
      }
    }
    return;
  }
  noisek::Normals normal(seed);
  float per_channel[kMaxChannels];
  for (int b = 0; b < c; b++) per_channel[b] = noise == Noise::kChannel ? normal() : (value ? value[b] : 0.f);
  for (int b = 0; b < c; b++) {
    for (int y = box.top; y < box.top + box.height; y++) {
      if (chw) {
        std::fill_n(image + (static_cast<int64_t>(b) * h + y) * w + box.left, box.width, per_channel[b]);
      } else {
        float* row = image + (static_cast<int64_t>(y) * w + box.left) * c + b;
        for (int x = 0; x < box.width; x++) row[static_cast<int64_t>(x) * c] = per_channel[b];
      }
    }
  }
}

}  // namespace erasek
