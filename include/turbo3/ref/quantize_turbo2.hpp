// CPU reference of the turbo2 format (docs/format.md §9): quantize and dequantize rows, byte for
// byte. Plain C++. Precondition: n % 128 == 0 (asserted in debug builds). Compile without FMA
// contraction (see ref/quantize.hpp).
#pragma once

#include <cassert>
#include <cstdint>

#include "turbo3/format/block_turbo2.hpp"
#include "turbo3/format/codebook_turbo2.hpp"
#include "turbo3/format/fp16.hpp"
#include "turbo3/format/packing_turbo2.hpp"
#include "turbo3/ref/rotated_group.hpp"

namespace turbo3 {
namespace ref {

inline void quantize_group(const float* x, block_turbo2& out) {
  uint8_t idx[turbo2_block_values];
  out.norm = detail::quantize_rotated_group(x, turbo2_codebook(), idx);
  pack_indices(idx, out);
}

inline void quantize_row(const float* x, block_turbo2* y, int64_t n) {
  assert(n % turbo2_block_values == 0);
  for (int64_t b = 0; b < n / turbo2_block_values; ++b) quantize_group(x + b * turbo2_block_values, y[b]);
}

// Values in the rotated domain: level[i(j)] * norm. No inverse rotation.
inline void dequantize_row(const block_turbo2* x, float* y, int64_t n) {
  assert(n % turbo2_block_values == 0);
  const turbo2_codebook_table table = turbo2_codebook();
  for (int64_t b = 0; b < n / turbo2_block_values; ++b) {
    const float norm = fp16_to_float(x[b].norm);
    for (int j = 0; j < turbo2_block_values; ++j)
      y[b * turbo2_block_values + j] = table.level[unpack_index(x[b], j)] * norm;
  }
}

}  // namespace ref
}  // namespace turbo3
