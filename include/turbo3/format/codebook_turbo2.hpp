// The 2-bit codebook of turbo2 (docs/format.md §9): the one source of its levels and thresholds.
#pragma once

#include "turbo3/platform/device.hpp"

namespace turbo3 {

// Four sorted levels and three thresholds (the midpoints between neighbouring levels).
struct turbo2_codebook_table {
  float level[4];
  float threshold[3];
};

TURBO3_HD constexpr turbo2_codebook_table turbo2_codebook() {
  return turbo2_codebook_table{{-0.133462f, -0.039994f, 0.039994f, 0.133462f}, {-0.086728f, 0.0f, 0.086728f}};
}

// Index of y: the number of thresholds t with y >= t (a value on a threshold goes up; 0 -> 2).
TURBO3_HD inline int quantize_index(const turbo2_codebook_table& cb, float y) {
  int i = 0;
TURBO3_UNROLL
  for (int t = 0; t < 3; ++t) i += (y >= cb.threshold[t]) ? 1 : 0;
  return i;
}

}  // namespace turbo3
