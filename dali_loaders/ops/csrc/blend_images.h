// The C function behind ops/blend.py (called through ctypes, so plain C linkage); it lives in
// the normalization plugin's library, whose build and load the Python side already tracks.
#pragma once

#include <cstdint>

// MixUp's blend in one pass: image i of `out` = images[i] * w_self + images[partner[i]] *
// w_partner, float32, each product rounded and then their sum (numpy's and torch's two
// multiplies and an add: the same bits). `count` images of `per_image` floats each, laid out
// one after another (any dense layout, the same for `out`). Returns 0, or 1 + i for the first
// image i whose partner is outside [0, count): nothing is written from it on.
extern "C" int dali_loaders_blend_images(const float* images, int64_t count, int64_t per_image,
                                         const int64_t* partner, float w_self, float w_partner, float* out);
