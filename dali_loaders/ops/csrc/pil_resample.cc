// The resampler's one compiled entry point (see pil_resample_api.h).
#include "pil_resample.h"

namespace pilrs {

void resample_image(const uint8_t* in, int in_h, int in_w, int in_stride, int channels, uint8_t* out,
                    const Axis& y, const Axis& x, Filter f, int pillow_major, Scratch& scratch, bool allow_simd) {
  resample(in, in_h, in_w, in_stride, channels, out, y, x, f, pillow_major, scratch, allow_simd);
}

}  // namespace pilrs
