// RandomErasing's box (torchvision's, timm's), drawn from the graph's uniforms: shared by
// DaliLoadersErase and DaliLoadersEraseBox (erase_op.cc) and DaliLoadersNormalize's erasing
// (normalize_op.cc), which erases as it normalizes instead of copying the image once more.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dali/pipeline/operator/operator.h"
#include "erase_fill.h"

namespace dali_loaders {

// The drawn box of an H x W image, or an empty one
inline erasek::Box DrawBox(const float *u, int attempts, int h_img, int w_img, float p, const float *scale,
                 const float *log_ratio) {
  erasek::Box box;
  if (!(u[2 * attempts] < p)) return box;
  const double area = static_cast<double>(h_img) * w_img;
  for (int k = 0; k < attempts; k++) {
    const double target = area * (scale[0] + u[2 * k] * (scale[1] - scale[0]));
    const double aspect = std::exp(log_ratio[0] + u[2 * k + 1] * (log_ratio[1] - log_ratio[0]));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target * aspect)));   // Python's round
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target / aspect)));
    if (h < h_img && w < w_img) {
      box.height = h;
      box.width = w;
      box.top = std::min(h_img - h, static_cast<int>(u[2 * attempts + 1] * (h_img - h + 1)));
      box.left = std::min(w_img - w, static_cast<int>(u[2 * attempts + 2] * (w_img - w + 1)));
      return box;
    }
  }
  return box;
}

// The box's arguments, as both operators take them
struct BoxSpec {
  std::vector<float> scale, log_ratio;
  float p;
  int attempts;

  // The arguments `prefix` + scale, log_ratio, probability and attempts of `op`
  BoxSpec(const dali::OpSpec &spec, const std::string &op, const std::string &prefix = "")
      : scale(spec.GetRepeatedArgument<float>(prefix + "scale")),
        log_ratio(spec.GetRepeatedArgument<float>(prefix + "log_ratio")),
        p(spec.GetArgument<float>(prefix + "probability")),
        attempts(spec.GetArgument<int>(prefix + "attempts")) {
    DALI_ENFORCE(scale.size() == 2 && log_ratio.size() == 2, op + ": scale and log_ratio are pairs");
    DALI_ENFORCE(attempts >= 1, op + ": attempts must be >= 1");
  }

  int draws() const { return 2 * attempts + 3; }
  // Where a sample's draws hold the wrong count, a message naming `op` (empty where right)
  std::string DrawsProblem(const std::string &op, int64_t count) const {
    return count == draws() ? std::string()
                            : dali::make_string(op, ": draws must have 2 * attempts + 3 values, got ", count);
  }
  erasek::Box Draw(const float *u, int h_img, int w_img) const {
    return DrawBox(u, attempts, h_img, w_img, p, scale.data(), log_ratio.data());
  }
};

// The fill's kind from the operators' `noise` argument
inline erasek::Noise ParseNoise(const std::string &noise, const std::string &op) {
  DALI_ENFORCE(noise == "none" || noise == "pixel" || noise == "channel",
               op + ": noise must be \"none\", \"pixel\" or \"channel\", got \"" + noise + "\"");
  return noise == "pixel" ? erasek::Noise::kPixel : noise == "channel" ? erasek::Noise::kChannel : erasek::Noise::kNone;
}

}  // namespace dali_loaders
