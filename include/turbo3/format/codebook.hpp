// The 3-bit codebooks (docs/format.md §2): the one source of the levels and thresholds.
#pragma once

#include "turbo3/platform/device.hpp"

namespace turbo3 {

enum class codebook {
  lloyd_max,  // Lloyd-Max levels of N(0,1) / sqrt(128) (the default)
  legacy,     // the levels of the TurboQuant llama.cpp fork's turbo3 (docs/format.md, section 2)
};

// Whether cb names one of the tables above (an enum may hold any value of its underlying type).
TURBO3_HD constexpr bool is_known(codebook cb) { return cb == codebook::lloyd_max || cb == codebook::legacy; }

// Eight sorted levels and seven thresholds, passed by value to every kernel that (de)quantizes.
struct codebook_table {
  float level[8];
  float threshold[7];
};

TURBO3_HD constexpr codebook_table codebook_values(codebook cb) {
  return cb == codebook::legacy
             ? codebook_table{{-0.190685f, -0.117832f, -0.065717f, -0.021460f, 0.021460f, 0.065717f,
                               0.117832f, 0.190685f},
                              {-0.154259f, -0.091775f, -0.043589f, 0.0f, 0.043589f, 0.091775f,
                               0.154259f}}
             : codebook_table{{-0.190207f, -0.118786f, -0.066822f, -0.021663f, 0.021663f, 0.066822f,
                               0.118786f, 0.190207f},
                              {-0.154496f, -0.092804f, -0.044243f, 0.0f, 0.044243f, 0.092804f,
                               0.154496f}};
}

// Index of y: the number of thresholds t with y >= t (a value on a threshold goes up; 0 -> 4).
TURBO3_HD inline int quantize_index(const codebook_table& cb, float y) {
  int i = 0;
TURBO3_UNROLL
  for (int t = 0; t < 7; ++t) i += (y >= cb.threshold[t]) ? 1 : 0;
  return i;
}

inline const char* to_string(codebook cb) { return cb == codebook::legacy ? "legacy" : "lloyd_max"; }

}  // namespace turbo3
