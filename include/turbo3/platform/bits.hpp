// Byte-permute table lookups and packed fp16 conversion: the vendor primitives behind the turbo3
// unpack (several values per instruction, tables held in registers).
#pragma once

#include <cstdint>

#include "turbo3/platform/device.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace platform {

// Four table lookups at once: byte k of the result is byte n_k of the 8-byte table {t_lo, t_hi}
// (bytes 0-3 in t_lo), where n_k is nibble k of `nibbles` (each 0..7; bits above 15 ignored).
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t lookup_bytes4(uint32_t t_lo, uint32_t t_hi, uint32_t nibbles) {
#if defined(TURBO3_PLATFORM_CUDA)
  // prmt directly: __byte_perm masks each nibble to 3 bits first (one more instruction), which
  // nibbles that are already 0..7 do not need.
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(t_lo), "r"(t_hi), "r"(nibbles));
  return r;
#else
  // v_perm_b32 takes one selector byte per output byte: widen the nibbles to bytes first.
  uint32_t sel = nibbles & 0xffffu;
  sel = (sel | (sel << 8)) & 0x00ff00ffu;
  sel = (sel | (sel << 4)) & 0x0f0f0f0fu;
  return __builtin_amdgcn_perm(t_hi, t_lo, sel);
#endif
}

// x >> 16, and lo | hi << 16 for 16-bit lo and hi, written as multiplies: NVIDIA issues them to
// the FMA pipe, which the turbo3 unpack leaves mostly idle, and not to the integer pipe that its
// byte permutes keep busy.
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t upper_half(uint32_t x) {
#if defined(TURBO3_PLATFORM_CUDA)
  uint32_t r;
  asm("mul.hi.u32 %0, %1, 65536;" : "=r"(r) : "r"(x));
  return r;
#else
  return x >> 16;
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t join_halves(uint32_t lo, uint32_t hi) {
#if defined(TURBO3_PLATFORM_CUDA)
  uint32_t r;
  asm("mad.lo.u32 %0, %1, 65536, %2;" : "=r"(r) : "r"(hi), "r"(lo));
  return r;
#else
  return lo | (hi << 16);
#endif
}

// Bit 2 of nibble n of the result is bit 2n of `bits` (n = 0..7); every other result bit is zero.
// NVIDIA: one table lookup in `table` (turbo3_lut::sign_spread; each selector nibble holds bits 4k
// and 4k+2 of `bits`, so it is 0, 1, 4 or 5, and its byte of the table puts them at bits 2 and 6).
// AMD, where a lookup first widens its selector, by shifts and masks.
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t even_bits_to_nibble_bit2(uint32_t bits, const uint32_t (&table)[2]) {
#if defined(TURBO3_PLATFORM_CUDA)
  return lookup_bytes4(table[0], table[1], bits & 0x5555u);
#else
  (void)table;
  uint32_t s = bits & 0x5555u;
  s = (s | (s << 8)) & 0x00ff00ffu;
  s = (s | (s << 4)) & 0x0f0f0f0fu;
  s = (s | (s << 2)) & 0x33333333u;  // bit 2n of `bits` is now bit 4n
  return s << 2;
#endif
}

// x, as a value the compiler must hold in a register of its own: a kernel argument kept this way
// across a loop is not re-copied from its uniform register before every use (NVIDIA).
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t keep_in_register(uint32_t x) {
#if defined(TURBO3_PLATFORM_CUDA)
  uint32_t r;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(x));
  return r;
#else
  return x;
#endif
}

// Byte k of the result is byte B_k of the 8-byte pair {lo, hi} (bytes 0-3 in lo); B_k in 0..7.
template <int B0, int B1, int B2, int B3>
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t permute_bytes(uint32_t lo, uint32_t hi) {
  static_assert(B0 >= 0 && B0 < 8 && B1 >= 0 && B1 < 8 && B2 >= 0 && B2 < 8 && B3 >= 0 && B3 < 8, "byte index");
#if defined(TURBO3_PLATFORM_CUDA)
  return __byte_perm(lo, hi, B0 | (B1 << 4) | (B2 << 8) | (B3 << 12));
#else
  return __builtin_amdgcn_perm(hi, lo, static_cast<uint32_t>(B0 | (B1 << 8) | (B2 << 16) | (B3 << 24)));
#endif
}

// Two fp16 values packed in a word (low half first) to two floats.
TURBO3_DEVICE TURBO3_FORCEINLINE void half2_bits_to_float2(uint32_t h2, float& lo, float& hi) {
#if defined(TURBO3_PLATFORM_CUDA)
  __half2 h;
  static_assert(sizeof(h) == 4, "half2");
  memcpy(&h, &h2, 4);
  const float2 f = __half22float2(h);
  lo = f.x;
  hi = f.y;
#else
  lo = static_cast<float>(__builtin_bit_cast(_Float16, static_cast<uint16_t>(h2 & 0xffffu)));
  hi = static_cast<float>(__builtin_bit_cast(_Float16, static_cast<uint16_t>(h2 >> 16)));
#endif
}

}  // namespace platform
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
