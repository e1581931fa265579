// The resampler's compiled entry points (see pil_resample_api.h).
#include "pil_resample.h"
#include "tensor_resample.h"

namespace pilrs {

bool resample_image(const uint8_t* in, int in_h, int in_w, int in_stride, int channels, uint8_t* out,
                    const Axis& y, const Axis& x, Filter f, int pillow_major, Scratch& scratch, bool allow_simd,
                    const Region* held) {
  return resample(in, in_h, in_w, in_stride, channels, out, y, x, f, pillow_major, scratch, allow_simd, held);
}

void resample_tensor_image(const uint8_t* in, int in_stride, int channels, float* out, const Axis& y,
                           const Axis& x, Filter f, Scratch& scratch) {
  resample_tensor(in, in_stride, channels, out, y, x, f, scratch.float_mid);
}

void resample_tensor_image(const float* in, int in_stride, int channels, float* out, const Axis& y,
                           const Axis& x, Filter f, Scratch& scratch) {
  resample_tensor(in, in_stride, channels, out, y, x, f, scratch.float_mid);
}

void read_span(int in_size, const Axis& a, Filter f, int* first, int* last) {
  if (f == Filter::kNearest) {
    const std::vector<int> index = nearest_indices(in_size, a.start, a.end, a.resized, a.offset, a.count);
    *first = *std::min_element(index.begin(), index.end());
    *last = *std::max_element(index.begin(), index.end()) + 1;
    return;
  }
  // An output's taps depend on its index alone and move forward with it: the first output's
  // first tap and the last output's last one bound the span.
  const Taps head = make_taps(in_size, a.start, a.end, a.resized, a.offset, 1, f);
  const Taps tail = make_taps(in_size, a.start, a.end, a.resized, a.offset + a.count - 1, 1, f);
  *first = head.first[0];
  *last = std::max(tail.first[0] + tail.count[0], *first + 1);
}

}  // namespace pilrs
