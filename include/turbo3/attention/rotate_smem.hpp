// The rotation of turbo3-format.md §3 applied by a whole work-group to rows held in shared
// memory (every thread must call it; it synchronizes internally). Same operation order as the
// host rotation: signs, unnormalized butterfly, then scale and signs.
#pragma once

#include "turbo3/format/rotation.hpp"
#include "turbo3/platform/device.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

// Rotates n_groups consecutive 128-value groups of x: forward (R) or inverse (R^T).
template <bool Inverse>
TURBO3_DEVICE void rotate_groups_shared(float* x, int n_groups, int tid, int n_threads) {
  const int n = n_groups * block_values;
  for (int i = tid; i < n; i += n_threads) {
    const int j = i & (block_values - 1);
    x[i] *= Inverse ? rotation_s2(j) : rotation_s1(j);
  }
  for (int h = 1; h < block_values; h <<= 1) {
    platform::sync_threads();
    for (int p = tid; p < n / 2; p += n_threads) {
      const int g = p / (block_values / 2), q = p % (block_values / 2);
      const int j = g * block_values + (q / h) * 2 * h + (q % h);
      const float a = x[j], b = x[j + h];
      x[j] = a + b;
      x[j + h] = a - b;
    }
  }
  platform::sync_threads();
  for (int i = tid; i < n; i += n_threads) {
    const int j = i & (block_values - 1);
    x[i] = (x[i] * rotation_scale) * (Inverse ? rotation_s1(j) : rotation_s2(j));
  }
  platform::sync_threads();
}

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
