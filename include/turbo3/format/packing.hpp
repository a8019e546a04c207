// Bit packing of 3-bit indices into a block (docs/format.md §1), host and device.
#pragma once

#include "turbo3/format/block.hpp"
#include "turbo3/platform/device.hpp"

namespace turbo3 {

// Index (0..7) of element j of a block.
TURBO3_HD inline int unpack_index(const block_turbo3& b, int j) {
  const int lo = (b.qs[j >> 2] >> (2 * (j & 3))) & 3;
  const int hi = (b.signs[j >> 3] >> (j & 7)) & 1;
  return lo | (hi << 2);
}

// Pack 128 indices into qs and signs (the norm is left to the caller).
TURBO3_HD inline void pack_indices(const uint8_t* idx, block_turbo3& b) {
  for (int k = 0; k < block_qs_bytes; ++k) {
    b.qs[k] = static_cast<uint8_t>((idx[4 * k] & 3) | ((idx[4 * k + 1] & 3) << 2) |
                                   ((idx[4 * k + 2] & 3) << 4) | ((idx[4 * k + 3] & 3) << 6));
  }
  for (int k = 0; k < block_sign_bytes; ++k) {
    uint8_t s = 0;
    for (int e = 0; e < 8; ++e) s |= static_cast<uint8_t>(((idx[8 * k + e] >> 2) & 1) << e);
    b.signs[k] = s;
  }
}

}  // namespace turbo3
