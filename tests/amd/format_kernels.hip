// AMD ISA compile check for the format layer (packing, codebook, rotation) and the platform device
// layer (shuffles, fp16 conversion, native math, correctly rounded arithmetic).
//
// These kernels are never launched: amd_check.py compiles this file for each AMD target, reads the
// resources the compiler reports for every kernel and fails on any call left unresolved. Lines of
// the form `// amd-check: <kernel> <rule>` below are ISA assertions that amd_check.py enforces.
#include <cstdint>

#include "turbo3/format/block.hpp"
#include "turbo3/format/codebook.hpp"
#include "turbo3/format/packing.hpp"
#include "turbo3/format/rotation.hpp"
#include "turbo3/platform/device.hpp"

namespace turbo3_amd_check {

using turbo3::block_turbo3;
using turbo3::block_values;
using turbo3::codebook_table;
namespace platform = turbo3::platform;

// ---- warp_size must match the wavefront of the target being compiled ---------------------------
#if defined(__HIP_DEVICE_COMPILE__)
#if defined(__gfx942__)
static_assert(platform::warp_size == 64, "gfx942 (CDNA3) runs wave64");
#elif defined(__gfx1100__) || defined(__gfx1201__)
static_assert(platform::warp_size == 32, "gfx1100 / gfx1201 (RDNA3 / RDNA4) compile for wave32");
#elif defined(__GFX9__)
static_assert(platform::warp_size == 64, "GFX9 targets run wave64");
#endif
#else
static_assert(platform::warp_size == 64, "host code sizes for the widest wave");
#endif

// No kernel here spills; the kernels meant to be cheap use no scratch either. (rotate_forward_private
// and quantize_groups_scalar keep 128-entry arrays per thread: their scratch is reported, not limited.)
// amd-check: * max vgpr_spill 0
// amd-check: * max sgpr_spill 0

// ---- dequantization: y = norm * C[index], one work-group per block, one thread per value --------
// amd-check: dequantize_blocks max scratch 0
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(block_values)
dequantize_blocks(const block_turbo3* __restrict__ x, float* __restrict__ y, codebook_table cb,
                  int64_t n_blocks) {
  const int64_t b = blockIdx.x;
  if (b >= n_blocks) return;
  const int j = static_cast<int>(threadIdx.x);
  const block_turbo3& blk = x[b];
  const float norm = platform::half_bits_to_float(blk.norm);
  y[b * block_values + j] = norm * cb.level[turbo3::unpack_index(blk, j)];
}

// ---- a score against whole blocks: s = norm * sum_d q_d C[i_d], one thread per block ------------
// The pattern of a K row in decode; the codebook lives in registers, q in shared memory.
// amd-check: score_blocks max scratch 0
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(256)
score_blocks(const float* __restrict__ q, const block_turbo3* __restrict__ k, float* __restrict__ s,
             codebook_table cb, int64_t n_blocks) {
  __shared__ float q_shared[block_values];
  for (int d = static_cast<int>(threadIdx.x); d < block_values; d += static_cast<int>(blockDim.x)) {
    q_shared[d] = q[d];
  }
  platform::sync_threads();
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= n_blocks) return;
  const block_turbo3& blk = k[b];
  float acc = 0.0f;
#pragma unroll 8
  for (int d = 0; d < block_values; ++d) acc += q_shared[d] * cb.level[turbo3::unpack_index(blk, d)];
  s[b] = platform::half_bits_to_float(blk.norm) * acc;
}

// ---- rotation: one thread per 128-group ---------------------------------------------------------
// In a thread-private array: shows what the shared host/device reference costs in registers.
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(64)
rotate_forward_private(float* __restrict__ x, int64_t n_groups) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= n_groups) return;
  float u[block_values];
  for (int i = 0; i < block_values; ++i) u[i] = x[g * block_values + i];
  turbo3::rotate_forward_group(u);
  for (int i = 0; i < block_values; ++i) x[g * block_values + i] = u[i];
}

// In shared memory, 32 groups per work-group.
// amd-check: rotate_inverse_shared max scratch 0
constexpr int lds_groups = 32;
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(lds_groups)
rotate_inverse_shared(float* __restrict__ x, int64_t n_groups) {
  __shared__ float groups[lds_groups][block_values];
  const int64_t g0 = static_cast<int64_t>(blockIdx.x) * lds_groups;
  for (int e = static_cast<int>(threadIdx.x); e < lds_groups * block_values; e += lds_groups) {
    const int64_t g = g0 + e / block_values;
    groups[e / block_values][e % block_values] = g < n_groups ? x[g0 * block_values + e] : 0.0f;
  }
  platform::sync_threads();
  turbo3::rotate_inverse_group(groups[threadIdx.x]);
  platform::sync_threads();
  for (int e = static_cast<int>(threadIdx.x); e < lds_groups * block_values; e += lds_groups) {
    if (g0 + e / block_values < n_groups) x[g0 * block_values + e] = groups[e / block_values][e % block_values];
  }
}

// ---- one wave's softmax: shuffles, native exp2 / rcp / tanh, fp16 in and out -------------------
// Scores arrive as fp16 bits; optional softcap; max and sum are butterfly reductions over the wave.
// The native wrappers must stay single instructions: no IEEE division sequence, no library call.
// amd-check: wave_softmax max scratch 0
// amd-check: wave_softmax require \bv_(s_)?exp_f32
// amd-check: wave_softmax require \bv_(s_)?rcp_f32
// amd-check: wave_softmax forbid \bv_div_(scale|fmas|fixup)
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(256)
wave_softmax(const uint16_t* __restrict__ scores, float* __restrict__ p_out, uint16_t* __restrict__ p_half,
             platform::half* __restrict__ max_out, float softcap, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float s = i < n ? platform::half_bits_to_float(scores[i]) : -1.0e30f;
  if (softcap > 0.0f) s = softcap * platform::tanh_fast(s * platform::rcp_fast(softcap));
  float m = s;
  for (int o = platform::warp_size / 2; o > 0; o >>= 1) {
    const float other = platform::shfl_xor(m, o);
    m = other > m ? other : m;
  }
  const float p = platform::exp2_fast(s - m);
  float l = p;
  for (int o = platform::warp_size / 2; o > 0; o >>= 1) l += platform::shfl_xor(l, o);
  const float r = p * platform::rcp_fast(l);
  if (i < n) {
    p_out[i] = r;
    p_half[i] = platform::float_to_half_bits(r);
  }
  // Lane 0's maximum, broadcast and round-tripped through __half.
  const float m0 = platform::shfl(m, 0);
  if (platform::lane_id() == 0) {
    const platform::half h = platform::float_to_half(m0);
    max_out[i / platform::warp_size] = platform::float_to_half(platform::half_to_float(h) * 0.5f);
  }
}

// ---- correctly rounded arithmetic (what the byte-exact quantizer relies on) ---------------------
// mul_rn / add_rn must stay separate instructions: a contraction into FMA changes the bytes.
// amd-check: exact_mul_add no-fma
// amd-check: exact_* max scratch 0
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(256)
exact_mul_add(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ c,
              float* __restrict__ out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = platform::add_rn(platform::mul_rn(a[i], b[i]), c[i]);
}

// The sum of squares of a 128-group in the quantizer's order: still no FMA.
// amd-check: exact_sum_squares no-fma
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(256)
exact_sum_squares(const float* __restrict__ x, float* __restrict__ out, int64_t n_groups) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= n_groups) return;
  float ss = 0.0f;
  for (int i = 0; i < block_values; ++i) {
    const float v = x[g * block_values + i];
    ss = platform::add_rn(ss, platform::mul_rn(v, v));
  }
  out[g] = ss;
}

// Division and square root: the IEEE expansions, not a bare reciprocal or v_sqrt.
// amd-check: exact_div_sqrt require v_div_fixup_f32
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(256)
exact_div_sqrt(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ q,
               float* __restrict__ r, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  q[i] = platform::div_rn(a[i], b[i]);
  r[i] = platform::sqrt_rn(b[i]);
}

// ---- a scalar quantizer, one thread per 128-group: norm, scale, thresholds, pack ----------------
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(64)
quantize_groups_scalar(const float* __restrict__ x, block_turbo3* __restrict__ y, codebook_table cb,
                       int64_t n_groups) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= n_groups) return;
  const float* row = x + g * block_values;
  float ss = 0.0f;
  for (int i = 0; i < block_values; ++i) ss = platform::add_rn(ss, platform::mul_rn(row[i], row[i]));
  const float norm = platform::sqrt_rn(ss);
  const float inv = norm > 0.0f ? platform::div_rn(1.0f, norm) : 0.0f;
  uint8_t idx[block_values];
  for (int i = 0; i < block_values; ++i) {
    idx[i] = static_cast<uint8_t>(turbo3::quantize_index(cb, platform::mul_rn(row[i], inv)));
  }
  block_turbo3 out;
  turbo3::pack_indices(idx, out);
  out.norm = platform::float_to_half_bits(norm);
  y[g] = out;
}

}  // namespace turbo3_amd_check
