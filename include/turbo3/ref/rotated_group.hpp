// The quantization steps every turbo type shares (docs/format.md §3 steps 1-4 and 6): the group's
// norm, the forward rotation of the normalized group, each value's level index and the corrected
// norm. turbo3, turbo4 and turbo2 differ only in their table and in how they pack the indices.
// Plain C++; float32 throughout, every sum sequential in index order (compile without FMA
// contraction, as ref/quantize.hpp says).
#pragma once

#include <cmath>
#include <cstdint>

#include "turbo3/format/block.hpp"
#include "turbo3/format/fp16.hpp"
#include "turbo3/format/rotation.hpp"

namespace turbo3 {
namespace ref {
namespace detail {

// Quantizes one 128-group x with `table` (levels and thresholds, with a quantize_index overload):
// writes the 128 indices to idx and returns the fp16 bits of the corrected norm, saturated at
// 65504 (docs/format.md §7).
template <class Table>
inline uint16_t quantize_rotated_group(const float* x, const Table& table, uint8_t* idx) {
  float ss = 0.0f;
  for (int i = 0; i < block_values; ++i) ss += x[i] * x[i];
  const float n = std::sqrt(ss);
  const float inv = (n > 1e-10f) ? 1.0f / n : 0.0f;
  float u[block_values];
  for (int i = 0; i < block_values; ++i) u[i] = x[i] * inv;
  rotate_forward_group(u);
  for (int i = 0; i < block_values; ++i) idx[i] = static_cast<uint8_t>(quantize_index(table, u[i]));
  float rr = 0.0f;
  for (int i = 0; i < block_values; ++i) rr += table.level[idx[i]] * table.level[idx[i]];
  const float r = std::sqrt(rr);
  // A corrected norm past the largest finite fp16 value is stored as 65504, not as an infinity
  // (which would make every score and value of the group, and so attention, NaN).
  return fp16_from_float_saturated((r > 1e-10f) ? n / r : n);
}

}  // namespace detail
}  // namespace ref
}  // namespace turbo3
