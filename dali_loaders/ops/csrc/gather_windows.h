// The C function behind ops/gather.py (called through ctypes, so plain C linkage); it lives
// in the normalization plugin's library, whose build and load the Python side already tracks.
#pragma once

#include <cstdint>

// For an array source's feeder (ops/gather.py, through ctypes): n images of a C-contiguous
// (count, h, w, c) uint8 array, picked by `indices`, each cut to an out_h x out_w window whose
// top-left corner is at (tops[i], lefts[i]) in image coordinates (negative or past the edge:
// `fill`, one byte per channel), then flipped horizontally where flips[i] is nonzero; written
// to out, (n, out_h, out_w, c). tops, lefts and flips may be null (0). Returns 0, or 1 + i for
// the first sample i whose index is outside [0, count): nothing past the array is read.
extern "C" int dali_loaders_gather_windows(const uint8_t* images, int64_t count, int32_t h, int32_t w, int32_t c,
                                           const int64_t* indices, int32_t n, const int64_t* tops,
                                           const int64_t* lefts, int32_t out_h, int32_t out_w,
                                           const uint8_t* flips, const uint8_t* fill, uint8_t* out);
