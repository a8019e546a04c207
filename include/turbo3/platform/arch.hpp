// Architecture families the kernels tune for (tile shapes, occupancy): which family the device
// pass is compiling, and which family a device is at run time (for the host-side dispatch that
// must pick the matching instantiation).
#pragma once

#include <atomic>
#include <cstring>

#include "turbo3/platform/device.hpp"

// __launch_bounds__ with a residency target: NVIDIA reads the second number as work-groups per
// multiprocessor (it caps registers accordingly); HIP gives it another meaning (waves per EU), so
// there only the thread count is passed.
#if defined(TURBO3_PLATFORM_CUDA)
#define TURBO3_LAUNCH_BOUNDS_RESIDENT(threads, blocks) __launch_bounds__(threads, blocks)
#elif TURBO3_HAS_RUNTIME
#define TURBO3_LAUNCH_BOUNDS_RESIDENT(threads, blocks) __launch_bounds__(threads)
#endif

namespace turbo3 {
namespace platform {

enum class arch_family {
  nvidia,  // sm_80 and later: 64K registers and up to ~227 KB shared memory per multiprocessor
  rdna4,   // gfx12: wave32, 64 KB LDS per work-group
  rdna3,   // gfx11: wave32, 64 KB LDS per work-group
  cdna3,   // gfx94x (and other gfx9 CDNA parts): wave64, 64 KB LDS per work-group
};

// The family of the code being compiled. In host passes it is the family the host code assumes
// for sizing when no device is asked (NVIDIA under nvcc, RDNA4, the first target, under HIP).
#if defined(TURBO3_PLATFORM_CUDA)
inline constexpr arch_family compiled_family = arch_family::nvidia;
#elif defined(__gfx1200__) || defined(__gfx1201__) || defined(__GFX12__)
inline constexpr arch_family compiled_family = arch_family::rdna4;
#elif defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) || defined(__gfx1103__) || \
    defined(__gfx1150__) || defined(__gfx1151__) || defined(__GFX11__)
inline constexpr arch_family compiled_family = arch_family::rdna3;
#elif defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__) || \
    defined(__gfx90a__) || defined(__gfx908__) || defined(__GFX9__)
inline constexpr arch_family compiled_family = arch_family::cdna3;
#else
inline constexpr arch_family compiled_family = arch_family::rdna4;
#endif

#if TURBO3_HAS_RUNTIME

// The family of device `device`, read once per device (eagerly, or on first use: the property
// query is not a stream operation).
inline arch_family device_family(int device) {
#if defined(TURBO3_PLATFORM_CUDA)
  (void)device;
  return arch_family::nvidia;
#else
  static std::atomic<int> cache[64] = {};  // 0: unknown, else 1 + family
  const bool cacheable = device >= 0 && device < 64;
  if (cacheable) {
    const int v = cache[device].load(std::memory_order_relaxed);
    if (v != 0) return static_cast<arch_family>(v - 1);
  }
  arch_family f = arch_family::rdna4;
  hipDeviceProp_t prop;
  if (hipGetDeviceProperties(&prop, device) == hipSuccess) {
    if (std::strncmp(prop.gcnArchName, "gfx12", 5) == 0) f = arch_family::rdna4;
    else if (std::strncmp(prop.gcnArchName, "gfx11", 5) == 0) f = arch_family::rdna3;
    else if (std::strncmp(prop.gcnArchName, "gfx9", 4) == 0 || prop.warpSize == 64) f = arch_family::cdna3;
  } else {
    (void)hipGetLastError();
  }
  if (cacheable) cache[device].store(static_cast<int>(f) + 1, std::memory_order_relaxed);
  return f;
#endif
}

inline arch_family current_device_family() {
  int device = 0;
  if (hipGetDevice(&device) != hipSuccess) {
    (void)hipGetLastError();
    device = 0;
  }
  return device_family(device);
}

#endif  // TURBO3_HAS_RUNTIME

}  // namespace platform
}  // namespace turbo3
