// Which kernel family a device's prefill calls take by default: one home for the choice, read by
// the router (launch.hpp) and by materialize, whose dense copies go to the same family.
#pragma once

#include "turbo3/platform/arch.hpp"

namespace turbo3 {
namespace detail {

// Families whose automatic prefill route is the MMA kernel. NVIDIA: tested, and 4.6-11.7x faster
// than TILE (docs/performance.md, MMA). AMD (WMMA, MFMA): compiled and resource-checked but never run on
// the hardware (the gfx12 operand layout in particular is unconfirmed), so TILE stays the default
// there until a GPU run says otherwise; kernel_choice::mma forces it.
TURBO3_HD constexpr bool mma_by_default(platform::arch_family f) { return f == platform::arch_family::nvidia; }

}  // namespace detail
}  // namespace turbo3
