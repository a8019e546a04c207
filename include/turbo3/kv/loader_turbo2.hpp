// The turbo2 K/V loader (docs/format.md §9): 34-byte blocks of 128 2-bit indices and one fp16 norm.
// Rows are 2-byte aligned only: every access is a 16-bit load.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/format/block_turbo2.hpp"
#include "turbo3/format/codebook_turbo2.hpp"
#include "turbo3/kv/loaders.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace kv {

struct turbo2_loader {
  static constexpr data_type type = data_type::turbo2;
  static constexpr int values_per_scale = turbo2_block_values;  // one norm per 128 values
  static constexpr bool may_rotate = true;
  TURBO3_HD static constexpr int slot(int e) { return e; }
  TURBO3_HD static constexpr int value_of_slot(int s) { return s; }

  TURBO3_DEVICE TURBO3_FORCEINLINE static float scale(const char* row, int block) {
    return platform::half_bits_to_float(
        reinterpret_cast<const uint16_t*>(row + block * static_cast<int>(turbo2_block_bytes))[0]);
  }

  // Chunk c's 16 indices, value e at bits 2e..2e+1.
  struct raw_chunk {
    uint32_t qs;
  };

  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load_raw(const char* row, int c) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row + (c >> 3) * static_cast<int>(turbo2_block_bytes) +
                                                          offsetof(block_turbo2, qs) + 4 * (c & 7));
    return {platform::join_halves(h[0], h[1])};
  }

  // The level of index i (0..3), exact float32: two selects.
  TURBO3_DEVICE TURBO3_FORCEINLINE static float level(uint32_t i) {
    constexpr float l0 = turbo2_codebook().level[0], l1 = turbo2_codebook().level[1];
    constexpr float l2 = turbo2_codebook().level[2], l3 = turbo2_codebook().level[3];
    const bool b0 = (i & 1u) != 0;
    return (i & 2u) ? (b0 ? l3 : l2) : (b0 ? l1 : l0);
  }

  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode(const raw_chunk& raw, const turbo3_lut&, float out[chunk_values]) {
    TURBO3_UNROLL
    for (int e = 0; e < chunk_values; ++e) out[e] = level((raw.qs >> (2 * e)) & 3u);
  }
};

}  // namespace kv
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
