// Element types of the tensors the library reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/format/block.hpp"

namespace turbo3 {

enum class data_type { f32, f16, turbo3 };

inline const char* to_string(data_type t) {
  return t == data_type::f32 ? "f32" : t == data_type::f16 ? "f16" : "turbo3";
}

// Bytes of one stored row of n values (n a multiple of 128 for turbo3).
constexpr size_t row_bytes(data_type t, int64_t n) {
  return t == data_type::f32   ? static_cast<size_t>(n) * 4
         : t == data_type::f16 ? static_cast<size_t>(n) * 2
                               : static_cast<size_t>(n / block_values) * block_bytes;
}

// Bytes of one element (turbo3: not addressable per element, 0).
constexpr size_t element_bytes(data_type t) {
  return t == data_type::f32 ? 4 : t == data_type::f16 ? 2 : 0;
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
