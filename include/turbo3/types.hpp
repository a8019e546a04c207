// Element types of the tensors the library reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/format/block.hpp"
#include "turbo3/format/block_q8_0.hpp"
#include "turbo3/format/block_turbo2.hpp"
#include "turbo3/format/block_turbo4.hpp"

namespace turbo3 {

// f32 and f16 are plain values; the others are the block types of docs/format.md: turbo3 (3-bit),
// turbo4 (4-bit) and turbo2 (2-bit) hold rotated 128-value groups, q8_0 holds 32 int8 values with
// one scale. ref::attention and the scalar VEC and materialize kernels read every K/V type; TILE
// and MMA read f16 and turbo3.
enum class data_type { f32, f16, turbo3, turbo4, turbo2, q8_0 };

inline const char* to_string(data_type t) {
  switch (t) {
    case data_type::f32: return "f32";
    case data_type::f16: return "f16";
    case data_type::turbo3: return "turbo3";
    case data_type::turbo4: return "turbo4";
    case data_type::turbo2: return "turbo2";
    case data_type::q8_0: return "q8_0";
  }
  return "unknown";
}

// Values of one stored block: 1 for f32 and f16 (every value addressable), 128 for the turbo types
// (one rotation group), 32 for q8_0. A row of type t holds a multiple of it.
constexpr int values_per_block(data_type t) {
  return t == data_type::turbo3 || t == data_type::turbo4 || t == data_type::turbo2 ? block_values
         : t == data_type::q8_0                                                        ? q8_0_block_values
                                                                                       : 1;
}

// Bytes of one stored block (values_per_block values); 0 for a value that names no type.
constexpr size_t bytes_per_block(data_type t) {
  switch (t) {
    case data_type::f32: return 4;
    case data_type::f16: return 2;
    case data_type::turbo3: return block_bytes;
    case data_type::turbo4: return turbo4_block_bytes;
    case data_type::turbo2: return turbo2_block_bytes;
    case data_type::q8_0: return q8_0_block_bytes;
  }
  return 0;
}

// Bytes of one stored row of n values (n a multiple of values_per_block(t)).
constexpr size_t row_bytes(data_type t, int64_t n) {
  return static_cast<size_t>(n / values_per_block(t)) * bytes_per_block(t);
}

// Bytes of one element (block types: not addressable per element, 0).
constexpr size_t element_bytes(data_type t) {
  return t == data_type::f32 ? 4 : t == data_type::f16 ? 2 : 0;
}

// Whether a type stores its values in the rotated domain of docs/format.md §3 (the turbo types):
// attention over it rotates Q (K of the type) or un-rotates the output (V of the type).
constexpr bool stores_rotated_values(data_type t) {
  return t == data_type::turbo3 || t == data_type::turbo4 || t == data_type::turbo2;
}

namespace detail {

inline bool is_aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// The first `alignment`-byte boundary at or after p. The library asks allocators for alignment - 1
// bytes more than a workspace needs and starts it here, so an allocator need not align at all.
inline void* align_up(void* p, size_t alignment) {
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<void*>((u + alignment - 1) / alignment * alignment);
}

}  // namespace detail

}  // namespace turbo3
