// Matrix-fragment multiply-accumulate: D(16x8, f32) += A(16x16, f16) * B(16x8, f16).
//
// Fragment layout (lane l of a 32-lane warp, g = l / 4, t = l % 4; each uint32 holds two fp16,
// the lower-indexed element in the low half):
//   a[0] = A[g][2t, 2t+1]    a[1] = A[g+8][2t, 2t+1]    a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
//   b[0] = B[2t, 2t+1][g]    b[1] = B[2t+8, 2t+9][g]
//   c[0..1] = C[g][2t, 2t+1] c[2..3] = C[g+8][2t, 2t+1]
// Back-ends: NVIDIA mma.sync m16n8k16 (sm_80 and later). AMD targets report has_mma_m16n8k16 ==
// false (their WMMA/MFMA layouts differ) and the kernels fall back to scalar code there.
#pragma once

#include <cstdint>

#include "turbo3/platform/device.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace platform {

#if defined(TURBO3_PLATFORM_CUDA)
inline constexpr bool has_mma_m16n8k16 = true;  // the library targets sm_80 and later under nvcc
#else
inline constexpr bool has_mma_m16n8k16 = false;
#endif

TURBO3_DEVICE TURBO3_FORCEINLINE void mma_m16n8k16(float c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(TURBO3_PLATFORM_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)c; (void)a; (void)b;
  __builtin_trap();  // never launched: has_mma_m16n8k16 routes these targets elsewhere
#endif
}

// The integer form, m16n8k32 with signed bytes and int32 accumulators: the same layout with four
// bytes per register where the fp16 form has two halves (a[0] = A[g][4t .. 4t+3], a[1] = A[g+8][..],
// a[2] = A[g][4t+16 .. 4t+19], a[3] = A[g+8][..]; b[0] = B[4t .. 4t+3][g], b[1] = B[4t+16 .. 4t+19][g]).
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_m16n8k32_s8(int c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(TURBO3_PLATFORM_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)c;
  (void)a;
  (void)b;
  __builtin_trap();  // never launched: has_mma_m16n8k16 routes these targets elsewhere
#endif
}

// The transpose of an 8 x 8 matrix of 16-bit elements held one row pair per lane (lane (g, t) holds
// M[g][2t, 2t+1]): lane (g, t) receives M[2t][g] (low half) and M[2t+1][g]. A score fragment's
// 8 x 8 quarter thus becomes the operand fragment of its transpose without shared memory.
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t transpose_8x8_b16(uint32_t m) {
#if defined(TURBO3_PLATFORM_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(m));
  return r;
#else
  (void)m;
  __builtin_trap();  // never launched: has_mma_m16n8k16 routes these targets elsewhere
  return 0;
#endif
}

// Two floats to a packed fp16 pair (round to nearest even), low half first.
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t pack_half2(float lo, float hi) {
#if defined(TURBO3_PLATFORM_CUDA)
  const __half2 h = __floats2half2_rn(lo, hi);  // one conversion instruction for both
  uint32_t bits;
  memcpy(&bits, &h, 4);
  return bits;
#else
  return static_cast<uint32_t>(float_to_half_bits(lo)) | (static_cast<uint32_t>(float_to_half_bits(hi)) << 16);
#endif
}

}  // namespace platform
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
