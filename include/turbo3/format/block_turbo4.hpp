// The turbo4 block: one 128-value group of one K or V row, 68 bytes, one 4-bit index per value
// (docs/format.md §8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "turbo3/format/block.hpp"

namespace turbo3 {

inline constexpr int turbo4_block_values = block_values;         // one rotation group, as turbo3
inline constexpr int turbo4_qs_bytes = turbo4_block_values / 2;  // two 4-bit indices per byte

struct block_turbo4 {
  uint16_t norm;                // IEEE fp16 bits of the corrected group norm
  uint16_t reserved;            // written as 0; readers ignore it
  uint8_t qs[turbo4_qs_bytes];  // qs[j/2] bits 4*(j%2)..+3 hold index(j)
};

inline constexpr size_t turbo4_block_bytes = 68;
static_assert(sizeof(block_turbo4) == turbo4_block_bytes, "block_turbo4 must be 68 bytes with no padding");
static_assert(alignof(block_turbo4) == 2, "block_turbo4 is 2-byte aligned (fp16 norm)");
static_assert(std::is_standard_layout<block_turbo4>::value, "block_turbo4 must be standard layout");
static_assert(std::is_trivially_copyable<block_turbo4>::value, "block_turbo4 must be trivially copyable");
static_assert(offsetof(block_turbo4, reserved) == 2 && offsetof(block_turbo4, qs) == 4, "layout of §8");

}  // namespace turbo3
