// The q8_0 K/V loader (docs/format.md §10): 34-byte blocks of 32 int8 values and one fp16 scale,
// not rotated. Rows are 2-byte aligned only: every access is a 16-bit load. A 16-value chunk is half
// a block, so each chunk has one scale (values_per_scale = 32).
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/format/block_q8_0.hpp"
#include "turbo3/kv/loaders.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace kv {

struct q8_0_loader {
  static constexpr data_type type = data_type::q8_0;
  static constexpr int values_per_scale = q8_0_block_values;  // one scale per 32 values
  static constexpr bool may_rotate = false;
  TURBO3_HD static constexpr int slot(int e) { return e; }
  TURBO3_HD static constexpr int value_of_slot(int s) { return s; }
  static constexpr int chunks_per_block = q8_0_block_values / chunk_values;

  TURBO3_DEVICE TURBO3_FORCEINLINE static float scale(const char* row, int block) {
    return platform::half_bits_to_float(
        reinterpret_cast<const uint16_t*>(row + block * static_cast<int>(q8_0_block_bytes))[0]);
  }

  // Chunk c's 16 int8 values, value e in byte e % 4 of w[e / 4].
  struct raw_chunk {
    uint32_t w[4];
  };

  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load_raw(const char* row, int c) {
    const uint16_t* h =
        reinterpret_cast<const uint16_t*>(row + (c / chunks_per_block) * static_cast<int>(q8_0_block_bytes) +
                                          offsetof(block_q8_0, qs) + chunk_values * (c % chunks_per_block));
    raw_chunk r;
    TURBO3_UNROLL
    for (int i = 0; i < 4; ++i) r.w[i] = platform::join_halves(h[2 * i], h[2 * i + 1]);
    return r;
  }

  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode(const raw_chunk& raw, const turbo3_lut&, float out[chunk_values]) {
    TURBO3_UNROLL
    for (int e = 0; e < chunk_values; ++e)
      out[e] = static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(raw.w[e / 4] >> (8 * (e % 4)))));
  }
};

}  // namespace kv
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
