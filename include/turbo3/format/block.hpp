// The turbo3 block: one 128-element group of one K or V row, 50 bytes (docs/format.md §1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace turbo3 {

inline constexpr int block_values = 128;          // values per block (one rotation group)
inline constexpr int block_qs_bytes = block_values / 4;     // low two index bits, 4 per byte
inline constexpr int block_sign_bytes = block_values / 8;   // high index bit, 8 per byte

struct block_turbo3 {
  uint16_t norm;                   // IEEE fp16 bits of the corrected group norm
  uint8_t qs[block_qs_bytes];      // qs[j/4] bits 2*(j%4)..+1 hold index(j) & 3
  uint8_t signs[block_sign_bytes]; // signs[j/8] bit j%8 holds index(j) >> 2
};

inline constexpr size_t block_bytes = 50;
static_assert(sizeof(block_turbo3) == block_bytes, "block_turbo3 must be 50 bytes with no padding");
static_assert(alignof(block_turbo3) == 2, "block_turbo3 is 2-byte aligned (fp16 norm)");
static_assert(std::is_standard_layout<block_turbo3>::value, "block_turbo3 must be standard layout");
static_assert(std::is_trivially_copyable<block_turbo3>::value, "block_turbo3 must be trivially copyable");
static_assert(offsetof(block_turbo3, qs) == 2 && offsetof(block_turbo3, signs) == 34, "layout of §1");

}  // namespace turbo3
