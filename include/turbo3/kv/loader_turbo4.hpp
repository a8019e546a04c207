// The turbo4 K/V loader (docs/format.md §8): 68-byte blocks of 128 4-bit indices and one fp16
// norm. Rows are 2-byte aligned only (68-byte blocks after any 2-byte aligned start): every access
// is a 16-bit load.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/format/block_turbo4.hpp"
#include "turbo3/format/codebook_turbo4.hpp"
#include "turbo3/kv/loaders.hpp"

namespace turbo3 {

// turbo4's table is symmetric, level(15 - i) = -level(i): the loader looks up one of eight
// magnitudes and a sign.
constexpr bool turbo4_levels_symmetric() {
  const turbo4_codebook_table cb = turbo4_codebook();
  for (int i = 0; i < 16; ++i)
    if (cb.level[15 - i] != -cb.level[i]) return false;
  return true;
}
static_assert(turbo4_levels_symmetric(), "the turbo4 loader folds the sign out of the index");

#if TURBO3_HAS_RUNTIME

namespace kv {

struct turbo4_loader {
  static constexpr data_type type = data_type::turbo4;
  static constexpr int values_per_scale = turbo4_block_values;  // one norm per 128 values
  static constexpr bool may_rotate = true;
  TURBO3_HD static constexpr int slot(int e) { return e; }
  TURBO3_HD static constexpr int value_of_slot(int s) { return s; }

  TURBO3_DEVICE TURBO3_FORCEINLINE static float scale(const char* row, int block) {
    return platform::half_bits_to_float(
        reinterpret_cast<const uint16_t*>(row + block * static_cast<int>(turbo4_block_bytes))[0]);
  }

  // Chunk c's 16 indices, 4 bits each: w[0] holds values 0..7 (value e at bits 4e..4e+3), w[1]
  // values 8..15.
  struct raw_chunk {
    uint32_t w[2];
  };

  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load_raw(const char* row, int c) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row + (c >> 3) * static_cast<int>(turbo4_block_bytes) +
                                                          offsetof(block_turbo4, qs) + 8 * (c & 7));
    return {{platform::join_halves(h[0], h[1]), platform::join_halves(h[2], h[3])}};
  }

  // The level of index i (0..15), exact float32 as the reference reads it: a select tree over the
  // eight magnitudes, then the sign (no table in memory, no byte permute).
  TURBO3_DEVICE TURBO3_FORCEINLINE static float level(uint32_t i) {
    constexpr float l8 = turbo4_codebook().level[8], l9 = turbo4_codebook().level[9];
    constexpr float l10 = turbo4_codebook().level[10], l11 = turbo4_codebook().level[11];
    constexpr float l12 = turbo4_codebook().level[12], l13 = turbo4_codebook().level[13];
    constexpr float l14 = turbo4_codebook().level[14], l15 = turbo4_codebook().level[15];
    const bool up = (i & 8u) != 0;
    const uint32_t m = (up ? i : ~i) & 7u;  // level(i) = level(8 + m) for i >= 8, -level(8 + m) below
    const bool b0 = (m & 1u) != 0;
    const float a01 = b0 ? l9 : l8, a23 = b0 ? l11 : l10, a45 = b0 ? l13 : l12, a67 = b0 ? l15 : l14;
    const bool b1 = (m & 2u) != 0;
    const float a03 = b1 ? a23 : a01, a47 = b1 ? a67 : a45;
    const float mag = (m & 4u) ? a47 : a03;
    return up ? mag : -mag;
  }

  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode(const raw_chunk& raw, const turbo3_lut&, float out[chunk_values]) {
    TURBO3_UNROLL
    for (int e = 0; e < 8; ++e) {
      out[e] = level((raw.w[0] >> (4 * e)) & 15u);
      out[8 + e] = level((raw.w[1] >> (4 * e)) & 15u);
    }
  }
};

}  // namespace kv

#endif  // TURBO3_HAS_RUNTIME

}  // namespace turbo3
