// The decode (VEC) family's entry point: which calls it takes (vec_family::supported), the plan of a
// call (rows per work-group, head and KV splits, the variant: make_vec_plan), its workspace and its
// launch: the kernel the plan names, then the combine kernel where the kernel does not merge its
// own splits. Dispatch goes from run-time head dim, types and rows to the template instantiations
// through with_vec_kernel, which the occupancy queries share with the launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "turbo3/attention/kernel_args.hpp"
#include "turbo3/attention/options.hpp"
#include "turbo3/attention/params.hpp"
#include "turbo3/attention/vec.hpp"
#include "turbo3/attention/vec_mma.hpp"
#include "turbo3/attention/vec_warp.hpp"
#include "turbo3/platform/device_state.hpp"
#include "turbo3/status.hpp"
#include "turbo3/types.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

// How a VEC call is laid out: rows per work-group, queries per work-group, head and KV splits.
struct vec_plan {
  int head_dim = 0;    // V's (the output's)
  int head_dim_k = 0;  // K's: head_dim but in the warp kernel's V-in-K form (vec_warp_v_in_k_dims)
  vec_variant variant = vec_variant::scalar;  // resolved: scalar, matrix or warp
  int rows = 0;          // padded rows per work-group (the kernels' ROWS)
  int ncols = 1;
  int head_splits = 1;
  int q_tiles = 1;
  int n_splits = 1;
  int tiles_per_split = 1;
  size_t partial_floats = 0;
  // Row sets of a kernel that merges its own splits and claims its keys at run time (the warp
  // variant), each with a split counter and a work counter; 0: the combine kernel merges.
  int counted_row_sets = 0;
  int warp_warps = 4;       // the warp variant's warps per work-group (vec_warp_warps)
  int warp_col_blocks = 2;  // the warp variant's value-side column blocks of 4 query rows (1: at most 4 rows)
  bool combine_splits = false;  // the warp variant's splits merged by the combine kernel (vec_warp_combines)
  unsigned* caller_counters = nullptr;  // launch_options::counters, where the kernel counts
};

// Workspace of a VEC call: the partials, from the workspace's first vec_partial_align boundary
// (an allocator need not align more; the workspace holds that slack), then, from the next 128-byte
// boundary after them, a line of counters per counted row set (vec_counter_stride words: the
// splits stored, then the key chunks claimed).
inline size_t vec_counters_offset_floats(const vec_plan& plan) {
  return (plan.partial_floats + vec_counter_stride - 1) / vec_counter_stride * vec_counter_stride;
}
inline int vec_counter_words(const vec_plan& plan) { return vec_counter_stride * plan.counted_row_sets; }
inline size_t vec_counter_bytes(const vec_plan& plan) { return static_cast<size_t>(vec_counter_words(plan)) * sizeof(unsigned); }
// Without caller-owned counters (persistent == false) the counters come after the partials.
inline size_t vec_workspace_bytes(const vec_plan& plan, bool persistent_counters = false) {
  return vec_partial_align - 1 + (plan.counted_row_sets > 0 && !persistent_counters
                                      ? vec_counters_offset_floats(plan) * sizeof(float) + vec_counter_bytes(plan)
                                      : plan.partial_floats * sizeof(float));
}

// ---- dispatch from run-time head dim, types and rows to the template instantiations ----------
// A kernel with its work-group size and dynamic shared memory in bytes (0: none).
template <auto Kernel, int Threads = vec_threads, int SmemBytes = 0>
struct kernel_constant {
  static constexpr auto value = Kernel;
  static constexpr int threads = Threads;
  static constexpr int smem_bytes = SmemBytes;
};

// The warp kernel of one shape, masked or not, as a kernel_constant passed to f. WITH_MASKED false:
// the shape has no masked kernel (vec_warp_wide), and a masked call gets none.
template <int D, int COL_BLOCKS, int WARPS, class KS, class VS, int DK = D, bool WITH_MASKED = true, class F>
void with_warp_kernel(bool masked, F& f) {
  using C = vec_warp_kernel_config<D, COL_BLOCKS, WARPS, KS, VS, DK, false>;
  using CM = vec_warp_kernel_config<D, COL_BLOCKS, WARPS, KS, VS, DK, true>;
  if (masked) {
    if constexpr (WITH_MASKED)
      f(kernel_constant<&vec_warp_kernel<D, true, COL_BLOCKS, WARPS, KS, VS, DK>, CM::threads, CM::smem_bytes>{});
  } else {
    f(kernel_constant<&vec_warp_kernel<D, false, COL_BLOCKS, WARPS, KS, VS, DK>, C::threads, C::smem_bytes>{});
  }
}

// The VEC kernel of a plan (head dim D, variant, rows) for the K/V types, as a kernel_constant
// passed to f: the launch and the occupancy query both come through here, so they cannot disagree.
// DK: K's head dim where it is not D (the warp kernel's V-in-K form: same-type turbo sides only).
template <int D, class F, int DK = D>
void with_vec_kernel(const vec_plan& plan, data_type k, data_type v, bool masked, F&& f,
                     std::integral_constant<int, DK> = {}) {
  using T3 = kv::turbo3_loader;
  using F16 = kv::f16_loader;
  if constexpr (DK != D) {
    if constexpr (platform::has_mma_m16n8k16 && vec_warp_v_in_k_dims(DK, D)) {
      if (plan.variant != vec_variant::warp || k != v || plan.warp_warps != 4) return;
      auto with_side = [&](auto side) {
        using S = decltype(side);
        static_assert(vec_warp_v_in_k_col_blocks == 2);
        if (plan.warp_col_blocks == 1) with_warp_kernel<D, 1, 4, S, S, DK>(masked, f);
        else if (plan.warp_col_blocks == 2) with_warp_kernel<D, 2, 4, S, S, DK>(masked, f);
      };
      if (k == data_type::turbo3) with_side(turbo3_warp_side{});
      else if (k == data_type::turbo2) with_side(turbo2_warp_side{});
      else if (k == data_type::turbo4) with_side(turbo4_warp_side{});
    }
    return;
  } else if constexpr (platform::has_mma_m16n8k16 && vec_warp_head_dim(D)) {
    if (plan.variant == vec_variant::warp && vec_warp_types(k, v)) {
      auto with_sides = [&](auto k_side, auto v_side) {
        using KS = decltype(k_side);
        using VS = decltype(v_side);
        constexpr int max_col_blocks = vec_warp_max_col_blocks(D, KS::type, VS::type, false);
        constexpr bool masked_wide = vec_warp_wide(D, KS::type, VS::type, true);
        if (plan.warp_col_blocks == 1) {
          if constexpr (D == 256 && vec_warp_deep_types(KS::type, VS::type)) {
            if (plan.warp_warps == vec_warp_deep_warps) return with_warp_kernel<D, 1, vec_warp_deep_warps, KS, VS>(masked, f);
          }
          with_warp_kernel<D, 1, 4, KS, VS>(masked, f);
        } else if (plan.warp_col_blocks == 2) {
          if constexpr (max_col_blocks >= 2) with_warp_kernel<D, 2, 4, KS, VS>(masked, f);
        } else if constexpr (max_col_blocks >= 4) {
          if (plan.warp_warps == vec_warp_wide_warps)
            with_warp_kernel<D, 4, vec_warp_wide_warps, KS, VS, D, masked_wide>(masked, f);
          else with_warp_kernel<D, 4, 4, KS, VS, D, masked_wide>(masked, f);
        }
      };
      using T3 = turbo3_warp_side;
      using T2 = turbo2_warp_side;
      using T4 = turbo4_warp_side;
      using Q8 = q8_0_warp_side;
      const data_type t3 = data_type::turbo3, t2 = data_type::turbo2, t4 = data_type::turbo4, q8 = data_type::q8_0;
      if (k == t3 && v == t3) with_sides(T3{}, T3{});
      else if (k == t2 && v == t2) with_sides(T2{}, T2{});
      else if (k == t3 && v == t2) with_sides(T3{}, T2{});
      else if (k == t2 && v == t3) with_sides(T2{}, T3{});
      else if (k == t4 && v == t4) with_sides(T4{}, T4{});
      else if (k == t3 && v == t4) with_sides(T3{}, T4{});
      else if (k == t4 && v == t3) with_sides(T4{}, T3{});
      else if (k == q8 && v == t3) with_sides(Q8{}, T3{});
      return;
    }
  }
  if constexpr (platform::has_mma_m16n8k16 && vec_mma_head_dim(D)) {
    if (plan.variant == vec_variant::matrix && has_tile_loader(k) && has_tile_loader(v)) {
      if (k == data_type::turbo3 && v == data_type::turbo3) f(kernel_constant<&vec_mma_kernel<D, T3, T3>>{});
      else if (k == data_type::turbo3) f(kernel_constant<&vec_mma_kernel<D, T3, F16>>{});
      else if (v == data_type::turbo3) f(kernel_constant<&vec_mma_kernel<D, F16, T3>>{});
      else f(kernel_constant<&vec_mma_kernel<D, F16, F16>>{});
      return;
    }
  }
  auto with_rows = [&](auto k_loader, auto v_loader) {
    using KL = decltype(k_loader);
    using VL = decltype(v_loader);
    switch (plan.rows) {
      case 1: f(kernel_constant<&vec_kernel<D, KL, VL, 1>>{}); break;
      case 2: f(kernel_constant<&vec_kernel<D, KL, VL, 2>>{}); break;
      case 4: f(kernel_constant<&vec_kernel<D, KL, VL, 4>>{}); break;
      case 8: f(kernel_constant<&vec_kernel<D, KL, VL, 8>>{}); break;
      default:
        if constexpr (vec_max_rows(D) >= 16) f(kernel_constant<&vec_kernel<D, KL, VL, 16>>{});
        break;
    }
  };
  // A turbo4, turbo2 or q8_0 side: one kernel per head dim and row count for all such pairs, the
  // types chosen at run time (kv::any_loader; docs/performance.md), D 128, 256 and 512 and rows 2,
  // 8 and 16 only (vec_any_rows). f16 and turbo3 pairs keep a kernel each.
  if (!has_tile_loader(k) || !has_tile_loader(v)) {
    if constexpr (D % block_values == 0) {
      using A = kv::any_loader;
      switch (plan.rows) {
        case 2: f(kernel_constant<&vec_kernel<D, A, A, 2>>{}); break;
        case 8: f(kernel_constant<&vec_kernel<D, A, A, 8>>{}); break;
        case 16:
          if constexpr (vec_max_rows(D) >= 16) f(kernel_constant<&vec_kernel<D, A, A, 16>>{});
          break;
        default: break;  // 1 and 4: make_vec_plan takes 2 and 8 instead
      }
    }
    return;
  }
  if constexpr (D % block_values == 0) {
    if (k == data_type::turbo3 && v == data_type::turbo3) return with_rows(T3{}, T3{});
    if (k == data_type::turbo3) return with_rows(T3{}, F16{});
    if (v == data_type::turbo3) return with_rows(F16{}, T3{});
  }
  with_rows(F16{}, F16{});
}

// f(std::integral_constant<int, D>{}, std::integral_constant<int, DK>{}) for the VEC head dims
// D = DK in {64, 128, 256, 512} and the V-in-K pair (vec_warp_v_in_k_dims); nothing for other
// head dims (vec_supported rejects those before any launch).
template <class F>
void with_vec_head_dims(const vec_plan& plan, F&& f) {
  auto same = [&](auto d) { f(d, d); };
  if (plan.head_dim_k != plan.head_dim) {
    if (vec_warp_v_in_k_dims(plan.head_dim_k, plan.head_dim))
      f(std::integral_constant<int, mla_head_dim_v>{}, std::integral_constant<int, mla_head_dim_k>{});
    return;
  }
  switch (plan.head_dim) {
    case 64: same(std::integral_constant<int, 64>{}); break;
    case 128: same(std::integral_constant<int, 128>{}); break;
    case 256: same(std::integral_constant<int, 256>{}); break;
    case 512: same(std::integral_constant<int, 512>{}); break;
    default: break;
  }
}

// Work-groups of a plan's kernel resident per multiprocessor of `device` (registers and shared
// memory decide it, and they differ between kernels and architectures: f16 at D = 256 fits 3 on an
// H200, D = 512 2), queried once per kernel and device. A kernel's dynamic shared memory is allowed
// first (raise_smem_limit, per device: the attribute applies to the current device only), whatever
// its size: the 48 KB a launch gets without it include the kernel's static shared memory, which
// put the warp kernel's 48 KB q8_0 ring (16 bytes static) past the limit.
// 0 where the device refuses the shared memory, so the planner never picks a kernel that cannot
// launch. A failed query is not kept: vec_target_blocks_per_sm this time, asked again next time.
// The queries run with `device` current (device_guard: no runtime call where it already is).
template <class K>
int resident_blocks_of(int device) {
  static platform::per_device_value resident;
  int n = 0;
  const bool known = resident.get(device, n, [&](int& blocks) {
    const platform::device_guard on_device(device);
    if (!on_device.ok()) return false;
    if (K::smem_bytes > 0 && !platform::raise_smem_limit(K::value, K::smem_bytes)) {
      blocks = 0;
      return true;
    }
    blocks = platform::resident_blocks(K::value, K::threads, K::smem_bytes);
    return blocks >= 0;
  });
  return known ? n : vec_target_blocks_per_sm;
}

inline int vec_resident_blocks(const vec_plan& plan, data_type k, data_type v, bool masked, int device) {
  int n = vec_target_blocks_per_sm;
  with_vec_head_dims(plan, [&](auto d, auto dk) {
    with_vec_kernel<decltype(d)::value>(
        plan, k, v, masked, [&](auto kernel) { n = resident_blocks_of<decltype(kernel)>(device); }, dk);
  });
  return n;
}

// How a VEC call's query rows fall to work-groups: the head splits of a GQA group, the heads and
// queries of one work-group, and the query tiles (GQA <= vec_max_gqa, vec_supported).
struct vec_row_layout {
  int head_splits = 1;
  int heads_per_block = 1;
  int ncols = 1;
  int64_t q_tiles = 1;
};
// Whether the warp kernel reads this call: its head dims and K/V pairs, on matrix instructions.
inline bool vec_warp_reads(const attention_params& p) {
  return platform::has_mma_m16n8k16 && vec_warp_head_dim(static_cast<int>(p.head_dim_v())) &&
         vec_warp_types(p.k.type, p.v.type);
}
// The most rows a work-group of the warp kernel takes for this call (vec_warp_reads).
inline int vec_warp_max_rows_of(const attention_params& p) {
  if (p.head_dim_k() != p.head_dim_v()) return 4 * vec_warp_v_in_k_col_blocks;  // the V-in-K form
  return vec_warp_max_rows(static_cast<int>(p.head_dim_v()), p.k.type, p.v.type, p.mask.data != nullptr);
}
// The rows a work-group of the warp kernel is laid out for: vec_warp_max_rows_of, but at D = 256
// the wide form (16 rows) only over at least vec_warp_wide_min_row_sets KV heads x sequences. Over
// fewer, two 8-row work-groups per KV head are faster (H100, depth 32768, 16 rows per KV head, two
// 8-row work-groups against the wide form: over 2 KV heads 35.2 against 44.1 us, over 8 72.6
// against 65.7; at D = 128 24.6 against 21.6 and 44.6 against 39.1; docs/performance.md, verify).
inline constexpr int64_t vec_warp_wide_min_row_sets = 8;
inline int vec_warp_layout_rows(const attention_params& p) {
  const int rows = vec_warp_max_rows_of(p);
  const bool few_row_sets = p.n_head_kv() * p.n_seq() < vec_warp_wide_min_row_sets;
  return rows > vec_warp_rows && p.head_dim_v() == 256 && few_row_sets ? vec_warp_rows : rows;
}

// warp: the layout of the warp kernel (vec_warp_reads), else the scalar and matrix kernels'.
inline vec_row_layout vec_rows_of(const attention_params& p, bool warp) {
  vec_row_layout l;
  const int gqa = static_cast<int>(p.n_head() / p.n_head_kv());
  const int head_dim = static_cast<int>(p.head_dim_v());
  // The warp kernel takes no more rows than its column blocks hold (D = 512: 4), and as many
  // queries per work-group as fill them: each key is unpacked once for all of them (a verify
  // batch). The scalar and matrix kernels take at most 2 queries per work-group.
  const int max_rows = warp ? vec_warp_layout_rows(p) : vec_max_rows(head_dim);
  l.head_splits = (gqa + max_rows - 1) / max_rows;
  while (gqa % l.head_splits != 0) ++l.head_splits;
  l.heads_per_block = gqa / l.head_splits;
  const int max_cols = warp ? max_rows / l.heads_per_block : 2 * l.heads_per_block <= max_rows ? 2 : 1;
  l.ncols = static_cast<int>(p.n_q() < max_cols ? p.n_q() : max_cols);
  l.q_tiles = (p.n_q() + l.ncols - 1) / l.ncols;
  return l;
}

// The launch limit of a grid's y and z dimensions (x: 2^31 - 1).
inline constexpr int64_t max_grid_yz = 65535;
// Whether the grids of a call laid out as l fit the launch limits: the decode kernel's y (KV heads x
// head splits) and z (sequences x query tiles), the combine kernel's y (n_head).
inline bool vec_grid_fits(const attention_params& p, const vec_row_layout& l) {
  return p.n_head_kv() * l.head_splits <= max_grid_yz && p.n_seq() * l.q_tiles <= max_grid_yz &&
         p.n_head() <= max_grid_yz;
}

// Whether V's view is the leading dv values of each of K's rows (dv < dk): the same bytes, type
// and rows, as ggml engines lay out MLA's cache (V a view of K).
inline bool v_view_of_k(const attention_params& p) {
  return p.v.data == p.k.data && p.v.type == p.k.type && p.v.ne[0] < p.k.ne[0] && p.v.nb[1] == p.k.nb[1] &&
         p.v.nb[2] == p.k.nb[2] && p.v.nb[3] == p.k.nb[3];
}
inline constexpr int64_t vec_max_gqa = 128;  // query heads per KV head (MLA: DeepSeek-V3's 128 over 1)

// Whether the VEC kernels take these (validated) params: any K/V type pair (the pairs outside
// vec_warp_types, e.g. q8_0 V or turbo4 with turbo2, through the scalar kernel only), head dims
// 128, 256, 512 and 64 (f16 K and V only: q8_0 at D = 64 decodes through materialize, launch.hpp's
// route_on) and, where K's differs from V's, only the warp kernel's V-in-K form (K and V head dims
// 640 and 512, V a view of K: v_view_of_k, of turbo3, turbo2 or turbo4), f16 rows 16-byte
// aligned, GQA <= vec_max_gqa, and grids within the launch limits: the decode kernel's (splits
// <= 256, KV heads x head splits, sequences x query tiles) and the combine kernel's (queries x
// slices, n_head, n_seq; its x stays far below 2^31 once sequences x query tiles fits).
inline status vec_supported(const attention_params& p) {
  if (!has_kernel_loader(p.k.type) || !has_kernel_loader(p.v.type)) return status::unsupported;
  const int64_t dk = p.head_dim_k(), dv = p.head_dim_v();
  const bool v_in_k = dk != dv;  // the warp kernel's V-in-K form or nothing
  if (v_in_k) {
    if (!vec_warp_v_in_k_dims(static_cast<int>(dk), static_cast<int>(dv)) || !v_view_of_k(p) || !vec_warp_reads(p))
      return status::unsupported;
  } else {
    const bool f16_kv = p.k.type == data_type::f16 && p.v.type == data_type::f16;
    const bool dim_ok = dk == 128 || dk == 256 || dk == 512 || (dk == 64 && f16_kv);
    if (!dim_ok) return status::unsupported;
    if (p.k.type == data_type::f16 && !rows_aligned16(p.k)) return status::unsupported;
    if (p.v.type == data_type::f16 && !rows_aligned16(p.v)) return status::unsupported;
  }
  if (p.n_head() / p.n_head_kv() > vec_max_gqa) return status::unsupported;
  for (bool warp : {false, true}) {
    if (warp ? !vec_warp_reads(p) : v_in_k) continue;  // the layouts of the kernels that may run it
    if (!vec_grid_fits(p, vec_rows_of(p, warp))) return status::unsupported;
  }
  return status::ok;
}

// Verify batches over a turbo3 cache: up to 16 query rows per KV head (n_q x GQA; 4 at D = 512)
// fill one work-group of the warp decode kernel (its wide form from 9 rows), which then unpacks
// each key once for all of them and beats the MMA kernels' key split (docs/performance.md,
// verify). For f16 K/V the MMA split wins from n_q 3 on.
inline bool vec_takes_verify_batch(const attention_params& p) {
  if (p.k.type != data_type::turbo3 || p.v.type != data_type::turbo3 || !vec_warp_reads(p)) return false;
  const int64_t rows_per_kv_head = p.n_q() * (p.n_head() / p.n_head_kv());
  return rows_per_kv_head <= vec_warp_max_rows_of(p) && vec_supported(p) == status::ok;
}

// Whether the combine kernel merges the warp kernel's splits. The kernel's own merge runs in the
// last work-group of a row set with the rest of the GPU idle: each of its warps takes a (row,
// 128-value group) after another, one round trip per vec_merge_batch splits
// (merge_splits_if_last), and one multiprocessor reads every split's rows. The combine kernel is a
// second launch whose threads each loop over every split, so it pays only where the kernel's merge
// takes many round trips: at 24 and 32 (GQA 8 decode over 2 KV heads, D = 128 / 256) the call is
// 1.7x / 1.2x faster with the kernel's merge; at 64 (16 rows over 2 KV heads in 4-warp work-groups
// at D = 256) it took 94.7 us with the kernel's merge and 49.6 with the combine kernel
// (docs/performance.md, verify).
inline constexpr int vec_warp_merge_max_round_trips = 32;
inline bool vec_warp_combines(int rows, int head_dim, int warps, int n_splits) {
  const int items_per_warp = (rows * (head_dim / block_values) + warps - 1) / warps;
  return items_per_warp * ((n_splits + vec_merge_batch - 1) / vec_merge_batch) > vec_warp_merge_max_round_trips;
}

inline int next_pow2(int x) {
  int p = 1;
  while (p < x) p *= 2;
  return p;
}

// The rows per work-group of the scalar kernel over kv::any_loader for `rows` query rows (a power
// of two): three kernels per head dim serve them (rows 2, 8, 16; compile time, docs/performance.md).
// One row runs as 2 (a padding row); 3 or 4 rows run as 8 (Q from shared memory: with 4 rows' Q in
// registers the kernel spills 10-29 VGPRs on gfx1201).
inline int vec_any_rows(int rows) { return rows == 1 ? 2 : rows == 4 ? 8 : rows; }

// The plan of a vec_supported call on `device` (its multiprocessor count and the occupancy of its
// kernels there).
inline vec_plan make_vec_plan(const attention_params& p, const launch_options& opt, int device) {
  const int multiprocessors = platform::multiprocessor_count(device);
  vec_plan plan;
  plan.head_dim = static_cast<int>(p.head_dim_v());
  plan.head_dim_k = static_cast<int>(p.head_dim_k());
  // The warp kernel where the options allow it and it reads the call; its layout fits its rows.
  const bool warp = (opt.vec == vec_variant::automatic || opt.vec == vec_variant::warp) && vec_warp_reads(p);
  const vec_row_layout l = vec_rows_of(p, warp);
  plan.head_splits = l.head_splits;
  const int heads_per_block = l.heads_per_block;
  plan.ncols = l.ncols;
  plan.rows = next_pow2(heads_per_block * plan.ncols);
  const bool mma_rows = platform::has_mma_m16n8k16 && vec_mma_head_dim(plan.head_dim) && plan.rows <= vec_mma_rows;
  // The matrix kernel reads f16 and turbo3 only, the warp kernel the pairs of vec_warp_types (the
  // turbo pairs, q8_0 K with turbo3 V); other pairs take the scalar kernel.
  const int block_rows = heads_per_block * plan.ncols;
  const bool tile_types = has_tile_loader(p.k.type) && has_tile_loader(p.v.type);
  if (opt.vec == vec_variant::matrix && mma_rows && tile_types) {
    plan.variant = vec_variant::matrix;
    plan.rows = vec_mma_rows;
  } else if (warp) {
    plan.variant = vec_variant::warp;
    plan.warp_col_blocks = block_rows <= 4 ? 1 : block_rows <= 8 ? 2 : 4;
    plan.warp_warps = vec_warp_warps(plan.head_dim, plan.warp_col_blocks, p.n_kv(), p.k.type, p.v.type);
    // 6 warps take 64.5 KB of shared memory, the wide form's 8 up to 154 KB: where the device
    // refuses it, 4.
    if (plan.warp_warps != 4 && vec_resident_blocks(plan, p.k.type, p.v.type, p.mask.data != nullptr, device) == 0)
      plan.warp_warps = 4;
    plan.rows = vec_warp_rows_of(plan.warp_col_blocks);
  }
  if (plan.variant == vec_variant::scalar && !tile_types) plan.rows = vec_any_rows(plan.rows);
  plan.q_tiles = static_cast<int>(l.q_tiles);
  const int split_unit = plan.variant == vec_variant::warp ? vec_warp_split_keys(plan.warp_warps) : vec_tile;  // keys
  const int n_tiles = static_cast<int>((p.n_kv() + split_unit - 1) / split_unit);
  const int64_t base_blocks = p.n_seq() * p.n_head_kv() * plan.head_splits * plan.q_tiles;
  int splits = opt.kv_splits;
  if (splits <= 0) {
    // Up to vec_target_blocks_per_sm work-groups per SM, fewer where fewer are resident, in one
    // wave (a second, partial wave would leave most of the GPU idle while it runs). Measured on an
    // H200 (8 KV heads): a full wave of 4 lost to 2 per SM at depth 4096 and 32768 (every split
    // adds a Q load, a merge and a partial row); 3 per SM against 2, us at depth 32768 / 131072:
    // f16 D = 256 99.5 / 308 vs 113 / 391, f16 D = 128 56 / 156 vs 59 / 190, all unchanged at 4096.
    // The turbo3 warp kernel at D = 256 fits 2 (its registers: vec_warp_min_blocks).
    const int resident = vec_resident_blocks(plan, p.k.type, p.v.type, p.mask.data != nullptr, device);
    const int per_sm = resident < vec_target_blocks_per_sm ? resident : vec_target_blocks_per_sm;
    const int64_t target = per_sm * static_cast<int64_t>(multiprocessors);
    splits = static_cast<int>(target / base_blocks);
    if (splits < 1) splits = 1;
  }
  splits = splits < 1 ? 1 : splits > vec_max_splits ? vec_max_splits : splits;
  splits = splits > n_tiles ? n_tiles : splits;
  plan.tiles_per_split = (n_tiles + splits - 1) / splits;
  plan.n_splits = (n_tiles + plan.tiles_per_split - 1) / plan.tiles_per_split;
  plan.partial_floats = static_cast<size_t>(base_blocks) * plan.n_splits * plan.rows * vec_partial_pitch(plan.head_dim);
  plan.counted_row_sets = plan.variant == vec_variant::warp ? static_cast<int>(base_blocks) : 0;
  plan.combine_splits = plan.variant == vec_variant::warp &&
                        vec_warp_combines(static_cast<int>(heads_per_block * plan.ncols), plan.head_dim,
                                          plan.warp_warps, plan.n_splits);
  return plan;
}

inline attention_args make_args(const attention_params& p) {
  attention_args a{};
  static_cast<attention_views&>(a) = make_views(p, p.k.type, p.v.type);
  return a;
}

template <int D, int DK>
void launch_vec_types(const attention_args& a, const vec_plan& plan, data_type k, data_type v, int device,
                      hipStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.n_splits), static_cast<unsigned>(a.n_head_kv * plan.head_splits),
                  static_cast<unsigned>(a.n_seq * plan.q_tiles));
  with_vec_kernel<D>(
      plan, k, v, a.mask != nullptr,
      [&](auto kernel) {
        using K = decltype(kernel);
        // the shared-memory limit raised on this device before the first launch there
        (void)resident_blocks_of<K>(device);
        K::value<<<grid, K::threads, K::smem_bytes, stream>>>(a, plan.head_splits);
      },
      std::integral_constant<int, DK>{});
}

template <int D>
void launch_vec_combine(const attention_args& a, const vec_plan& plan, hipStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.n_q * vec_combine_slices<D>), static_cast<unsigned>(a.n_head),
                  static_cast<unsigned>(a.n_seq));
  vec_combine_kernel<D><<<grid, vec_threads, 0, stream>>>(a, plan.head_splits, plan.rows, a.unrotate_out);
}

template <int D, int DK>
void launch_vec_dim(const attention_args& a, const vec_plan& plan, data_type k, data_type v, int device,
                    hipStream_t stream) {
  launch_vec_types<D, DK>(a, plan, k, v, device, stream);
  if (!a.merge_in_kernel) launch_vec_combine<D>(a, plan, stream);
}

// workspace: vec_workspace_bytes(plan, persistent != nullptr) bytes; persistent: caller-owned
// zeroed counters (launch_options::counters) or nullptr; device: the stream's. Returns false if a
// launch could not be queued (an error the caller left pending is neither cleared nor taken for
// one of these launches: error_scope).
inline bool launch_vec(const attention_params& p, attention_args a, const vec_plan& plan, void* workspace,
                       unsigned* persistent, int device, hipStream_t stream) {
  const platform::error_scope errors;
  a.ncols = plan.ncols;
  a.q_tiles = plan.q_tiles;
  a.n_splits = plan.n_splits;
  a.tiles_per_split = plan.tiles_per_split;
  a.partial = static_cast<float*>(align_up(workspace, vec_partial_align));
  const bool counted = plan.counted_row_sets > 0;
  unsigned* const counters =
      !counted ? nullptr : persistent ? persistent : reinterpret_cast<unsigned*>(a.partial + vec_counters_offset_floats(plan));
  a.split_counters = counters;
  a.merge_in_kernel = counted && !plan.combine_splits;
  a.work_counters = counted ? counters + 1 : nullptr;
  a.reset_counters = counted && persistent;
  if (counted && !persistent) {
    const int n = vec_counter_words(plan);
    const int blocks = (n + vec_zero_threads - 1) / vec_zero_threads;
    vec_zero_counters_kernel<vec_zero_threads><<<blocks < 1024 ? blocks : 1024, vec_zero_threads, 0, stream>>>(counters, n);
  }
  with_vec_head_dims(plan, [&](auto d, auto dk) {
    launch_vec_dim<decltype(d)::value, decltype(dk)::value>(a, plan, p.k.type, p.v.type, device, stream);
  });
  return errors.launches_ok();
}

// ---- the family's entry point ------------------------------------------------------------------------
// Every family answers the same four questions (launch.hpp's run_family asks them in this order):
// does it take the call (supported), how does the call run on `device` (plan: refuses options it
// cannot honour), how much workspace does that plan take, and the launch of the plan on the stream.
struct vec_family {
  using plan_type = vec_plan;
  static status supported(const attention_params& p) { return vec_supported(p); }
  // Caller-owned counters (launch_options::counters) must be large enough and 128-byte aligned
  // where the planned kernel counts: invalid_argument otherwise.
  static status plan(const attention_params& p, const launch_options& opt, int device, vec_plan& out) {
    out = make_vec_plan(p, opt, device);
    // The V-in-K form has only the warp kernel (and no other variant to force).
    if (out.head_dim_k != out.head_dim && out.variant != vec_variant::warp) return status::unsupported;
    if (opt.counters && out.counted_row_sets > 0 &&
        (opt.counters_bytes < vec_counter_bytes(out) || reinterpret_cast<uintptr_t>(opt.counters) % 128 != 0))
      return status::invalid_argument;
    out.caller_counters = opt.counters && out.counted_row_sets > 0 ? static_cast<unsigned*>(opt.counters) : nullptr;
    return status::ok;
  }
  static size_t workspace_bytes(const vec_plan& plan) {
    return vec_workspace_bytes(plan, plan.caller_counters != nullptr);
  }
  static status launch(const attention_params& p, const vec_plan& plan, void* workspace, int device,
                       hipStream_t stream) {
    return launch_vec(p, make_args(p), plan, workspace, plan.caller_counters, device, stream) ? status::ok
                                                                                             : status::runtime_error;
  }
};

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
