// The 4-bit codebook of turbo4 (docs/format.md §8): the one source of its levels and thresholds.
#pragma once

#include "turbo3/platform/device.hpp"

namespace turbo3 {

// Sixteen sorted levels and fifteen thresholds (the midpoints between neighbouring levels, as the
// TurboQuant fork's C quantizer rounds them).
struct turbo4_codebook_table {
  float level[16];
  float threshold[15];
};

TURBO3_HD constexpr turbo4_codebook_table turbo4_codebook() {
  return turbo4_codebook_table{
      {-0.173926f, -0.117195f, -0.089527f, -0.068756f, -0.051262f, -0.035597f, -0.020989f, -0.006938f,
       0.006938f, 0.020989f, 0.035597f, 0.051262f, 0.068756f, 0.089527f, 0.117195f, 0.173926f},
      {-0.145560f, -0.103361f, -0.079142f, -0.060009f, -0.043430f, -0.028293f, -0.013963f, 0.0f,
       0.013963f, 0.028293f, 0.043430f, 0.060009f, 0.079142f, 0.103361f, 0.145560f}};
}

// Index of y: the number of thresholds t with y >= t (a value on a threshold goes up; 0 -> 8).
TURBO3_HD inline int quantize_index(const turbo4_codebook_table& cb, float y) {
  int i = 0;
TURBO3_UNROLL
  for (int t = 0; t < 15; ++t) i += (y >= cb.threshold[t]) ? 1 : 0;
  return i;
}

}  // namespace turbo3
