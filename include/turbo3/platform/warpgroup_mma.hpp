// Warpgroup matrix multiplies: the four warps of a warpgroup (128 threads) multiply a 64 x 16 f16
// tile A by a 16 x 64 f16 tile B read straight from shared memory into a 64 x 64 f32 accumulator,
// asynchronously (issue, commit, wait). Kernels see only these names:
//
//   has_warpgroup_mma                 whether the target being compiled has them (NVIDIA sm_90a)
//   wg_operand_swizzled(p, sbo)       a shared-memory operand in the 128-byte-swizzled layout (below)
//   wg_offset(desc, bytes)            the operand `bytes` further on
//   wg_mma_rs<TransB, B_OFF>(acc, a, b, acc_in)  acc (+)= A B, A from registers (frag_a layout of
//                                     the warp's 16 rows), B from shared memory (B_OFF: a constant
//                                     offset from descriptor b, in 16-byte units)
//   wg_mma_ss<TransB, A_OFF, B_OFF>(acc, a, b, acc_in)  both from shared memory
//   wg_fence()                        before the first multiply of a batch: orders earlier register
//                                     writes (accumulators, A) before the multiplies read them
//   wg_commit(), wg_wait<N>()         close a batch; wait until at most N batches are in flight
//   wg_hold(acc)                      ties the accumulators to the last wait (reads stay after it)
//   shared_address_of(p)              the shared-memory address of a pointer into shared memory
//   shared_writes_to_async()          orders this thread's ordinary shared-memory writes before
//                                     later multiplies read them (with a barrier in between)
//   named_barrier_sync/arrive(id, n)  producer-consumer barriers between warpgroups
//   wg_registers_down/up<N>()         a warpgroup's register share (warp specialization)
//
// Accumulator: warp w of the warpgroup holds rows 16 w .. 16 w + 15, as four frag_acc tiles of 16
// columns (platform/fragment.hpp's NVIDIA layout): acc[n].x[i] is row 16 w + frag_acc_row(i),
// column 16 n + frag_acc_col(i).
//
// Shared-memory operands: rows of 128 bytes (64 f16) in 1024-byte aligned atoms of 8 rows, the
// 16-byte piece k of row r stored at piece k ^ (r % 8) of its row. TransB = false: B stored as N
// rows with K contiguous, like A; TransB = true: B stored as K rows with N contiguous.
#pragma once

#include <cstdint>

#include "turbo3/platform/device.hpp"
#include "turbo3/platform/device_state.hpp"
#include "turbo3/platform/fragment.hpp"

#if TURBO3_HAS_RUNTIME

#if defined(TURBO3_PLATFORM_CUDA) && defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TURBO3_WARPGROUP_MMA 1
#endif
// A build that says it has the warpgroup kernel must not also carry sm_90 device code without it:
// the launcher would send sm_90 devices to a kernel whose body traps.
#if defined(TURBO3_PLATFORM_CUDA) && defined(TURBO3_WARPGROUP_MMA_BUILT) && defined(__CUDA_ARCH__) && \
    __CUDA_ARCH__ == 900 && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "TURBO3_WARPGROUP_MMA_BUILT needs sm_90 device code built for sm_90a (e.g. CMAKE_CUDA_ARCHITECTURES=90a, not 90)"
#endif

namespace turbo3 {
namespace platform {

#if defined(TURBO3_WARPGROUP_MMA)
inline constexpr bool has_warpgroup_mma = true;
#else
inline constexpr bool has_warpgroup_mma = false;
#endif

// The shared-memory address of a pointer into shared memory.
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t shared_address_of(const void* p) {
#if defined(TURBO3_PLATFORM_CUDA) && defined(__CUDA_ARCH__)
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#else
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p));
#endif
}

// The operand `bytes` further on (a multiple of 16; the address stays below 256 KB). The start
// address is the descriptor's low 14 bits (16-byte units), so the add never carries out of the
// low word: a 32-bit add, which the compiler folds into the uniform registers a multiply reads
// (a 64-bit one takes about ten vector instructions per multiply: docs/performance.md, MMA).
TURBO3_DEVICE TURBO3_FORCEINLINE uint64_t wg_offset(uint64_t desc, int bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + static_cast<uint32_t>(bytes >> 4);
  return (desc & 0xffffffff00000000ull) | lo;
}
// The matrix descriptor of a 128-byte-swizzled operand at p: start address and the distance sbo
// between 8-row groups (along M / N for K-major operands, along K for TransB ones), in 16-byte
// units, swizzle mode 1 in bits 62-63 (the leading offset, unused by this layout, is 16 bytes).
// p may point up to 96 bytes into a row (the k-th 16-value step of a 64-value panel starts 32 k
// bytes in).
TURBO3_DEVICE TURBO3_FORCEINLINE uint64_t wg_operand_swizzled(const void* p, uint32_t sbo) {
#if defined(TURBO3_WARPGROUP_MMA)
  constexpr uint32_t lbo = 16;
  const uint32_t s = shared_address_of(p);
  return static_cast<uint64_t>((s & 0x3FFFFu) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32) | (uint64_t{1} << 62);
#else
  (void)p; (void)sbo;
  return 0;
#endif
}

#if defined(TURBO3_WARPGROUP_MMA)
#define TURBO3_WG_ACC32                                                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define TURBO3_WG_ACC_OPS(c)                                                                                     \
  "+f"(c[0].x[0]), "+f"(c[0].x[1]), "+f"(c[0].x[2]), "+f"(c[0].x[3]), "+f"(c[0].x[4]), "+f"(c[0].x[5]),        \
      "+f"(c[0].x[6]), "+f"(c[0].x[7]), "+f"(c[1].x[0]), "+f"(c[1].x[1]), "+f"(c[1].x[2]), "+f"(c[1].x[3]),    \
      "+f"(c[1].x[4]), "+f"(c[1].x[5]), "+f"(c[1].x[6]), "+f"(c[1].x[7]), "+f"(c[2].x[0]), "+f"(c[2].x[1]),    \
      "+f"(c[2].x[2]), "+f"(c[2].x[3]), "+f"(c[2].x[4]), "+f"(c[2].x[5]), "+f"(c[2].x[6]), "+f"(c[2].x[7]),    \
      "+f"(c[3].x[0]), "+f"(c[3].x[1]), "+f"(c[3].x[2]), "+f"(c[3].x[3]), "+f"(c[3].x[4]), "+f"(c[3].x[5]),    \
      "+f"(c[3].x[6]), "+f"(c[3].x[7])
#endif

// acc (+)= A B: A (64 x 16) from registers, this warp's 16 rows in the frag_a layout; B (16 x 64)
// from shared memory at descriptor b plus B_OFF 16-byte units. accumulate = false overwrites acc.
// The offset is added inside the instruction's own asm block: a constant added there stays next
// to the multiply, where the compiler keeps it in uniform registers (one descriptor per tile held
// in uniform registers, no vector instruction per multiply), instead of being hoisted out of the
// loop as one 64-bit value per multiply kept in vector registers (about ten vector instructions
// per multiply: docs/performance.md, MMA).
template <bool TransB, int B_OFF = 0>
TURBO3_DEVICE TURBO3_FORCEINLINE void wg_mma_rs(frag_acc (&acc)[4], const frag_a& a, uint64_t b, bool accumulate) {
  static_assert(B_OFF >= 0 && B_OFF < (1 << 14), "an offset within shared memory");
#if defined(TURBO3_WARPGROUP_MMA)
  asm volatile(
      "{\n.reg .pred p;\n.reg .b32 bl, bh;\n.reg .b64 bd;\n"
      "setp.ne.b32 p, %38, 0;\n"
      "mov.b64 {bl, bh}, %36;\nadd.u32 bl, bl, %39;\nmov.b64 bd, {bl, bh};\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " TURBO3_WG_ACC32
      ", {%32, %33, %34, %35}, bd, p, 1, 1, %37;\n}\n"
      : TURBO3_WG_ACC_OPS(acc)
      : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "l"(b), "n"(TransB ? 1 : 0), "r"(accumulate ? 1 : 0),
        "n"(B_OFF));
#else
  (void)acc; (void)a; (void)b; (void)accumulate;
  trap();  // never launched: has_warpgroup_mma routes other targets elsewhere
#endif
}

// acc (+)= A B, both from shared memory (A stored as M rows with K contiguous), at descriptors a
// and b plus A_OFF and B_OFF 16-byte units (added as in wg_mma_rs).
template <bool TransB, int A_OFF = 0, int B_OFF = 0>
TURBO3_DEVICE TURBO3_FORCEINLINE void wg_mma_ss(frag_acc (&acc)[4], uint64_t a, uint64_t b, bool accumulate) {
  static_assert(A_OFF >= 0 && A_OFF < (1 << 14) && B_OFF >= 0 && B_OFF < (1 << 14), "offsets within shared memory");
#if defined(TURBO3_WARPGROUP_MMA)
  asm volatile(
      "{\n.reg .pred p;\n.reg .b32 al, ah, bl, bh;\n.reg .b64 ad, bd;\n"
      "setp.ne.b32 p, %35, 0;\n"
      "mov.b64 {al, ah}, %32;\nadd.u32 al, al, %36;\nmov.b64 ad, {al, ah};\n"
      "mov.b64 {bl, bh}, %33;\nadd.u32 bl, bl, %37;\nmov.b64 bd, {bl, bh};\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " TURBO3_WG_ACC32
      ", ad, bd, p, 1, 1, 0, %34;\n}\n"
      : TURBO3_WG_ACC_OPS(acc)
      : "l"(a), "l"(b), "n"(TransB ? 1 : 0), "r"(accumulate ? 1 : 0), "n"(A_OFF), "n"(B_OFF));
#else
  (void)acc; (void)a; (void)b; (void)accumulate;
  trap();
#endif
}

TURBO3_DEVICE TURBO3_FORCEINLINE void wg_fence() {
#if defined(TURBO3_WARPGROUP_MMA)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE void wg_commit() {
#if defined(TURBO3_WARPGROUP_MMA)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
TURBO3_DEVICE TURBO3_FORCEINLINE void wg_wait() {
#if defined(TURBO3_WARPGROUP_MMA)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// An empty statement that reads and writes every accumulator register: placed right after a wait
// (and before a fence), it keeps the compiler from moving accumulator reads or writes across it.
template <int N>
TURBO3_DEVICE TURBO3_FORCEINLINE void wg_hold(frag_acc (&acc)[N]) {
#if defined(TURBO3_WARPGROUP_MMA)
  TURBO3_UNROLL
  for (int n = 0; n < N; ++n)
    TURBO3_UNROLL
    for (int i = 0; i < frag_acc::elements; ++i) asm volatile("" : "+f"(acc[n].x[i])::"memory");
#else
  (void)acc;
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE void wg_hold(frag_a& a) {
#if defined(TURBO3_WARPGROUP_MMA)
  TURBO3_UNROLL
  for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a.x[i])::"memory");
#else
  (void)a;
#endif
}

TURBO3_DEVICE TURBO3_FORCEINLINE void shared_writes_to_async() {
#if defined(TURBO3_WARPGROUP_MMA)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Named barriers 1..15 (0 is the work-group barrier, sync_threads): a producer arrives without
// waiting once its shared-memory writes are done (the arrive orders them before the waiters'
// reads), a consumer waits until `threads` threads in all have arrived or waited. Whole warps
// take part; `threads` is a multiple of 32.
TURBO3_DEVICE TURBO3_FORCEINLINE void named_barrier_sync(int id, int threads) {
#if defined(TURBO3_WARPGROUP_MMA)
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#else
  (void)id; (void)threads;
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE void named_barrier_arrive(int id, int threads) {
#if defined(TURBO3_WARPGROUP_MMA)
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#else
  (void)id; (void)threads;
#endif
}

// A warpgroup hands registers back (wg_registers_down) or takes them (wg_registers_up): N per
// thread from here on (a multiple of 8, 24..256). The work-group's warpgroups share the register
// file the launch gave them, so one that needs few can leave more to the others.
template <int N>
TURBO3_DEVICE TURBO3_FORCEINLINE void wg_registers_down() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg range");
#if defined(TURBO3_WARPGROUP_MMA)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
TURBO3_DEVICE TURBO3_FORCEINLINE void wg_registers_up() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg range");
#if defined(TURBO3_WARPGROUP_MMA)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

#undef TURBO3_WG_ACC32
#undef TURBO3_WG_ACC_OPS

// Whether device `device` runs this build's warpgroup kernels: an sm_90 device (the instructions
// exist only for sm_90a) in a build whose device code targets sm_90a, which the build says by
// defining TURBO3_WARPGROUP_MMA_BUILT (a host pass cannot see the device passes' targets). Read
// once per device (the attribute query is not a stream operation: legal under capture); a failed
// query is not kept (false this time, asked again next time).
inline bool warpgroup_mma_available(int device) {
#if defined(TURBO3_PLATFORM_CUDA) && defined(TURBO3_WARPGROUP_MMA_BUILT)
  static per_device_value available;
  int v = 0;
  const bool known = available.get(device, v, [&](int& yes) {
    const error_scope errors;
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
      errors.clear_own();
      return false;
    }
    yes = major == 9 && minor == 0 ? 1 : 0;
    return true;
  });
  return known && v == 1;
#else
  (void)device;
  return false;
#endif
}

}  // namespace platform
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
