// AMD ISA compile check of the matrix-fragment abstraction (platform/fragment.hpp): one 16x16x16
// multiply per wave from shared memory, the accumulator written through its (row, col)
// coordinates, and a chain of multiplies (the shape the attention kernels use). Compiled for each
// target, it must emit that target's matrix instruction (gfx11 and gfx12 WMMA, gfx942 MFMA) and
// no scratch. Never launched; the lane layouts themselves are checked on hardware only (NVIDIA:
// tests/gpu/test_mma.cu; AMD layouts not yet run on an AMD GPU).
#include <cstdint>

#include "turbo3/platform/device.hpp"
#include "turbo3/platform/fragment.hpp"

namespace turbo3_amd_check {

namespace platform = turbo3::platform;

#if defined(__HIP_DEVICE_COMPILE__)
static_assert(platform::has_fragment_mma, "every AMD target of the check has a fragment back-end");
#endif

// One tile: D = A B with A [16][16] and B^T [16][16] (both K contiguous) staged in LDS.
// amd-check: fragment_mma_tile max scratch 0
// amd-check: fragment_mma_tile@gfx1201 require \bv_wmma_f32_16x16x16_f16\b
// amd-check: fragment_mma_tile@gfx1100 require \bv_wmma_f32_16x16x16_f16\b
// amd-check: fragment_mma_tile@gfx942 require \bv_mfma_f32_16x16x16_?f16\b
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(64)
fragment_mma_tile(const uint16_t* __restrict__ a, const uint16_t* __restrict__ bt, float* __restrict__ d) {
  __shared__ __attribute__((aligned(16))) uint16_t a_s[16 * 24];
  __shared__ __attribute__((aligned(16))) uint16_t b_s[16 * 24];
  for (int i = static_cast<int>(threadIdx.x); i < 256; i += platform::warp_size) {
    a_s[(i / 16) * 24 + i % 16] = a[i];
    b_s[(i / 16) * 24 + i % 16] = bt[i];
  }
  __syncthreads();
  platform::frag_a fa;
  platform::frag_b fb;
  platform::frag_acc c;
  platform::frag_zero(c);
  platform::frag_load_a(fa, a_s, 24);
  platform::frag_load_b(fb, b_s, 24);
  platform::frag_mma(c, fa, fb);
  for (int i = 0; i < platform::frag_acc::elements; ++i)
    d[platform::frag_acc_row(i) * 16 + platform::frag_acc_col(i)] = c.x[i];
}

// A 16 x 128 by 128 x 128 product: eight K steps into eight accumulators (the D = 128 shape of
// the attention kernel's value phase), all in registers.
// amd-check: fragment_mma_chain max scratch 0
// amd-check: fragment_mma_chain max vgpr_spill 0
// amd-check: fragment_mma_chain@gfx1201 require \bv_wmma_f32_16x16x16_f16\b
// amd-check: fragment_mma_chain@gfx1100 require \bv_wmma_f32_16x16x16_f16\b
// amd-check: fragment_mma_chain@gfx942 require \bv_mfma_f32_16x16x16_?f16\b
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(64)
fragment_mma_chain(const uint16_t* __restrict__ a, const uint16_t* __restrict__ bt, float* __restrict__ d) {
  constexpr int K = 128, N = 128, ld = K + 8;
  __shared__ __attribute__((aligned(16))) uint16_t a_s[16 * ld];
  __shared__ __attribute__((aligned(16))) uint16_t b_s[N * ld];
  for (int i = static_cast<int>(threadIdx.x); i < 16 * K; i += platform::warp_size) a_s[(i / K) * ld + i % K] = a[i];
  for (int i = static_cast<int>(threadIdx.x); i < N * K; i += platform::warp_size) b_s[(i / K) * ld + i % K] = bt[i];
  __syncthreads();
  platform::frag_acc c[N / 16];
  for (int n = 0; n < N / 16; ++n) platform::frag_zero(c[n]);
  for (int k = 0; k < K / 16; ++k) {
    platform::frag_a fa;
    platform::frag_load_a(fa, a_s + k * 16, ld);
#pragma unroll
    for (int n = 0; n < N / 16; ++n) {
      platform::frag_b fb;
      platform::frag_load_b(fb, b_s + n * 16 * ld + k * 16, ld);
      platform::frag_mma(c[n], fa, fb);
    }
  }
#pragma unroll
  for (int n = 0; n < N / 16; ++n)
    for (int i = 0; i < platform::frag_acc::elements; ++i)
      d[platform::frag_acc_row(i) * N + n * 16 + platform::frag_acc_col(i)] = c[n].x[i];
}

}  // namespace turbo3_amd_check
