// Hardware limits per work-group that the kernels' shapes are checked against at compile time
// (static_asserts next to each shape table) and that size their register splits.
#pragma once

#include <cstddef>

namespace turbo3 {
namespace platform {

// NVIDIA: the most shared memory one work-group may opt into (227 KB on sm_90; less on sm_8x).
inline constexpr size_t nvidia_max_shared_bytes = 232448;
// NVIDIA: the 32-bit registers one work-group may hold (64K, a multiprocessor's register file).
inline constexpr int nvidia_max_registers = 65536;
// AMD: the LDS one work-group may use (64 KB on RDNA3, RDNA4 and CDNA3).
inline constexpr size_t amd_max_lds_bytes = 65536;

}  // namespace platform
}  // namespace turbo3
