// Asynchronous global-to-shared copies and warp-scope synchronization. A kernel stages the next
// tiles' bytes while it computes on the current one, without holding the loads in registers.
// NVIDIA sm_80+: cp.async (4, 8 or 16 bytes) with commit/wait groups. Elsewhere the copy is
// an ordinary load and store and the group calls do nothing, which is correct, only not overlapped.
#pragma once

#include <cstdint>
#include <type_traits>

#include "turbo3/platform/device.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace platform {

#if defined(TURBO3_PLATFORM_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TURBO3_HAS_CP_ASYNC 1
#else
#define TURBO3_HAS_CP_ASYNC 0
#endif

// A shared-memory destination of asynchronous copies, computed once and offset by plain
// addition (a 32-bit shared address under cp.async, a pointer elsewhere).
#if TURBO3_HAS_CP_ASYNC
using async_destination = uint32_t;
TURBO3_DEVICE TURBO3_FORCEINLINE async_destination async_destination_of(void* shared) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(shared));
}
#else
using async_destination = unsigned char*;
TURBO3_DEVICE TURBO3_FORCEINLINE async_destination async_destination_of(void* shared) {
  return static_cast<unsigned char*>(shared);
}
#endif

// Bytes = 4, 8 or 16 from global to shared; both addresses aligned to Bytes.
template <int Bytes>
TURBO3_DEVICE TURBO3_FORCEINLINE void async_copy(async_destination dst, const void* global_src) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async sizes");
#if TURBO3_HAS_CP_ASYNC
  if constexpr (Bytes == 16)  // 16-byte copies may bypass L1 (.cg); smaller ones may not
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(global_src), "n"(Bytes));
#else
  using word = std::conditional_t<Bytes == 16, uint4, std::conditional_t<Bytes == 8, uint2, uint32_t>>;
  *reinterpret_cast<word*>(dst) = *static_cast<const word*>(global_src);
#endif
}

// 16 bytes from global, or 16 zero bytes where !valid (src must still be a valid address).
TURBO3_DEVICE TURBO3_FORCEINLINE void async_copy16_or_zero(async_destination dst, const void* global_src, bool valid) {
#if TURBO3_HAS_CP_ASYNC
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global_src), "r"(valid ? 16 : 0));
#else
  *reinterpret_cast<uint4*>(dst) = valid ? *static_cast<const uint4*>(global_src) : make_uint4(0, 0, 0, 0);
#endif
}

// The first 2 bytes of a word from global, the other 2 zero-filled: a row's last half word is
// copied without reading past the row. Both addresses 4-byte aligned. An ordinary load and store,
// not a copy: a 4-byte copy with a 2-byte source is a 4-byte read to compute-sanitizer's memcheck,
// past the end of an allocation that ends with the row.
TURBO3_DEVICE TURBO3_FORCEINLINE void async_copy2_of4(async_destination dst, const void* global_src) {
#if TURBO3_HAS_CP_ASYNC
  const uint32_t half = *static_cast<const uint16_t*>(global_src);
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(dst), "r"(half));
#else
  *reinterpret_cast<uint32_t*>(dst) = *static_cast<const uint16_t*>(global_src);
#endif
}

// The first `bytes` (0..Bytes, even) of a Bytes-sized unit from global, the rest zero-filled: a
// row's last partial unit is copied without reading past the row (0: nothing is read, the unit is
// zeroed). Bytes = 4, 8 or 16; both addresses aligned to Bytes.
template <int Bytes>
TURBO3_DEVICE TURBO3_FORCEINLINE void async_copy_sized(async_destination dst, const void* global_src, int bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async sizes with a source size");
#if TURBO3_HAS_CP_ASYNC
  // .ca at every size: a 16-byte copy allocates in L1 too (async_copy<16> does not).
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(global_src), "n"(Bytes), "r"(bytes));
#else
  const uint16_t* s = static_cast<const uint16_t*>(global_src);
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  for (int i = 0; i < Bytes / 2; ++i) d[i] = 2 * i < bytes ? s[i] : uint16_t{0};
#endif
}

// The first `bytes` (an even number, 0..16) of a 16-byte aligned segment, in copies of 16, 8, 4 and
// 2 bytes, so that nothing past them is read. Both addresses 16-byte aligned.
TURBO3_DEVICE TURBO3_FORCEINLINE void async_copy_head_of16(async_destination dst, const char* global_src, int bytes) {
  if (bytes >= 16) {
    async_copy<16>(dst, global_src);
    return;
  }
  int at = 0;
  if (bytes & 8) {
    async_copy<8>(dst, global_src);
    at = 8;
  }
  if (bytes & 4) {
    async_copy<4>(dst + at, global_src + at);
    at += 4;
  }
  if (bytes & 2) async_copy2_of4(dst + at, global_src + at);
}

// The copies carry no compiler memory barrier: the destination is not read before async_wait
// (which has one) and a warp or work-group barrier, so other shared-memory accesses may move
// across them.

// Closes the group of copies issued by this thread since the last commit.
TURBO3_DEVICE TURBO3_FORCEINLINE void async_commit() {
#if TURBO3_HAS_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `Pending` of this thread's most recent groups are still in flight.
template <int Pending>
TURBO3_DEVICE TURBO3_FORCEINLINE void async_wait() {
#if TURBO3_HAS_CP_ASYNC
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

// Barrier and memory fence among the lanes of one warp (wavefront).
TURBO3_DEVICE TURBO3_FORCEINLINE void sync_warp() {
#if defined(TURBO3_PLATFORM_CUDA)
  __syncwarp();
#else
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#endif
}

}  // namespace platform
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
