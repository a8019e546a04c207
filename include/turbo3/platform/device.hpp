// Device-side vendor layer: qualifiers, warp/wave size, shuffles, fp16 conversion, native math.
// Kernels use only the names defined here; no other header names a vendor intrinsic.
#pragma once

#include <cstdint>
#include <cstring>

#include "turbo3/platform/runtime.hpp"

#if TURBO3_HAS_RUNTIME
#define TURBO3_HD __host__ __device__
#define TURBO3_DEVICE __device__
#define TURBO3_GLOBAL __global__
#define TURBO3_FORCEINLINE __forceinline__
#define TURBO3_LAUNCH_BOUNDS(n) __launch_bounds__(n)
// At most `threads` per work-group, and at least `blocks` work-groups resident per multiprocessor
// where the compiler reads that (NVIDIA: it caps the registers per thread to fit them). HIP gives
// the second number another meaning (waves per execution unit), so AMD builds pass only `threads`.
#if defined(TURBO3_PLATFORM_CUDA)
#define TURBO3_LAUNCH_BOUNDS_RESIDENT(threads, blocks) __launch_bounds__(threads, blocks)
#else
#define TURBO3_LAUNCH_BOUNDS_RESIDENT(threads, blocks) __launch_bounds__(threads)
#endif
#else
#define TURBO3_HD
#define TURBO3_DEVICE
#define TURBO3_FORCEINLINE inline
#endif

// Loop unrolling hint (host-only g++ builds ignore it silently).
#if TURBO3_HAS_RUNTIME || defined(__clang__)
#define TURBO3_UNROLL _Pragma("unroll")
#else
#define TURBO3_UNROLL
#endif

// True while compiling device code (the device pass of nvcc or clang).
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define TURBO3_DEVICE_PASS 1
#else
#define TURBO3_DEVICE_PASS 0
#endif

namespace turbo3 {
namespace platform {

// Threads per warp (NVIDIA) or wavefront (AMD) of the architecture being compiled. In host code it
// is the widest wave any supported target uses, so host-side sizing never under-allocates.
#if defined(__HIP_DEVICE_COMPILE__)
#if defined(__AMDGCN_WAVEFRONT_SIZE__)
inline constexpr int warp_size = __AMDGCN_WAVEFRONT_SIZE__;
#elif defined(__AMDGCN_WAVEFRONT_SIZE)
inline constexpr int warp_size = __AMDGCN_WAVEFRONT_SIZE;
#else
#error "turbo3: unknown AMD wavefront size"
#endif
#elif defined(__CUDA_ARCH__)
inline constexpr int warp_size = 32;
#else
inline constexpr int warp_size = 64;
#endif

#if TURBO3_HAS_RUNTIME

// Butterfly shuffle within groups of `width` lanes (width a power of two, at most warp_size).
template <class T>
TURBO3_DEVICE TURBO3_FORCEINLINE T shfl_xor(T v, int lane_mask, int width = warp_size) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, width);
#else
  return __shfl_xor(v, lane_mask, width);
#endif
}

template <class T>
TURBO3_DEVICE TURBO3_FORCEINLINE T shfl(T v, int src_lane, int width = warp_size) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __shfl_sync(0xffffffffu, v, src_lane, width);
#else
  return __shfl(v, src_lane, width);
#endif
}

// True on every lane if `pred` holds on any lane of the warp (wavefront).
TURBO3_DEVICE TURBO3_FORCEINLINE bool any_in_warp(bool pred) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __any_sync(0xffffffffu, pred) != 0;
#else
  return __any(pred) != 0;
#endif
}

TURBO3_DEVICE TURBO3_FORCEINLINE int lane_id() {
#if defined(TURBO3_PLATFORM_CUDA)
  return static_cast<int>(threadIdx.x) & (warp_size - 1);
#else
  return static_cast<int>(__lane_id());
#endif
}

TURBO3_DEVICE TURBO3_FORCEINLINE void sync_threads() { __syncthreads(); }

// Stops the kernel: the body of an instantiation the host never launches on this target.
TURBO3_DEVICE TURBO3_FORCEINLINE void trap() {
#if defined(TURBO3_PLATFORM_CUDA)
  __trap();
#else
  __builtin_trap();
#endif
}

// ---- work-groups that hand results to each other ---------------------------------------------------
// Returns the old value. Relaxed: orders nothing else.
TURBO3_DEVICE TURBO3_FORCEINLINE unsigned atomic_add(unsigned* p, unsigned v) { return atomicAdd(p, v); }

// The same with device-scope acquire-release order: stores that happen before it (the work-group's,
// after a barrier) are visible to a work-group whose own acquire-release add reads its result, and
// loads after that add (after a barrier, for the work-group) see the stores behind every add it
// follows. One thread's add replaces a fence in every thread: NVIDIA's __threadfence() is a
// sequentially consistent fence (fence.sc.gpu), heavier than this message passing needs
// (docs/performance.md, decode).
TURBO3_DEVICE TURBO3_FORCEINLINE unsigned atomic_add_acq_rel(unsigned* p, unsigned v) {
#if defined(TURBO3_PLATFORM_CUDA)
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
#else
  __threadfence();
  const unsigned old = atomicAdd(p, v);
  __threadfence();
  return old;
#endif
}

// A load that bypasses the multiprocessor's non-coherent L1 (NVIDIA), for data other work-groups
// stored during this kernel. AMD: the acquiring fence of atomic_add_acq_rel already invalidates the L1.
TURBO3_DEVICE TURBO3_FORCEINLINE float load_coherent(const float* p) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __ldcg(p);
#else
  return *p;
#endif
}

// Two floats (8-byte aligned) at once, as load_coherent reads one.
TURBO3_DEVICE TURBO3_FORCEINLINE float2 load_coherent2(const float* p) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __ldcg(reinterpret_cast<const float2*>(p));
#else
  return *reinterpret_cast<const float2*>(p);
#endif
}

// Four floats (16-byte aligned) at once, as load_coherent reads one.
TURBO3_DEVICE TURBO3_FORCEINLINE float4 load_coherent4(const float* p) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __ldcg(reinterpret_cast<const float4*>(p));
#else
  return *reinterpret_cast<const float4*>(p);
#endif
}

// ---- fp16 ---------------------------------------------------------------------------------------
using half = __half;

TURBO3_DEVICE TURBO3_FORCEINLINE float half_to_float(__half h) { return __half2float(h); }
TURBO3_DEVICE TURBO3_FORCEINLINE __half float_to_half(float f) { return __float2half_rn(f); }
TURBO3_DEVICE TURBO3_FORCEINLINE float half_bits_to_float(uint16_t bits) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __half2float(__ushort_as_half(bits));
#else
  return static_cast<float>(__builtin_bit_cast(_Float16, bits));
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE uint16_t float_to_half_bits(float f) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __half_as_ushort(__float2half_rn(f));
#else
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(f));
#endif
}

// ---- scheduling ------------------------------------------------------------------------------------
// Keeps the compiler from moving instructions across this point. AMD: in a fully unrolled loop of
// shared-memory loads and matrix multiplies the scheduler otherwise hoists every load ahead of the
// multiplies, past the 256-register budget (spills); NVIDIA: nothing (ptxas schedules well here).
TURBO3_DEVICE TURBO3_FORCEINLINE void schedule_barrier() {
#if !defined(TURBO3_PLATFORM_CUDA)
  __builtin_amdgcn_sched_barrier(0);
#endif
}

// ---- float bits ----------------------------------------------------------------------------------
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t float_to_bits(float f) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __float_as_uint(f);
#else
  return __builtin_bit_cast(uint32_t, f);
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE float bits_to_float(uint32_t u) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __uint_as_float(u);
#else
  return __builtin_bit_cast(float, u);
#endif
}

// ---- native math (inputs in the ranges attention uses; not correctly rounded) -------------------
TURBO3_DEVICE TURBO3_FORCEINLINE float exp2_fast(float x) {
#if defined(TURBO3_PLATFORM_CUDA)
  float y;  // exp2f without fast-math adds a denormal range fix-up around the same instruction
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return __builtin_amdgcn_exp2f(x);
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE float rcp_fast(float x) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __frcp_rn(x);
#else
  return __builtin_amdgcn_rcpf(x);
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE float tanh_fast(float x) {
  // tanh(x) = 1 - 2 / (exp(2x) + 1); exp2 with log2(e) folded in. Saturates correctly at +-inf.
  const float e = exp2_fast(2.0f * 1.4426950408889634f * x);
  return 1.0f - 2.0f * rcp_fast(e + 1.0f);
}

// ---- correctly rounded arithmetic that is never contracted into FMA (byte-exact quantizer) ------
TURBO3_DEVICE TURBO3_FORCEINLINE float mul_rn(float a, float b) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __fmul_rn(a, b);
#else
#pragma clang fp contract(off)
  return a * b;
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE float add_rn(float a, float b) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __fadd_rn(a, b);
#else
#pragma clang fp contract(off)
  return a + b;
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE float sqrt_rn(float a) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __fsqrt_rn(a);
#else
  return __builtin_sqrtf(a);  // llvm.sqrt.f32 is correctly rounded
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE float div_rn(float a, float b) {
#if defined(TURBO3_PLATFORM_CUDA)
  return __fdiv_rn(a, b);
#else
  return a / b;  // HIP compiles fp32 division correctly rounded by default
#endif
}

#endif  // TURBO3_HAS_RUNTIME

}  // namespace platform
}  // namespace turbo3
