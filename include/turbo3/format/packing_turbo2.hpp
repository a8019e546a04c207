// Bit packing of 2-bit indices into a turbo2 block (docs/format.md §9), host and device.
#pragma once

#include <cstdint>

#include "turbo3/format/block_turbo2.hpp"
#include "turbo3/platform/device.hpp"

namespace turbo3 {

// Index (0..3) of element j of a block: bits 2*(j%4)..+1 of qs[j/4], value 0 lowest.
TURBO3_HD inline int unpack_index(const block_turbo2& b, int j) { return (b.qs[j >> 2] >> (2 * (j & 3))) & 3; }

// Pack 128 indices into qs (the norm is left to the caller).
TURBO3_HD inline void pack_indices(const uint8_t* idx, block_turbo2& b) {
  for (int k = 0; k < turbo2_qs_bytes; ++k)
    b.qs[k] = static_cast<uint8_t>((idx[4 * k] & 3) | ((idx[4 * k + 1] & 3) << 2) | ((idx[4 * k + 2] & 3) << 4) |
                                   ((idx[4 * k + 3] & 3) << 6));
}

}  // namespace turbo3
