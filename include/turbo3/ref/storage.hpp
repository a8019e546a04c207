// Rows of any storage type to and from float, on the host: f32 copied, f16 rounded to nearest even,
// the block types quantized and dequantized by their reference (turbo values stay in the rotated
// domain). Plain C++; the bytes may sit at any address (blocks go through memcpy).
//
// Preconditions (asserted in debug builds): t is a data_type, n is a multiple of
// values_per_block(t). cb selects the turbo3 table; the other types have one table each.
#pragma once

#include <cassert>
#include <cstdint>
#include <cstring>

#include "turbo3/format/codebook.hpp"
#include "turbo3/format/fp16.hpp"
#include "turbo3/ref/quantize.hpp"
#include "turbo3/ref/quantize_q8_0.hpp"
#include "turbo3/ref/quantize_turbo2.hpp"
#include "turbo3/ref/quantize_turbo4.hpp"
#include "turbo3/types.hpp"

namespace turbo3 {
namespace ref {
namespace detail {

// One block at a time through an aligned local copy: rows may sit at any address.
template <class Block, class Quantize>
void store_blocks(const float* x, unsigned char* dst, int64_t n, int values, Quantize quantize) {
  for (int64_t b = 0; b < n / values; ++b) {
    Block block;
    quantize(x + b * values, &block, values);
    std::memcpy(dst + b * sizeof(Block), &block, sizeof(Block));
  }
}
template <class Block, class Dequantize>
void load_blocks(const unsigned char* src, float* y, int64_t n, int values, Dequantize dequantize) {
  for (int64_t b = 0; b < n / values; ++b) {
    Block block;
    std::memcpy(&block, src + b * sizeof(Block), sizeof(Block));
    dequantize(&block, y + b * values, values);
  }
}

}  // namespace detail

// Writes n values of x as one stored row of type t (row_bytes(t, n) bytes at dst).
inline void store_row(data_type t, const float* x, void* dst, int64_t n, codebook cb = codebook::lloyd_max) {
  assert(n % values_per_block(t) == 0);
  unsigned char* out = static_cast<unsigned char*>(dst);
  switch (t) {
    case data_type::f32:
      std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case data_type::f16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t bits = fp16_from_float(x[i]);
        std::memcpy(out + 2 * i, &bits, sizeof bits);
      }
      return;
    case data_type::turbo3:
      detail::store_blocks<block_turbo3>(x, out, n, block_values,
                                         [cb](const float* v, block_turbo3* b, int64_t m) { quantize_row(v, b, m, cb); });
      return;
    case data_type::turbo4:
      detail::store_blocks<block_turbo4>(x, out, n, turbo4_block_values,
                                         [](const float* v, block_turbo4* b, int64_t m) { quantize_row(v, b, m); });
      return;
    case data_type::turbo2:
      detail::store_blocks<block_turbo2>(x, out, n, turbo2_block_values,
                                         [](const float* v, block_turbo2* b, int64_t m) { quantize_row(v, b, m); });
      return;
    case data_type::q8_0:
      detail::store_blocks<block_q8_0>(x, out, n, q8_0_block_values,
                                       [](const float* v, block_q8_0* b, int64_t m) { quantize_row(v, b, m); });
      return;
  }
  assert(false && "store_row: not a data_type");
}

// Reads one stored row of n values of type t into y, as a reader of the type sees them.
inline void load_row(data_type t, const void* src, float* y, int64_t n, codebook cb = codebook::lloyd_max) {
  assert(n % values_per_block(t) == 0);
  const unsigned char* in = static_cast<const unsigned char*>(src);
  switch (t) {
    case data_type::f32:
      std::memcpy(y, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case data_type::f16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, in + 2 * i, sizeof bits);
        y[i] = fp16_to_float(bits);
      }
      return;
    case data_type::turbo3:
      detail::load_blocks<block_turbo3>(in, y, n, block_values,
                                        [cb](const block_turbo3* b, float* v, int64_t m) { dequantize_row(b, v, m, cb); });
      return;
    case data_type::turbo4:
      detail::load_blocks<block_turbo4>(in, y, n, turbo4_block_values,
                                        [](const block_turbo4* b, float* v, int64_t m) { dequantize_row(b, v, m); });
      return;
    case data_type::turbo2:
      detail::load_blocks<block_turbo2>(in, y, n, turbo2_block_values,
                                        [](const block_turbo2* b, float* v, int64_t m) { dequantize_row(b, v, m); });
      return;
    case data_type::q8_0:
      detail::load_blocks<block_q8_0>(in, y, n, q8_0_block_values,
                                      [](const block_q8_0* b, float* v, int64_t m) { dequantize_row(b, v, m); });
      return;
  }
  assert(false && "load_row: not a data_type");
}

}  // namespace ref
}  // namespace turbo3
