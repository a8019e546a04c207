// The fixed 128-point rotation R = D(s2) (1/sqrt(128)) H D(s1) of docs/format.md §3, shared by
// host and device. The sign tables are functions so device code can use them without globals.
#pragma once

#include <cstdint>

#include "turbo3/format/block.hpp"
#include "turbo3/platform/device.hpp"

namespace turbo3 {

inline constexpr double rotation_scale_f64 = 0.08838834764831845;  // 1/sqrt(128)
inline constexpr float rotation_scale = static_cast<float>(rotation_scale_f64);
static_assert(rotation_scale == 0.08838834764831845f, "the float scale is 1/sqrt(128) rounded once");

// Bit e of word e/32 set means sign -1 (docs/format.md §3).
TURBO3_HD constexpr uint32_t rotation_s1_word(int w) {
  return w == 0 ? 0xE46A0359u : w == 1 ? 0x42F85949u : w == 2 ? 0xA4C63BBBu : 0x49F250A9u;
}
TURBO3_HD constexpr uint32_t rotation_s2_word(int w) {
  return w == 0 ? 0x16ACEE90u : w == 1 ? 0x3F628FDCu : w == 2 ? 0xB7A5357Au : 0xBEA56562u;
}
TURBO3_HD constexpr bool rotation_s1_negative(int i) { return (rotation_s1_word(i >> 5) >> (i & 31)) & 1u; }
TURBO3_HD constexpr bool rotation_s2_negative(int i) { return (rotation_s2_word(i >> 5) >> (i & 31)) & 1u; }
TURBO3_HD constexpr float rotation_s1(int i) { return rotation_s1_negative(i) ? -1.0f : 1.0f; }
TURBO3_HD constexpr float rotation_s2(int i) { return rotation_s2_negative(i) ? -1.0f : 1.0f; }

// Unnormalized Walsh-Hadamard butterfly in natural (Sylvester) order over 128 values in place.
// T is float for the format's own arithmetic, double for the reference attention.
template <class T>
TURBO3_HD inline void hadamard128(T* u) {
  for (int h = 1; h < block_values; h <<= 1) {
    for (int j = 0; j < block_values; ++j) {
      if ((j % (2 * h)) < h) {
        const T a = u[j], b = u[j + h];
        u[j] = a + b;
        u[j + h] = a - b;
      }
    }
  }
}

// y = R u for one 128-group, in place, in the exact order of §3 step 3.
template <class T>
TURBO3_HD inline void rotate_forward_group(T* u) {
  for (int i = 0; i < block_values; ++i) u[i] *= rotation_s1(i);
  hadamard128(u);
  for (int i = 0; i < block_values; ++i) u[i] = (u[i] * static_cast<T>(rotation_scale_f64)) * rotation_s2(i);
}

// x = R^T y = D(s1) (1/sqrt(128)) H D(s2) y for one 128-group, in place.
template <class T>
TURBO3_HD inline void rotate_inverse_group(T* y) {
  for (int i = 0; i < block_values; ++i) y[i] *= rotation_s2(i);
  hadamard128(y);
  for (int i = 0; i < block_values; ++i) y[i] = (y[i] * static_cast<T>(rotation_scale_f64)) * rotation_s1(i);
}

}  // namespace turbo3
