// Bit packing of 4-bit indices into a turbo4 block (docs/format.md §8), host and device.
#pragma once

#include <cstdint>

#include "turbo3/format/block_turbo4.hpp"
#include "turbo3/platform/device.hpp"

namespace turbo3 {

// Index (0..15) of element j of a block: the low nibble of qs[j/2] for even j, the high for odd.
TURBO3_HD inline int unpack_index(const block_turbo4& b, int j) { return (b.qs[j >> 1] >> (4 * (j & 1))) & 15; }

// Pack 128 indices into qs (norm and reserved are left to the caller).
TURBO3_HD inline void pack_indices(const uint8_t* idx, block_turbo4& b) {
  for (int k = 0; k < turbo4_qs_bytes; ++k)
    b.qs[k] = static_cast<uint8_t>((idx[2 * k] & 15) | ((idx[2 * k + 1] & 15) << 4));
}

}  // namespace turbo3
