// What the prefill kernels (TILE and MMA: the fragment and warpgroup kernels) share: their
// arguments (prefill_args), which rows and keys a work-group serves (prefill_row_of,
// prefill_block_of, prefill_work_group_of, prefill_key_tiles), the causal window and the mask's
// visible ends (prefill_row_window_end), the row-wise Q load and output store, the grid and its
// launch (launch_prefill_grid), and the key-split merge (prefill_merge_kernel).
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/attention/kernel_args.hpp"
#include "turbo3/attention/params.hpp"
#include "turbo3/attention/rotate_smem.hpp"
#include "turbo3/kv/loaders.hpp"
#include "turbo3/platform/arch.hpp"
#include "turbo3/platform/device.hpp"
#include "turbo3/platform/device_state.hpp"
#include "turbo3/status.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

// ---- arguments -----------------------------------------------------------------------------------

// How a prefill call's rows ((query, query head) pairs) fall to work-groups of `rows` rows: the
// query heads of a GQA group a work-group stacks, the groups of them, the queries per work-group
// and the query tiles. One work-group per query tile, KV head and head group (and key split).
struct prefill_grid_shape {
  int64_t heads_per_block, head_groups, ncols, q_tiles;
  int64_t blocks_per_sequence(int64_t n_head_kv) const { return q_tiles * n_head_kv * head_groups; }
};
inline prefill_grid_shape prefill_grid_of(const attention_params& p, int64_t rows) {
  prefill_grid_shape g{};
  const int64_t gqa = p.n_head() / p.n_head_kv();
  g.heads_per_block = gqa < rows ? gqa : rows;
  g.head_groups = (gqa + g.heads_per_block - 1) / g.heads_per_block;
  g.ncols = rows / g.heads_per_block;
  g.q_tiles = (p.n_q() + g.ncols - 1) / g.ncols;
  return g;
}

struct prefill_args : attention_views {
  int heads_per_block;          // query heads per work-group (min(gqa, rows))
  int head_groups;  // ceil(gqa / heads_per_block)
  int ncols;        // queries per work-group (rows / heads_per_block)
  int q_tiles;      // ceil(n_q / ncols)
  // Split over the keys (the MMA kernels): each work-group of a query tile takes one of kv_splits
  // equal runs of its key tiles and stores unnormalized partial rows (prefill_partial_row) that
  // the merge kernel combines; 1: no split, the work-group stores its rows itself.
  int kv_splits;
  float* partial;   // kv_splits > 1: [seq][head][query][split][D_v + 8] floats
};

// The TILE arguments of a call. k_was / v_was: the storage type of K and V as the caller gave
// them (they differ from p.k.type / p.v.type once materialized), which decides the rotations.
inline prefill_args make_prefill_args(const attention_params& p, int rows, data_type k_was, data_type v_was) {
  prefill_args a{};
  static_cast<attention_views&>(a) = make_views(p, k_was, v_was);
  const prefill_grid_shape g = prefill_grid_of(p, rows);
  a.heads_per_block = static_cast<int>(g.heads_per_block);
  a.head_groups = static_cast<int>(g.head_groups);
  a.ncols = static_cast<int>(g.ncols);
  a.q_tiles = static_cast<int>(g.q_tiles);
  a.kv_splits = 1;
  a.partial = nullptr;
  return a;
}



// ---- rows, blocks, keys ------------------------------------------------------------------------------

struct prefill_row {
  int query;  // -1: padding row
  int head;
};

TURBO3_DEVICE TURBO3_FORCEINLINE prefill_row prefill_row_of(const prefill_args& a, int r, int kv_head, int head_group, int q_tile) {
  const int c = r / a.heads_per_block, g = head_group * a.heads_per_block + r % a.heads_per_block;
  const int i = q_tile * a.ncols + c;
  const bool active = c < a.ncols && i < a.n_q && g < a.gqa;
  return {active ? i : -1, kv_head * a.gqa + g};
}

// What a prefill work-group (TILE or MMA: the grid of launch_prefill_grid) serves. Blocks are
// numbered query tile by query tile, the longest causal tiles first, every KV head and head group of
// one query tile next to each other, so the longest work-groups of all heads start first and the
// short ones fill in at the end. (Numbered head by head, the last heads' long tiles started last
// and ran on alone: a schedule 1.5x / 1.2x longer at pp2048 / pp4096, D = 256, 8 KV heads, 132 SMs.)
// The key splits of one work-group's rows are neighbours too, so they start together.
struct prefill_block {
  int q_tile, kv_head, head_group, seq, split;
};
TURBO3_DEVICE TURBO3_FORCEINLINE prefill_block prefill_block_of(const prefill_args& a) {
  const int heads = a.n_head_kv * a.head_groups;
  const int block = static_cast<int>(blockIdx.x);
  const int i = block / a.kv_splits, h = i % heads;
  return {a.q_tiles - 1 - i / heads, h / a.head_groups, h % a.head_groups, static_cast<int>(blockIdx.y),
          block % a.kv_splits};
}

// The key tiles [begin, end) of split `split` among a work-group's tiles of `keys` keys below
// kv_end: kv_splits runs whose lengths differ by at most one tile.
struct key_tile_range {
  int begin, end;
};
TURBO3_DEVICE TURBO3_FORCEINLINE key_tile_range prefill_key_tiles(const prefill_args& a, int kv_end, int keys, int split) {
  const int64_t n = (kv_end + keys - 1) / keys;
  return {static_cast<int>(n * split / a.kv_splits), static_cast<int>(n * (split + 1) / a.kv_splits)};
}

// The partial row of (query, head, seq) for key split `split`: D_v unnormalized values in natural
// order (rotated when V is turbo3), then the row's running maximum (base 2) and sum.
TURBO3_HD constexpr int prefill_partial_pitch(int d) { return d + 8; }  // 16-byte aligned rows
TURBO3_DEVICE TURBO3_FORCEINLINE float* prefill_partial_row(const prefill_args& a, int d, const prefill_row& row, int seq,
                                                           int split) {
  const int64_t r = (static_cast<int64_t>(seq) * a.n_head + row.head) * a.n_q + row.query;
  return a.partial + (r * a.kv_splits + split) * prefill_partial_pitch(d);
}

// The keys a work-group of query tile q_tile can see: with causal, none past its last query's
// diagonal.
TURBO3_DEVICE TURBO3_FORCEINLINE int prefill_kv_end(const prefill_args& a, int q_tile) {
  if (!a.causal) return a.n_kv;
  const int last_query = min(a.n_q - 1, q_tile * a.ncols + a.ncols - 1);
  return max(0, min(a.n_kv, last_query + a.n_kv - a.n_q + 1));
}

// A row's window end before the mask: its causal diagonal, within the work-group's kv_end.
TURBO3_DEVICE TURBO3_FORCEINLINE int prefill_window_end(const prefill_args& a, const prefill_row& row, int kv_end) {
  return a.causal ? min(kv_end, row.query + a.n_kv - a.n_q + 1) : kv_end;
}

// What every prefill kernel works out first: its block, the keys it can see before the mask
// (prefill_kv_end) and key 0 of its KV head's K and V rows in its sequence. The block (b:
// prefill_block_of) is an argument because the kernels set up their tables (lut_for) between the
// two, an order their generated code depends on.
struct prefill_work_group : prefill_block {
  int kv_end;
  const char* k_head;
  const char* v_head;
};
TURBO3_DEVICE TURBO3_FORCEINLINE prefill_work_group prefill_work_group_of(const prefill_args& a,
                                                                          const prefill_block& b) {
  return {b, prefill_kv_end(a, b.q_tile), a.k + b.kv_head * a.k_nb2 + b.seq * a.k_nb3,
          a.v + b.kv_head * a.v_nb2 + b.seq * a.v_nb3};
}

// A row's output factor from its running maximum m and sum l (base 2): 1 / (sum + sink term),
// scaled to the common maximum; 0 for a row that saw no key (sink or not).
TURBO3_DEVICE TURBO3_FORCEINLINE float prefill_row_factor(const prefill_args& a, const prefill_row& row, float m, float l) {
  if (m == -INFINITY) return 0.0f;
  const float sink = (a.sinks && row.query >= 0) ? a.sinks[row.head] * log2e : -INFINITY;
  const float m_all = fmaxf(m, sink);
  const float keep = platform::exp2_fast(m - m_all);
  const float denom = l * keep + (sink == -INFINITY ? 0.0f : platform::exp2_fast(sink - m_all));
  return keep / denom;
}

// The mask row of a (query, head) row; a.mask must be set and row.query >= 0.
TURBO3_DEVICE TURBO3_FORCEINLINE const platform::half* mask_row_of(const prefill_args& a, const prefill_row& row, int seq) {
  return reinterpret_cast<const platform::half*>(a.mask + row.query * a.mask_nb1 + (row.head % a.mask_ne2) * a.mask_nb2 +
                                                 (seq % a.mask_ne3) * a.mask_nb3);
}

TURBO3_DEVICE TURBO3_FORCEINLINE int warp_max_int(int v) {
  for (int o = platform::warp_size / 2; o > 0; o /= 2) v = max(v, platform::shfl_xor(v, o));
  return v;
}

// An upper bound on the keys a mask row shows below limit: 1 + the last key j < limit whose value
// is not -inf, rounded up to the end of its 8-key run (0: none). A whole warp reads the row, in
// 16-byte loads from its first 16-byte boundary on. The kernels take it as each row's window end,
// so key tiles a mask hides entirely (ggml's causal prefill mask: everything past the diagonal)
// are never loaded or multiplied; the mask itself still applies to the keys before it.
TURBO3_DEVICE TURBO3_FORCEINLINE int mask_row_visible_end(const platform::half* row, int limit, int lane) {
  constexpr uint32_t neg_inf2 = 0xfc00fc00u;  // two f16 -inf
  const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
  const int lead = min(limit, static_cast<int>(((16 - (reinterpret_cast<uintptr_t>(h) & 15)) & 15) / 2));
  int end = 0;
  if (lane < lead && h[lane] != 0xfc00u) end = lane + 1;
  const int n_vec = (limit - lead) / 8;
  const uint4* v = reinterpret_cast<const uint4*>(h + lead);
#pragma unroll 4
  for (int k = lane; k < n_vec; k += platform::warp_size) {
    const uint4 w = v[k];
    if (((w.x ^ neg_inf2) | (w.y ^ neg_inf2) | (w.z ^ neg_inf2) | (w.w ^ neg_inf2)) != 0u) end = lead + 8 * k + 8;
  }
  const int j = lead + 8 * n_vec + lane;
  if (j < limit && h[j] != 0xfc00u) end = max(end, j + 1);
  return warp_max_int(end);
}

// Where the call has a mask: each row's visible end (mask_row_visible_end below its window end)
// into row_end_s [rows], one warp per mask row (rows that share one, heads of a query over a
// broadcast mask, read it once); returns the largest (the work-group's key end) to every thread.
// window_end(row): the end without the mask. Synchronizes.
template <int ROWS, int THREADS, class WindowEnd>
TURBO3_DEVICE int mask_visible_ends(const prefill_args& a, int kv_head, int head_group, int q_tile, int seq, int tid,
                                    int* row_end_s, WindowEnd window_end) {
  constexpr int ws = platform::warp_size, warps = THREADS / ws;
  const int warp = tid / ws, lane = tid % ws;
  const int share = a.mask_ne2 == 1 ? a.heads_per_block : 1;  // consecutive rows reading one mask row
  for (int r = warp * share; r < ROWS; r += warps * share) {
    const prefill_row row = prefill_row_of(a, r, kv_head, head_group, q_tile);
    const int end = row.query < 0 ? 0 : mask_row_visible_end(mask_row_of(a, row, seq), window_end(row), lane);
    if (lane == 0) row_end_s[r] = end;
  }
  platform::sync_threads();
  int wg_end = 0;
  for (int r = lane * share; r < ROWS; r += ws * share) wg_end = max(wg_end, row_end_s[r]);
  return warp_max_int(wg_end);
}
// A row's entry in mask_visible_ends' row_end_s.
TURBO3_DEVICE TURBO3_FORCEINLINE int mask_visible_end_of(const prefill_args& a, const int* row_end_s, int r) {
  const int share = a.mask_ne2 == 1 ? a.heads_per_block : 1;
  return row_end_s[r - r % share];
}

// Row r's window end: its causal end within kv_end, and where the call has a mask, its visible
// end (row_end_s of mask_visible_ends).
TURBO3_DEVICE TURBO3_FORCEINLINE int prefill_row_window_end(const prefill_args& a, const prefill_row& row, int r,
                                                            int kv_end, const int* row_end_s) {
  return a.mask ? min(prefill_window_end(a, row, kv_end), mask_visible_end_of(a, row_end_s, r))
                : prefill_window_end(a, row, kv_end);
}

// Row-wise Q load and output store of a TILE or MMA work-group. A warp takes whole rows: where a
// row's data lives (a division by the heads per work-group) is worked out once per row, not per
// element, the lanes touch consecutive dimensions, and each lane issues all of its loads of a row
// before it stores any.

// Q rows into dst [ROWS][ld] (float32), prescaled; padding rows become zeros.
template <int D, int ROWS, int THREADS>
TURBO3_DEVICE TURBO3_FORCEINLINE void prefill_load_q(const prefill_args& a, float* dst, int ld, int kv_head, int head_group,
                                                  int q_tile, int seq, int tid) {
  constexpr int ws = platform::warp_size, warps = THREADS / ws, per_lane = (D + ws - 1) / ws;
  const int warp = tid / ws, lane = tid % ws;
  for (int r = warp; r < ROWS; r += warps) {
    const prefill_row row = prefill_row_of(a, r, kv_head, head_group, q_tile);
    float v[per_lane];
    TURBO3_UNROLL
    for (int i = 0; i < per_lane; ++i) v[i] = 0.0f;
    if (row.query >= 0) {
      const char* src = a.q + row.query * a.q_nb1 + row.head * a.q_nb2 + seq * a.q_nb3;
      if (a.q_f16) {
        TURBO3_UNROLL
        for (int i = 0; i < per_lane; ++i)
          if (D % ws == 0 || lane + i * ws < D)
            v[i] = platform::half_to_float(reinterpret_cast<const platform::half*>(src)[lane + i * ws]);
      } else {
        TURBO3_UNROLL
        for (int i = 0; i < per_lane; ++i)
          if (D % ws == 0 || lane + i * ws < D) v[i] = reinterpret_cast<const float*>(src)[lane + i * ws];
      }
    }
    TURBO3_UNROLL
    for (int i = 0; i < per_lane; ++i)
      if (D % ws == 0 || lane + i * ws < D) dst[r * ld + lane + i * ws] = v[i] * a.q_prescale;
  }
}

// Output rows from src [ROWS][ld] (float32, final values) to the caller's out; padding rows skipped.
template <int D, int ROWS, int THREADS>
TURBO3_DEVICE TURBO3_FORCEINLINE void prefill_store_out(const prefill_args& a, const float* src, int ld, int kv_head,
                                                     int head_group, int q_tile, int seq, int tid) {
  constexpr int ws = platform::warp_size, warps = THREADS / ws, per_lane = (D + ws - 1) / ws;
  const int warp = tid / ws, lane = tid % ws;
  for (int r = warp; r < ROWS; r += warps) {
    const prefill_row row = prefill_row_of(a, r, kv_head, head_group, q_tile);
    if (row.query < 0) continue;
    char* dst = output_row(a, row.query, row.head, seq);
    TURBO3_UNROLL
    for (int i = 0; i < per_lane; ++i) {
      const int d = lane + i * ws;
      if (D % ws != 0 && d >= D) continue;
      store_output(a, dst, d, src[r * ld + d]);
    }
  }
}

// Unnormalized output rows from src [ROWS][ld] (float32) to their partial rows of key split
// `split` (prefill_partial_row); padding rows skipped. The rows' maxima and sums are stored apart.
template <int D, int ROWS, int THREADS>
TURBO3_DEVICE TURBO3_FORCEINLINE void prefill_store_partial_rows(const prefill_args& a, const float* src, int ld,
                                                                int kv_head, int head_group, int q_tile, int seq,
                                                                int split, int tid) {
  constexpr int ws = platform::warp_size, warps = THREADS / ws;
  const int warp = tid / ws, lane = tid % ws;
  for (int r = warp; r < ROWS; r += warps) {
    const prefill_row row = prefill_row_of(a, r, kv_head, head_group, q_tile);
    if (row.query < 0) continue;
    float* const dst = prefill_partial_row(a, D, row, seq, split);
    for (int d = lane; d < D; d += ws) dst[d] = src[r * ld + d];
  }
}



// Maximum and sum over `width` neighbouring lanes (a power of two): the lanes that share a row.
TURBO3_DEVICE TURBO3_FORCEINLINE float prefill_group_max(float v, int width) {
  for (int o = width / 2; o > 0; o /= 2) v = fmaxf(v, platform::shfl_xor(v, o, width));
  return v;
}
TURBO3_DEVICE TURBO3_FORCEINLINE float prefill_group_sum(float v, int width) {
  for (int o = width / 2; o > 0; o /= 2) v += platform::shfl_xor(v, o, width);
  return v;
}



// ---- host side: support, grid, launch -------------------------------------------------------------

// Query rows per work-group of the smallest prefill configuration: TILE takes 16 to 64, MMA 16 per
// warp, the warpgroup kernels 64 or more. Fewer rows per work-group give more work-groups, so a
// grid that fits with this many fits with every configuration.
inline constexpr int prefill_min_rows = 16;

// Whether a prefill grid (launch_prefill_grid: query tiles x KV heads x head groups, by
// sequences) fits the launch limits (x < 2^31, y <= 65535) with prefill_min_rows rows per
// work-group.
inline bool prefill_grid_fits(const attention_params& p) {
  return p.n_seq() <= 65535 && prefill_grid_of(p, prefill_min_rows).blocks_per_sequence(p.n_head_kv()) <= INT32_MAX;
}



// A prefill kernel (TILE or MMA) over its grid: (query tiles x KV heads x head groups x key splits) x sequences
// (prefill_block_of), its shared-memory limit raised on its first launch on `device` (the
// stream's; smem_bytes: the kernel's one size). A refused raise is not kept: runtime_error now, and
// the next call tries again.
template <auto Kernel>
status launch_prefill_grid(const prefill_args& a, int threads, size_t smem_bytes, int device, hipStream_t stream) {
  if (smem_bytes > 48 * 1024) {
    static platform::per_device_value limit_raised;
    int raised = 0;
    const bool ok = limit_raised.get(device, raised, [&](int& yes) {
      const platform::device_guard on_device(device);
      yes = on_device.ok() && platform::raise_smem_limit(Kernel, smem_bytes) ? 1 : 0;
      return yes == 1;
    });
    if (!ok) return status::runtime_error;
  }
  const platform::error_scope errors;
  const dim3 grid(static_cast<unsigned>(a.q_tiles * a.n_head_kv * a.head_groups * a.kv_splits),
                  static_cast<unsigned>(a.n_seq));
  Kernel<<<grid, threads, smem_bytes, stream>>>(a);
  return errors.launches_ok() ? status::ok : status::runtime_error;
}

// ---- key splits: the merge --------------------------------------------------------------------------
// Splits of one work-group's keys (prefill_args::kv_splits) past which a call's partial rows cost
// more than the parallelism they buy; and the fewest key tiles a split takes.
inline constexpr int prefill_max_kv_splits = 64;
inline constexpr int prefill_min_split_tiles = 4;
inline constexpr int prefill_merge_threads = 128;

// Workspace of a split call: its partial rows, from the workspace's first 16-byte boundary.
inline size_t prefill_partial_bytes(const attention_params& p, int kv_splits) {
  if (kv_splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(p.n_seq()) * static_cast<size_t>(p.n_head()) * static_cast<size_t>(p.n_q());
  return 15 + rows * static_cast<size_t>(kv_splits) * prefill_partial_pitch(static_cast<int>(p.head_dim_v())) *
                  sizeof(float);
}

// Merges the key splits of each output row: 32 lanes per row (rows = seq, head, query in the
// partials' order), lane l holding values 4 l .. 4 l + 3 of each 128-value group: the splits'
// weights from their maxima, the sink, normalization, un-rotation (rotate_group_warp32, no shared
// memory for the values) and the store in the caller's layout.
template <int D>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(prefill_merge_threads) prefill_merge_kernel(prefill_args a) {
  constexpr int row_lanes = 32, rows_per_block = prefill_merge_threads / row_lanes, groups = D / block_values;
  static_assert(D % block_values == 0, "whole 128-value groups");
  __shared__ float weight_s[rows_per_block][prefill_max_kv_splits];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % row_lanes, slot = tid / row_lanes;
  const int64_t rows = static_cast<int64_t>(a.n_seq) * a.n_head * a.n_q;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * rows_per_block + slot;
  const bool active = r < rows;
  const int64_t rr = active ? r : 0;
  const int query = static_cast<int>(rr % a.n_q), head = static_cast<int>(rr / a.n_q % a.n_head);
  const int seq = static_cast<int>(rr / a.n_q / a.n_head);
  const int n = a.kv_splits;
  constexpr int pitch = prefill_partial_pitch(D);
  const float* const first = a.partial + rr * n * pitch;
  auto group_max = [](float v) {
    for (int o = row_lanes / 2; o > 0; o /= 2) v = fmaxf(v, platform::shfl_xor(v, o));
    return v;
  };
  auto group_sum = [](float v) {
    for (int o = row_lanes / 2; o > 0; o /= 2) v += platform::shfl_xor(v, o);
    return v;
  };
  float m = -INFINITY;
  for (int s = lane; s < n; s += row_lanes) m = fmaxf(m, first[s * pitch + D]);
  m = group_max(m);
  const float sink = a.sinks && active ? a.sinks[head] * log2e : -INFINITY;
  const float m_all = fmaxf(m, sink);
  float l = 0.0f;
  for (int s = lane; s < n; s += row_lanes) {
    const float ms = first[s * pitch + D];
    const float w = ms == -INFINITY ? 0.0f : platform::exp2_fast(ms - m_all);
    weight_s[slot][s] = w;
    l += w * first[s * pitch + D + 1];
  }
  l = group_sum(l);
  const float sum = l + (sink != -INFINITY && m_all != -INFINITY ? platform::exp2_fast(sink - m_all) : 0.0f);
  // A row that saw no key is 0, sink or not (prefill_row_factor).
  const float inv = m == -INFINITY || !(sum > 0.0f) ? 0.0f : 1.0f / sum;
  platform::sync_threads();  // the weights
  float u[groups][4];
  TURBO3_UNROLL
  for (int g = 0; g < groups; ++g)
    TURBO3_UNROLL
    for (int e = 0; e < 4; ++e) u[g][e] = 0.0f;
  for (int s = 0; s < n; ++s) {
    const float w = weight_s[slot][s];
    TURBO3_UNROLL
    for (int g = 0; g < groups; ++g) {
      const float4 v = *reinterpret_cast<const float4*>(first + s * pitch + g * block_values + 4 * lane);
      u[g][0] += w * v.x, u[g][1] += w * v.y, u[g][2] += w * v.z, u[g][3] += w * v.w;
    }
  }
  TURBO3_UNROLL
  for (int g = 0; g < groups; ++g) {
    TURBO3_UNROLL
    for (int e = 0; e < 4; ++e) u[g][e] *= inv;
    if (a.unrotate_out) rotate_group_warp32<true>(u[g], lane);
  }
  if (!active) return;
  char* const out = output_row(a, query, head, seq);
  TURBO3_UNROLL
  for (int g = 0; g < groups; ++g)
    TURBO3_UNROLL
    for (int e = 0; e < 4; ++e) store_output(a, out, g * block_values + 4 * lane + e, u[g][e]);
}

// The merge of a split call (a.kv_splits > 1), after its prefill kernel on the same stream.
inline status launch_prefill_merge(const prefill_args& a, int d_v, hipStream_t stream) {
  const int64_t rows = static_cast<int64_t>(a.n_seq) * a.n_head * a.n_q;
  constexpr int rows_per_block = prefill_merge_threads / 32;
  const dim3 grid(static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block));
  const platform::error_scope errors;
  if (d_v == 128) prefill_merge_kernel<128><<<grid, prefill_merge_threads, 0, stream>>>(a);
  else if (d_v == 256) prefill_merge_kernel<256><<<grid, prefill_merge_threads, 0, stream>>>(a);
  else return status::unsupported;
  return errors.launches_ok() ? status::ok : status::runtime_error;
}

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
