// Asynchronous global-to-shared copies and warp-scope synchronization. A kernel stages the next
// tiles' bytes while it computes on the current one, without holding the loads in registers.
// NVIDIA sm_80+: cp.async (4 or 16 bytes) with commit/wait groups. Elsewhere the copy is
// an ordinary load and store and the group calls do nothing, which is correct, only not overlapped.
#pragma once

#include <cstdint>

#include "turbo3/platform/device.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace platform {

#if defined(TURBO3_PLATFORM_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TURBO3_HAS_CP_ASYNC 1
#else
#define TURBO3_HAS_CP_ASYNC 0
#endif

// 16 bytes from global to shared; both addresses 16-byte aligned.
TURBO3_DEVICE TURBO3_FORCEINLINE void async_copy16(void* shared_dst, const void* global_src) {
#if TURBO3_HAS_CP_ASYNC
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src) : "memory");
#else
  *static_cast<uint4*>(shared_dst) = *static_cast<const uint4*>(global_src);
#endif
}

// One shared word from global: the first `src_bytes` (2 or 4) bytes are read, the rest of the word
// is zero-filled (so a 2-byte tail never reads past its row). Both addresses 4-byte aligned.
TURBO3_DEVICE TURBO3_FORCEINLINE void async_copy4(void* shared_dst, const void* global_src, int src_bytes) {
#if TURBO3_HAS_CP_ASYNC
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(global_src), "r"(src_bytes)
               : "memory");
#else
  const uint16_t* src = static_cast<const uint16_t*>(global_src);
  static_cast<uint32_t*>(shared_dst)[0] = src_bytes >= 4 ? (src[0] | (static_cast<uint32_t>(src[1]) << 16)) : src[0];
#endif
}

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
