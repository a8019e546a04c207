// CPU reference of the q8_0 format (docs/format.md §10, ggml's q8_0): quantize and dequantize rows,
// byte for byte. Plain C++. Precondition: n % 32 == 0 (asserted in debug builds).
#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>

#include "turbo3/format/block_q8_0.hpp"
#include "turbo3/format/fp16.hpp"

namespace turbo3 {
namespace ref {

// §10: amax = max |x[j]|, d = amax / 127, qs[j] = round-half-away(x[j] * (1/d)) (0 where d == 0),
// scale = fp16(d) saturated at 65504 (§7). x[j] * (1/d) lies within [-127, 127] for finite x
// and a finite 1/d; where it does not (1/d overflowed, or x is not finite) the value stores 0.
inline void quantize_block(const float* x, block_q8_0& out) {
  float amax = 0.0f;
  for (int j = 0; j < q8_0_block_values; ++j) {
    const float a = std::fabs(x[j]);
    amax = amax > a ? amax : a;  // ggml's MAX(amax, |x|), NaN handling included
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  out.scale = fp16_from_float_saturated(d);
  for (int j = 0; j < q8_0_block_values; ++j) {
    const float q = std::round(x[j] * id);
    out.qs[j] = (q >= -127.0f && q <= 127.0f) ? static_cast<int8_t>(q) : int8_t{0};
  }
}

inline void quantize_row(const float* x, block_q8_0* y, int64_t n) {
  assert(n % q8_0_block_values == 0);
  for (int64_t b = 0; b < n / q8_0_block_values; ++b) quantize_block(x + b * q8_0_block_values, y[b]);
}

// value(j) = qs[j] * d (exact in float32: a 7-bit integer times an 11-bit significand).
inline void dequantize_row(const block_q8_0* x, float* y, int64_t n) {
  assert(n % q8_0_block_values == 0);
  for (int64_t b = 0; b < n / q8_0_block_values; ++b) {
    const float d = fp16_to_float(x[b].scale);
    for (int j = 0; j < q8_0_block_values; ++j) y[b * q8_0_block_values + j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

}  // namespace ref
}  // namespace turbo3
