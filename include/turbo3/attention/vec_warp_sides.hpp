// The K and V "sides" of the warp decode kernel (vec_warp.hpp): per storage type, how a staged row
// of 128-value groups is read and decoded into the kernel's fragments. Every side decodes a chunk
// (16 values of one group) into fp16 pairs of adjacent slots (decode_half2) in its own slot order
// (value_of_slot), which the Q fragments (K side) and the output rows (V side) follow; the group's
// fp16 norm is scale_bits. load<UNIT> reads a chunk's packed bits from a row staged in UNIT-byte
// copies: rows staged in 16-byte units start 4-byte aligned (vec_warp_config), every other row
// only 2-byte aligned. Sides with i8_scores also decode to signed bytes (decode_i8) for the
// integer score form (vec_warp_config::integer_scores).
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/format/block.hpp"
#include "turbo3/kv/loaders.hpp"
#include "turbo3/platform/bits.hpp"
#include "turbo3/types.hpp"

namespace turbo3 {
namespace detail {

#if TURBO3_HAS_RUNTIME

// ---- turbo3: kv::turbo3_loader as it is -----------------------------------------------------------
// 50-byte blocks: norm, 32 bytes of low index bits (qs), 16 of high bits (signs). A chunk's qs word
// sits at 50 b + 2 + 4 q: 4-byte aligned in the odd blocks of a 4-byte aligned row.
struct turbo3_warp_side {
  using loader = kv::turbo3_loader;
  static constexpr data_type type = data_type::turbo3;
  static constexpr int group_bytes = static_cast<int>(block_bytes);
  static constexpr bool i8_scores = true;
  using raw_chunk = loader::raw_chunk;
  TURBO3_HD static constexpr int value_of_slot(int s) { return loader::value_of_slot(s); }
  template <int UNIT>
  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load(const char* row, int b, int q) {
    if (UNIT == 16 && (b & 1)) return loader::template load_raw<true>(row, b, q);
    return loader::load_raw(row, b, q);
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static uint16_t scale_bits(const char* row, int b) { return loader::scale_bits(row, b); }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float scale(const char* row, int b) { return loader::scale(row, b); }
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_half2(const raw_chunk& raw, const turbo3_lut& lut, uint32_t out[8]) {
    loader::decode_half2(raw, lut, out);
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_i8(const raw_chunk& raw, const turbo3_lut& lut, uint32_t hi[4],
                                                        uint32_t lo[4]) {
    loader::decode_i8(raw, lut, hi, lo);
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float i8_unit(const turbo3_lut& lut) { return lut.i8_unit; }
};

#endif  // TURBO3_HAS_RUNTIME

// Whether the warp decode kernel has a side for storage type t, and whether K of type t takes the
// integer score form (vec_warp_warps).
TURBO3_HD constexpr bool vec_warp_side_type(data_type t) { return t == data_type::turbo3; }
TURBO3_HD constexpr bool vec_warp_i8_type(data_type t) { return t == data_type::turbo3; }

}  // namespace detail
}  // namespace turbo3
