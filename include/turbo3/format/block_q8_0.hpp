// The q8_0 block: 32 consecutive values of one K or V row as int8 with one fp16 scale, 34 bytes
// (ggml's block_q8_0; docs/format.md §10). No rotation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace turbo3 {

inline constexpr int q8_0_block_values = 32;

struct block_q8_0 {
  uint16_t scale;              // IEEE fp16 bits of d: value(j) = qs[j] * d
  int8_t qs[q8_0_block_values];
};

inline constexpr size_t q8_0_block_bytes = 34;
static_assert(sizeof(block_q8_0) == q8_0_block_bytes, "block_q8_0 must be 34 bytes with no padding");
static_assert(alignof(block_q8_0) == 2, "block_q8_0 is 2-byte aligned (fp16 scale)");
static_assert(std::is_standard_layout<block_q8_0>::value, "block_q8_0 must be standard layout");
static_assert(std::is_trivially_copyable<block_q8_0>::value, "block_q8_0 must be trivially copyable");
static_assert(offsetof(block_q8_0, qs) == 2, "layout of §10");

}  // namespace turbo3
