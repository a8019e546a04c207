// Architecture families the kernels tune for (tile shapes, occupancy): which family the device
// pass is compiling, and which family a device is at run time (for the host-side dispatch that
// must pick the matching instantiation).
#pragma once

#include <cstring>

#include "turbo3/platform/device.hpp"
#include "turbo3/platform/device_state.hpp"

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
// query is not a stream operation). A failed query is not kept: the next call asks again, and this
// one assumes the first target's family.
inline arch_family device_family(int device) {
#if defined(TURBO3_PLATFORM_CUDA)
  (void)device;
  return arch_family::nvidia;
#else
  static per_device_value families;
  int v = 0;
  const bool known = families.get(device, v, [&](int& family) {
    const error_scope errors;
    hipDeviceProp_t prop;
    if (hipGetDeviceProperties(&prop, device) != hipSuccess) {
      errors.clear_own();
      return false;
    }
    arch_family f = arch_family::rdna4;
    if (std::strncmp(prop.gcnArchName, "gfx12", 5) == 0) f = arch_family::rdna4;
    else if (std::strncmp(prop.gcnArchName, "gfx11", 5) == 0) f = arch_family::rdna3;
    else if (std::strncmp(prop.gcnArchName, "gfx9", 4) == 0 || prop.warpSize == 64) f = arch_family::cdna3;
    family = static_cast<int>(f);
    return true;
  });
  return known ? static_cast<arch_family>(v) : arch_family::rdna4;
#endif
}

inline arch_family current_device_family() { return device_family(current_device()); }

#endif  // TURBO3_HAS_RUNTIME

}  // namespace platform
}  // namespace turbo3
