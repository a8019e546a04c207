// The turbo2 block: one 128-value group of one K or V row, 34 bytes, one 2-bit index per value
// (docs/format.md §9).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "turbo3/format/block.hpp"

namespace turbo3 {

inline constexpr int turbo2_block_values = block_values;         // one rotation group, as turbo3
inline constexpr int turbo2_qs_bytes = turbo2_block_values / 4;  // four 2-bit indices per byte

struct block_turbo2 {
  uint16_t norm;                // IEEE fp16 bits of the corrected group norm
  uint8_t qs[turbo2_qs_bytes];  // qs[j/4] bits 2*(j%4)..+1 hold index(j)
};

inline constexpr size_t turbo2_block_bytes = 34;
static_assert(sizeof(block_turbo2) == turbo2_block_bytes, "block_turbo2 must be 34 bytes with no padding");
static_assert(alignof(block_turbo2) == 2, "block_turbo2 is 2-byte aligned (fp16 norm)");
static_assert(std::is_standard_layout<block_turbo2>::value, "block_turbo2 must be standard layout");
static_assert(std::is_trivially_copyable<block_turbo2>::value, "block_turbo2 must be trivially copyable");
static_assert(offsetof(block_turbo2, qs) == 2, "layout of §9");

}  // namespace turbo3
