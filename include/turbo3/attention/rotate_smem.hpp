// The rotation of turbo3-format.md §3 applied by a whole work-group to rows held in shared
// memory (every thread must call it; it synchronizes internally). Same operations in the same
// order as the host rotation: signs, the unnormalized butterfly stages h = 1, 2, ..., 64, then
// scale and signs; so the results are those of the host code, bit for bit.
//
// Two passes with one barrier each, in registers: a 128-value group splits into 8 runs of 16
// consecutive values (stages h = 1..8 stay inside a run: one thread per run), then into 16
// columns of 8 values 16 apart (stages h = 16..64 stay inside a column: one thread per column).
// ROWS_FIRST (rows 4 mod 32 words apart, as the prefill kernels pad them; whole octets of rows):
// neighbouring threads take the same run of neighbouring rows, so the 16-byte reads of 8 threads
// fall on 32 distinct banks, where the runs of one group (16 words apart) fall on two sets of four;
// and the two half-warps of the column pass take rows 4 apart (16 banks), not the two groups of
// one row (the same banks).
// A butterfly stage per barrier, with its index arithmetic, cost more than the attention itself
// at short depth.
#pragma once

#include <cstdint>

#include "turbo3/format/rotation.hpp"
#include "turbo3/platform/device.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

// v times the sign of bit `bit` of `bits` (set: -1); exact, as the host's multiply by -1.0f is.
TURBO3_DEVICE TURBO3_FORCEINLINE float apply_sign(float v, uint32_t bits, int bit) {
  return platform::bits_to_float(platform::float_to_bits(v) ^ (((bits >> bit) & 1u) << 31));
}

// Rotates GROUPS_PER_ROW 128-value groups in each of n_rows rows, rows `row_stride` floats apart:
// forward (R) or inverse (R^T). x and row_stride keep every group 16-byte aligned.
template <bool Inverse, int GROUPS_PER_ROW, bool ROWS_FIRST = true>
TURBO3_DEVICE void rotate_rows_shared(float* x, int n_rows, int row_stride, int tid, int n_threads) {
  static_assert(GROUPS_PER_ROW >= 1, "rows of whole 128-value groups");
  constexpr int runs = block_values / 16, columns = 16, run_values = 16, column_values = block_values / 16;
  const int n_groups = n_rows * GROUPS_PER_ROW;
  const bool rows_first = ROWS_FIRST && n_rows % 8 == 0;  // the column order takes rows in octets
  auto group_at = [&](int g) { return x + (g / GROUPS_PER_ROW) * row_stride + (g % GROUPS_PER_ROW) * block_values; };
  auto first_word = [](int w) { return Inverse ? rotation_s2_word(w) : rotation_s1_word(w); };
  auto last_word = [](int w) { return Inverse ? rotation_s1_word(w) : rotation_s2_word(w); };

  // Runs: values 16r .. 16r+15 of a group; first signs, stages h = 1, 2, 4, 8. Item i: row i % n_rows,
  // then group of the row, then run (ROWS_FIRST); else run i % runs of group i / runs.
  for (int i = tid; i < n_groups * runs; i += n_threads) {
    const int row = i % n_rows, rest = i / n_rows;
    const int r = rows_first ? rest / GROUPS_PER_ROW : i % runs;
    const int g = rows_first ? row * GROUPS_PER_ROW + rest % GROUPS_PER_ROW : i / runs;
    float4* p = reinterpret_cast<float4*>(group_at(g) + run_values * r);
    float u[run_values];
    TURBO3_UNROLL
    for (int k = 0; k < run_values / 4; ++k) {
      const float4 v = p[k];
      u[4 * k] = v.x, u[4 * k + 1] = v.y, u[4 * k + 2] = v.z, u[4 * k + 3] = v.w;
    }
    const uint32_t signs = first_word(r / 2) >> (16 * (r % 2));
    TURBO3_UNROLL
    for (int e = 0; e < run_values; ++e) u[e] = apply_sign(u[e], signs, e);
    TURBO3_UNROLL
    for (int h = 1; h < run_values; h *= 2)
      TURBO3_UNROLL
      for (int j = 0; j < run_values; ++j)
        if ((j & h) == 0) {
          const float a = u[j], b = u[j + h];
          u[j] = a + b;
          u[j + h] = a - b;
        }
    TURBO3_UNROLL
    for (int k = 0; k < run_values / 4; ++k) p[k] = make_float4(u[4 * k], u[4 * k + 1], u[4 * k + 2], u[4 * k + 3]);
  }
  platform::sync_threads();

  // Columns: values c, c+16, ..., c+112 of a group; stages h = 16, 32, 64, then scale and signs.
  for (int i = tid; i < n_groups * columns; i += n_threads) {
    const int c = i % columns, gi = i / columns;
    // ROWS_FIRST: per 8 rows and group of a row, items gi = 0..7 take rows 0, 4, 1, 5, 2, 6, 3, 7.
    const int oct = gi % 8, rest = gi / 8;
    const int g = rows_first ? (8 * (rest / GROUPS_PER_ROW) + 4 * (oct % 2) + oct / 2) * GROUPS_PER_ROW +
                                   rest % GROUPS_PER_ROW
                             : gi;
    float* p = group_at(g) + c;
    float u[column_values];
    TURBO3_UNROLL
    for (int k = 0; k < column_values; ++k) u[k] = p[columns * k];
    TURBO3_UNROLL
    for (int h = 1; h < column_values; h *= 2)
      TURBO3_UNROLL
      for (int k = 0; k < column_values; ++k)
        if ((k & h) == 0) {
          const float a = u[k], b = u[k + h];
          u[k] = a + b;
          u[k + h] = a - b;
        }
    // Value c + 16k is bit c + 16 (k % 2) of sign word k / 2.
    TURBO3_UNROLL
    for (int k = 0; k < column_values; ++k)
      p[columns * k] = apply_sign(u[k] * rotation_scale, last_word(k / 2), c + 16 * (k % 2));
  }
  platform::sync_threads();
}

// Rotates n_groups consecutive 128-value groups of x (16-byte aligned).
template <bool Inverse>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotate_groups_shared(float* x, int n_groups, int tid, int n_threads) {
  rotate_rows_shared<Inverse, 1, false>(x, n_groups, block_values, tid, n_threads);
}

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
