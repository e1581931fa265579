// torchvision's ColorJitter on float images (after ToTensor / ToDtype, any units), CPU: the
// adjustments of one image in the order drawn for it, in torch's float32 arithmetic (v1's
// tensor kernels, or v2's, whose blends and grey level are fused multiply-adds). Compiled at -O3
// with contraction off, as augment_kernels.h's kernels.
#pragma once

#include <cstdint>

namespace floatcolor {

// The adjustments: an image's `order` holds these, in the order it runs them (-1 skips a slot),
// and `factors` one value for each, in this order (Python reads the numbers from here)
enum Adjustment {
  kBrightness = 0,
  kContrast = 1,
  kSaturation = 2,
  kHue = 3,
  kGrey = 4,   // rgb_to_grayscale with as many channels as the image (Grayscale(3), RandomGrayscale)
  kNumAdjustments = 4,   // the width of a row of `order`, and of `factors` (kGrey takes none)
};

// A float32 image in place: `channels` (1 or 3) planes of `pixels` values, channel k's value
// of pixel i at data[k * channel_stride + i * pixel_stride] (CHW: H x W and 1; HWC: 1 and C)
struct FloatImage {
  float* data;
  int64_t pixels;
  int channels;
  int64_t channel_stride, pixel_stride;
};

// The adjustments of `order` (kNumAdjustments entries) with `factors` (kNumAdjustments), in place
void jitter(const FloatImage& image, const int32_t* order, const float* factors, bool v1);

}  // namespace floatcolor

namespace augk {
// torchvision's float32 hue shift of one RGB pixel, in place: _rgb2hsv, (h + factor) % 1,
// _hsv2rgb (v1's or v2's grouping); augment_hue.cc, beside the uint8 kernels that use it
void tensor_hue_shift(float rgb[3], float factor, bool v1);
// The same for eight pixels of three float planes (r[0..7], g[0..7], b[0..7]) where the CPU has
// AVX2, each lane the scalar arithmetic; false, having written nothing, where it does not (or a
// lane's hue is out of the fast path's range)
bool tensor_hue_planes8(float* r, float* g, float* b, float factor, bool v1);
}  // namespace augk
