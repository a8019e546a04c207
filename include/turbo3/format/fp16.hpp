// Host-side IEEE binary16 conversion (round to nearest even), bit-exact with the device conversion.
#pragma once

#include <cstdint>
#include <cstring>

#include "turbo3/platform/device.hpp"

namespace turbo3 {

inline constexpr float fp16_max = 65504.0f;  // the largest finite fp16 value

// x with |x| > 65504 (infinities included) brought to +-65504, NaN kept: rounded to fp16 after it,
// every value but NaN stays finite. Host and device quantizers store the turbo3 norm through it
// (docs/format.md §7, the overflow policy of §3 step 6).
TURBO3_HD constexpr float clamp_to_fp16_range(float x) {
  return x > fp16_max ? fp16_max : x < -fp16_max ? -fp16_max : x;
}

inline uint16_t fp16_from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {                       // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {                        // result is subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);          // below half the min subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;            // 14..24 bits dropped
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((abs >> 13) - (112u << 10));      // rebias exponent 127 -> 15
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// fp16_from_float of clamp_to_fp16_range(f): round to nearest even, saturating to +-65504
// (0x7bff / 0xfbff) where the rounding would give an infinity; NaN stays NaN.
inline uint16_t fp16_from_float_saturated(float f) { return fp16_from_float(clamp_to_fp16_range(f)); }

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {                                      // subnormal: normalize
      int e = -1;
      do { mant <<= 1; ++e; } while ((mant & 0x400u) == 0);
      x = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace turbo3
