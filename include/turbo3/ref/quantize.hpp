// CPU reference of the turbo3 format: quantize, dequantize and rotate rows, byte for byte as
// docs/format.md §3-4 specify. Plain C++ (no GPU compiler needed).
//
// Precondition of every function: n % 128 == 0 (asserted in debug builds).
// Bit-exactness needs float arithmetic without FMA contraction: compile with -ffp-contract=off
// where the host has FMA (the library's CMake does this for its tests and tools).
#pragma once

#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "turbo3/format/block.hpp"
#include "turbo3/format/codebook.hpp"
#include "turbo3/format/fp16.hpp"
#include "turbo3/format/packing.hpp"
#include "turbo3/format/rotation.hpp"
#include "turbo3/ref/rotated_group.hpp"

namespace turbo3 {
namespace ref {

// Quantize one 128-group (docs/format.md §3, float32 throughout). cb is a known table
// (is_known; asserted in debug builds).
inline void quantize_group(const float* x, block_turbo3& out, codebook cb = codebook::lloyd_max) {
  assert(is_known(cb));
  uint8_t idx[block_values];
  out.norm = detail::quantize_rotated_group(x, codebook_values(cb), idx);
  pack_indices(idx, out);
}

inline void quantize_row(const float* x, block_turbo3* y, int64_t n, codebook cb) {
  assert(n % block_values == 0);
  for (int64_t b = 0; b < n / block_values; ++b) quantize_group(x + b * block_values, y[b], cb);
}
inline void quantize_row(const float* x, block_turbo3* y, int64_t n) {
  quantize_row(x, y, n, codebook::lloyd_max);
}

// Values in the rotated domain: C[i(j)] * norm (§4). No inverse rotation.
inline void dequantize_row(const block_turbo3* x, float* y, int64_t n, codebook cb) {
  assert(n % block_values == 0 && is_known(cb));
  const codebook_table table = codebook_values(cb);
  for (int64_t b = 0; b < n / block_values; ++b) {
    const float norm = fp16_to_float(x[b].norm);
    for (int j = 0; j < block_values; ++j) y[b * block_values + j] = table.level[unpack_index(x[b], j)] * norm;
  }
}
inline void dequantize_row(const block_turbo3* x, float* y, int64_t n) {
  dequantize_row(x, y, n, codebook::lloyd_max);
}

// Apply R (resp. R^T) to each 128-group of x in place.
inline void rotate_forward(float* x, int64_t n) {
  assert(n % block_values == 0);
  for (int64_t b = 0; b < n / block_values; ++b) rotate_forward_group(x + b * block_values);
}
inline void rotate_inverse(float* x, int64_t n) {
  assert(n % block_values == 0);
  for (int64_t b = 0; b < n / block_values; ++b) rotate_inverse_group(x + b * block_values);
}

// sum (out - expected)^2 / sum expected^2 in double. NaN anywhere gives NaN (which fails any
// "<= limit" check); an all-zero expected gives 0 when out matches exactly, else infinity.
inline double nmse(const float* out, const float* expected, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(out[i]) - static_cast<double>(expected[i]);
    num += d * d;
    den += static_cast<double>(expected[i]) * expected[i];
  }
  if (std::isnan(num) || std::isnan(den)) return std::nan("");
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return num / den;
}

}  // namespace ref
}  // namespace turbo3
