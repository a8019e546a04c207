// The rotation of docs/format.md §3 applied by a whole work-group to rows held in shared
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
// at short depth. rotate_runs and rotate_columns take the data's source and destination from the
// caller, so that a kernel can fuse the first pass with its global load or the second with its
// store (mma.hpp) and the rows cross shared memory fewer times.
#pragma once

#include <cstdint>

#include "turbo3/format/rotation.hpp"
#include "turbo3/platform/arch.hpp"
#include "turbo3/platform/device.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

// v times the sign of bit `bit` of `bits` (set: -1); exact, as the host's multiply by -1.0f is.
// The bit is moved straight to the sign position (one shift and one mask; `bit` is a constant once
// unrolled).
TURBO3_DEVICE TURBO3_FORCEINLINE float apply_sign(float v, uint32_t bits, int bit) {
  return platform::bits_to_float(platform::float_to_bits(v) ^ ((bits << (31 - bit)) & 0x80000000u));
}

inline constexpr int rotation_runs = block_values / 16;      // runs of 16 consecutive values per group
inline constexpr int rotation_run_values = 16;
inline constexpr int rotation_columns = 16;                   // columns of 8 values 16 apart per group
inline constexpr int rotation_column_values = block_values / 16;

// The unnormalized butterfly stages h = 1, 2, ..., N / 2 (those below H_END) over one thread's N
// values, in the order of the host rotation: (u[j], u[j + h]) -> (u[j] + u[j + h], u[j] - u[j + h])
// for j % (2h) < h.
template <int N, int H_END = N>
TURBO3_DEVICE TURBO3_FORCEINLINE void butterflies(float (&u)[N]) {
  TURBO3_UNROLL
  for (int h = 1; h < H_END; h *= 2)
    TURBO3_UNROLL
    for (int j = 0; j < N; ++j)
      if ((j & h) == 0) {
        const float a = u[j], b = u[j + h];
        u[j] = a + b;
        u[j + h] = a - b;
      }
}

// Run r of a group (values 16r .. 16r+15) in u: first signs, stages h = 1, 2, 4, 8.
template <bool Inverse>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotate_run(float (&u)[rotation_run_values], int r) {
  const uint32_t signs = (Inverse ? rotation_s2_word(r / 2) : rotation_s1_word(r / 2)) >> (16 * (r % 2));
  TURBO3_UNROLL
  for (int e = 0; e < rotation_run_values; ++e) u[e] = apply_sign(u[e], signs, e);
  butterflies(u);
}

// Column c of a group (values c, c+16, ..., c+112) in u, after every run's rotate_run: stages
// h = 16, 32, 64, then scale and last signs (value c + 16k is bit c + 16 (k % 2) of word k / 2).
template <bool Inverse>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotate_column(float (&u)[rotation_column_values], int c) {
  butterflies(u);  // on values 16 apart: the group's stages h = 16, 32, 64
  TURBO3_UNROLL
  for (int k = 0; k < rotation_column_values; ++k) {
    const uint32_t w = Inverse ? rotation_s1_word(k / 2) : rotation_s2_word(k / 2);
    u[k] = apply_sign(u[k] * rotation_scale, w, c + 16 * (k % 2));
  }
}

// N consecutive values of a row in memory (16-byte aligned: a run, or a whole group), or a column
// (values 16 apart), into a pass's registers and back.
template <int N>
TURBO3_DEVICE TURBO3_FORCEINLINE void load_consecutive(const float* p, float (&u)[N]) {
  static_assert(N % 4 == 0, "16-byte loads");
  TURBO3_UNROLL
  for (int k = 0; k < N / 4; ++k) {
    const float4 v = reinterpret_cast<const float4*>(p)[k];
    u[4 * k] = v.x, u[4 * k + 1] = v.y, u[4 * k + 2] = v.z, u[4 * k + 3] = v.w;
  }
}
template <int N>
TURBO3_DEVICE TURBO3_FORCEINLINE void store_consecutive(float* p, const float (&u)[N]) {
  static_assert(N % 4 == 0, "16-byte stores");
  TURBO3_UNROLL
  for (int k = 0; k < N / 4; ++k)
    reinterpret_cast<float4*>(p)[k] = make_float4(u[4 * k], u[4 * k + 1], u[4 * k + 2], u[4 * k + 3]);
}
TURBO3_DEVICE TURBO3_FORCEINLINE void load_column(const float* p, float (&u)[rotation_column_values]) {
  TURBO3_UNROLL
  for (int k = 0; k < rotation_column_values; ++k) u[k] = p[rotation_columns * k];
}
TURBO3_DEVICE TURBO3_FORCEINLINE void store_column(float* p, const float (&u)[rotation_column_values]) {
  TURBO3_UNROLL
  for (int k = 0; k < rotation_column_values; ++k) p[rotation_columns * k] = u[k];
}

// Which run or column a pass item is: group g (row g / GROUPS_PER_ROW, group g % GROUPS_PER_ROW of
// the row) and run or column index. rows_first: see the top of the file (needs n_rows % 8 == 0).
template <int GROUPS_PER_ROW>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotation_run_item(int i, int n_rows, bool rows_first, int& g, int& r) {
  const int row = i % n_rows, rest = i / n_rows;
  r = rows_first ? rest / GROUPS_PER_ROW : i % rotation_runs;
  g = rows_first ? row * GROUPS_PER_ROW + rest % GROUPS_PER_ROW : i / rotation_runs;
}
template <int GROUPS_PER_ROW>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotation_column_item(int i, bool rows_first, int& g, int& c) {
  c = i % rotation_columns;
  const int gi = i / rotation_columns;
  // rows_first: per 8 rows and group of a row, items gi = 0..7 take rows 0, 4, 1, 5, 2, 6, 3, 7.
  const int oct = gi % 8, rest = gi / 8;
  g = rows_first ? (8 * (rest / GROUPS_PER_ROW) + 4 * (oct % 2) + oct / 2) * GROUPS_PER_ROW + rest % GROUPS_PER_ROW
                 : gi;
}

// The two passes over n_rows rows of GROUPS_PER_ROW groups each, with the data's source and
// destination left to the caller, so that a kernel can fuse a pass with its global load or store
// (mma.hpp) and the work-group walks the items in the order above in every case. Runs:
// load(row, d, u) fills u with dimensions d .. d + 15 of the row, store(row, d, u) takes them
// rotated. Columns: load(row, d, u) fills u with dimensions d, d + 16, ..., d + 112 (d - d % 128 is
// the group's first dimension, d % 16 the column), store(row, d, u) takes them rotated. No barrier.
template <bool Inverse, int GROUPS_PER_ROW, class Load, class Store>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotate_runs(int n_rows, bool rows_first, int tid, int n_threads, Load load,
                                                  Store store) {
  static_assert(GROUPS_PER_ROW >= 1, "rows of whole 128-value groups");
  for (int i = tid; i < n_rows * GROUPS_PER_ROW * rotation_runs; i += n_threads) {
    int g, r;
    rotation_run_item<GROUPS_PER_ROW>(i, n_rows, rows_first, g, r);
    const int row = g / GROUPS_PER_ROW, d = (g % GROUPS_PER_ROW) * block_values + rotation_run_values * r;
    float u[rotation_run_values];
    load(row, d, u);
    rotate_run<Inverse>(u, r);
    store(row, d, u);
  }
}
template <bool Inverse, int GROUPS_PER_ROW, class Load, class Store>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotate_columns(int n_rows, bool rows_first, int tid, int n_threads, Load load,
                                                     Store store) {
  static_assert(GROUPS_PER_ROW >= 1, "rows of whole 128-value groups");
  for (int i = tid; i < n_rows * GROUPS_PER_ROW * rotation_columns; i += n_threads) {
    int g, c;
    rotation_column_item<GROUPS_PER_ROW>(i, rows_first, g, c);
    const int row = g / GROUPS_PER_ROW, d = (g % GROUPS_PER_ROW) * block_values + c;
    float u[rotation_column_values];
    load(row, d, u);
    rotate_column<Inverse>(u, c);
    store(row, d, u);
  }
}

// The first pass of rotate_rows_shared (every run of every group, in place), then a barrier: a caller
// that consumes the columns itself (rotate_columns) does the second.
template <bool Inverse, int GROUPS_PER_ROW, bool ROWS_FIRST = true>
TURBO3_DEVICE void rotate_runs_shared(float* x, int n_rows, int row_stride, int tid, int n_threads) {
  const bool rows_first = ROWS_FIRST && n_rows % 8 == 0;
  rotate_runs<Inverse, GROUPS_PER_ROW>(
      n_rows, rows_first, tid, n_threads,
      [&](int row, int d, float(&u)[rotation_run_values]) { load_consecutive(x + row * row_stride + d, u); },
      [&](int row, int d, const float(&u)[rotation_run_values]) { store_consecutive(x + row * row_stride + d, u); });
  platform::sync_threads();
}

// Rotates GROUPS_PER_ROW 128-value groups in each of n_rows rows, rows `row_stride` floats apart:
// forward (R) or inverse (R^T). x and row_stride keep every group 16-byte aligned.
template <bool Inverse, int GROUPS_PER_ROW, bool ROWS_FIRST = true>
TURBO3_DEVICE void rotate_rows_shared(float* x, int n_rows, int row_stride, int tid, int n_threads) {
  rotate_runs_shared<Inverse, GROUPS_PER_ROW, ROWS_FIRST>(x, n_rows, row_stride, tid, n_threads);
  const bool rows_first = ROWS_FIRST && n_rows % 8 == 0;  // the column order takes rows in octets
  rotate_columns<Inverse, GROUPS_PER_ROW>(
      n_rows, rows_first, tid, n_threads,
      [&](int row, int d, float(&u)[rotation_column_values]) { load_column(x + row * row_stride + d, u); },
      [&](int row, int d, const float(&u)[rotation_column_values]) { store_column(x + row * row_stride + d, u); });
  platform::sync_threads();
}

// One whole 128-value group in a thread's registers (forward: R, inverse: R^T). Every value's
// dimension is a compile-time constant, so the first signs fold into the first butterfly stage
// (operand negation) and the last ones into the scale (a multiply by -1/sqrt(128)): about eight
// instructions per value, where the two passes above also cross shared memory twice and extract
// each sign bit at run time. Bit for bit the host rotation (negation is exact, and
// (y * scale) * -1 == y * -scale). Holds the group in 128 registers.
template <bool Inverse>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotate_group_registers(float (&u)[block_values]) {
  TURBO3_UNROLL
  for (int e = 0; e < block_values; ++e)
    if (Inverse ? rotation_s2_negative(e) : rotation_s1_negative(e)) u[e] = -u[e];
  butterflies(u);
  TURBO3_UNROLL
  for (int e = 0; e < block_values; ++e)
    u[e] *= (Inverse ? rotation_s1_negative(e) : rotation_s2_negative(e)) ? -rotation_scale : rotation_scale;
}

// The same without the scale, for a caller that has multiplied the group by rotation_scale on its
// way in (a prescale it applies anyway): the last signs become operand negations of the last
// butterfly stage, so the rotation is the butterflies alone (the multiply pass above is an eighth
// of rotate_group_registers' instructions). Differs from the host rotation only in where the scale
// rounds (before the sums instead of after).
template <bool Inverse>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotate_group_registers_prescaled(float (&u)[block_values]) {
  constexpr int half = block_values / 2;
  TURBO3_UNROLL
  for (int e = 0; e < block_values; ++e)
    if (Inverse ? rotation_s2_negative(e) : rotation_s1_negative(e)) u[e] = -u[e];
  butterflies<block_values, half>(u);
  TURBO3_UNROLL
  for (int j = 0; j < half; ++j) {
    const float a = u[j], b = u[j + half];
    const bool neg_lo = Inverse ? rotation_s1_negative(j) : rotation_s2_negative(j);
    const bool neg_hi = Inverse ? rotation_s1_negative(j + half) : rotation_s2_negative(j + half);
    u[j] = neg_lo ? -a - b : a + b;
    u[j + half] = neg_hi ? b - a : a - b;
  }
}

// One 128-value group held by a warp of 32 lanes, values 4 * lane .. 4 * lane + 3 in u: the same
// operations in the same order as the host rotation (stages h = 1, 2 inside a lane, h = 4 .. 64
// across lanes by shuffles: the lane whose value is u[j + h] forms a - b as partner - own). No
// shared memory and no barrier, where rotate_rows_shared's two passes cross shared memory twice
// behind three barriers. Every lane of the warp must call it.
template <bool Inverse>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotate_group_warp32(float (&u)[4], int lane) {
  static_assert(block_values == 4 * 32, "four values per lane");
  auto word = [&](bool first) {  // the sign word holding values 4 * lane .. 4 * lane + 3
    const int w = lane / 8;
    const bool s1 = first != Inverse;
    const uint32_t w0 = s1 ? rotation_s1_word(0) : rotation_s2_word(0), w1 = s1 ? rotation_s1_word(1) : rotation_s2_word(1);
    const uint32_t w2 = s1 ? rotation_s1_word(2) : rotation_s2_word(2), w3 = s1 ? rotation_s1_word(3) : rotation_s2_word(3);
    return (w == 0 ? w0 : w == 1 ? w1 : w == 2 ? w2 : w3) >> (4 * (lane % 8));
  };
  const uint32_t first_signs = word(true), last_signs = word(false);
  TURBO3_UNROLL
  for (int m = 0; m < 4; ++m) u[m] = apply_sign(u[m], first_signs, m);
  butterflies(u);  // h = 1, 2
  TURBO3_UNROLL
  for (int mask = 1; mask < 32; mask *= 2) {  // h = 4 * mask: lanes mask apart
    const bool upper = (lane & mask) != 0;
    TURBO3_UNROLL
    for (int m = 0; m < 4; ++m) {
      const float other = platform::shfl_xor(u[m], mask);
      u[m] = upper ? other - u[m] : u[m] + other;
    }
  }
  TURBO3_UNROLL
  for (int m = 0; m < 4; ++m) u[m] = apply_sign(u[m] * rotation_scale, last_signs, m);
}

// Where a prefill kernel may hold a whole group per thread (rotate_whole_groups): on NVIDIA. The AMD
// builds (gfx11, gfx12, gfx942) of the MMA kernels and of TILE D = 128 took scratch memory with it.
inline constexpr bool whole_group_rotation_fits = platform::compiled_family == platform::arch_family::nvidia;

// The groups of n_rows rows of GROUPS_PER_ROW groups each, one whole group per thread
// (rotate_group_registers); neighbouring threads take neighbouring rows, so with rows 4 mod 32
// words apart the 16-byte accesses of 8 threads fall on 32 distinct banks. load(row, d, u) fills u
// with dimensions d .. d + 127 of the row, store(row, d, u) takes them rotated. No barrier.
// PRESCALED: load has multiplied the values by rotation_scale (rotate_group_registers_prescaled).
template <bool Inverse, int GROUPS_PER_ROW, bool PRESCALED = false, class Load, class Store>
TURBO3_DEVICE TURBO3_FORCEINLINE void rotate_whole_groups(int n_rows, int tid, int n_threads, Load load, Store store) {
  for (int i = tid; i < n_rows * GROUPS_PER_ROW; i += n_threads) {
    const int row = i % n_rows, d = (i / n_rows) * block_values;
    float u[block_values];
    load(row, d, u);
    if constexpr (PRESCALED) rotate_group_registers_prescaled<Inverse>(u);
    else rotate_group_registers<Inverse>(u);
    store(row, d, u);
  }
}

// Rotates GROUPS_PER_ROW 128-value groups in each of n_rows rows in place, rows `row_stride` floats
// apart (16-byte aligned groups), one whole group per thread, then synchronizes: rotate_rows_shared's
// result with fewer instructions, for kernels with 128 registers to spare (the prefill kernels).
template <bool Inverse, int GROUPS_PER_ROW>
TURBO3_DEVICE void rotate_groups_in_place(float* x, int n_rows, int row_stride, int tid, int n_threads) {
  rotate_whole_groups<Inverse, GROUPS_PER_ROW>(
      n_rows, tid, n_threads, [&](int row, int d, float(&u)[block_values]) { load_consecutive(x + row * row_stride + d, u); },
      [&](int row, int d, const float(&u)[block_values]) { store_consecutive(x + row * row_stride + d, u); });
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
