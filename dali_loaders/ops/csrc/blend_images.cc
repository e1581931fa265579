// See blend_images.h. Compiled at -O3 with contraction off (a fused multiply-add would round
// once where numpy and torch round twice); the loop is left to the compiler's vectorizer: it
// reads two images and writes one, so memory, not arithmetic, sets its speed.
#include "blend_images.h"

extern "C" int dali_loaders_blend_images(const float* images, int64_t count, int64_t per_image,
                                         const int64_t* partner, float w_self, float w_partner, float* out) {
  for (int64_t i = 0; i < count; i++) {
    if (partner[i] < 0 || partner[i] >= count) return static_cast<int>(1 + i);
    const float* self = images + i * per_image;
    const float* other = images + partner[i] * per_image;
    float* to = out + i * per_image;
    for (int64_t k = 0; k < per_image; k++) to[k] = self[k] * w_self + other[k] * w_partner;
  }
  return 0;
}
