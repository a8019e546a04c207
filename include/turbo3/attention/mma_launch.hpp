// The matrix-core prefill (MMA) family's entry point: which calls it takes, its form (a warpgroup
// kernel where one applies and is asked for, else the fragment kernel), the split of each
// work-group's keys (mma_kv_splits), the partial rows' workspace and the launch, followed by the
// merge where the keys are split.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/attention/mma.hpp"
#include "turbo3/attention/mma_wg.hpp"
#include "turbo3/attention/options.hpp"
#include "turbo3/attention/params.hpp"
#include "turbo3/attention/prefill_common.hpp"
#include "turbo3/platform/device_state.hpp"
#include "turbo3/status.hpp"
#include "turbo3/types.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

// The form a call runs: the one it forces, or the default, the warp-specialized form (the fragment
// kernel where no warpgroup form applies). It is the faster form for both types, causal and masked:
// turbo3's producers decode beside the multiplies, and f16 gains once the multiplies' descriptors
// sit in uniform registers (docs/performance.md, MMA).
inline mma_variant resolved_mma_variant(mma_variant v) {
  return v == mma_variant::automatic ? mma_variant::warp_specialized : v;
}

// How many ways an MMA call on `device` in `form` (resolved: a warpgroup form only where
// mma_wg_applies) splits each work-group's keys (prefill_args::kv_splits):
// `requested` where it is > 0 (launch_options::kv_splits), else as many as fill the device's
// work-group slots in one wave (multiprocessors x work-groups resident on each) where the call's
// own work-groups leave them empty (a verify batch at depth: one per KV head; an engine's 512-query
// ubatch at D = 256 over 8 KV heads: 64 on 132 SMs), with at least prefill_min_split_tiles key
// tiles per split. At most prefill_max_kv_splits and one per key tile; the one-tile-at-a-time
// warpgroup form takes none.
inline int mma_kv_splits(const attention_params& p, mma_variant form, int requested, int device) {
  int rows = 0, keys = 0, resident = 1;
  if (form != mma_variant::fragment) {
    if (form == mma_variant::warpgroup) return 1;
    rows = wg_config<256>::rows;  // the same at D = 128
    keys = wg_config<256>::keys;
    static_assert(wg_config<128>::rows == wg_config<256>::rows && wg_config<128>::keys == wg_config<256>::keys,
                  "one work-group shape for both head dims");
  } else {
    const platform::arch_family f = platform::device_family(device);
    const int d = static_cast<int>(p.head_dim_k());
    rows = mma_rows(f, d);
    keys = mma_table(f, d).keys;
    resident = mma_table(f, d).resident;
  }
  const int64_t blocks = prefill_grid_of(p, rows).blocks_per_sequence(p.n_head_kv());
  const int64_t key_tiles = (p.n_kv() + keys - 1) / keys;
  int64_t splits = requested;
  if (splits <= 0) {
    const int64_t slots = static_cast<int64_t>(platform::multiprocessor_count(device)) * resident;
    splits = slots / (blocks * p.n_seq());
    const int64_t most = key_tiles / prefill_min_split_tiles;
    splits = splits < most ? splits : most;
  }
  if (splits > prefill_max_kv_splits) splits = prefill_max_kv_splits;
  if (splits > key_tiles) splits = key_tiles;
  if (splits < 1 || blocks * splits > INT32_MAX) splits = 1;
  return static_cast<int>(splits);
}

// ---- the family's entry point (the four questions of vec_family) ----------------------------------
struct mma_plan {
  mma_variant form = mma_variant::fragment;  // resolved: fragment, warpgroup or warp_specialized
  int kv_splits = 1;
  size_t partial_bytes = 0;
};
struct mma_family {
  using plan_type = mma_plan;
  static status supported(const attention_params& p) { return mma_supported(p); }
  static status plan(const attention_params& p, const launch_options& opt, int device, mma_plan& out) {
    out.form = resolved_mma_variant(opt.mma);
    if (out.form != mma_variant::fragment && !mma_wg_applies(p, device)) out.form = mma_variant::fragment;
    out.kv_splits = mma_kv_splits(p, out.form, opt.kv_splits, device);
    out.partial_bytes = prefill_partial_bytes(p, out.kv_splits);
    return status::ok;
  }
  static size_t workspace_bytes(const mma_plan& plan) { return plan.partial_bytes; }  // the key splits' partial rows
  static status launch(const attention_params& p, const mma_plan& plan, void* workspace, int device,
                       hipStream_t stream) {
    return launch_as(p, p.k.type, p.v.type, plan, workspace, device, stream);
  }
  // launch over K/V that stand for views of other types (k_was / v_was as for make_prefill_args):
  // materialize's dense f16 copies.
  static status launch_as(const attention_params& p, data_type k_was, data_type v_was, const mma_plan& plan,
                          void* workspace, int device, hipStream_t stream) {
    float* const partial = static_cast<float*>(align_up(workspace, 16));
    if (plan.form == mma_variant::fragment) return launch_mma(p, k_was, v_was, plan.kv_splits, partial, device, stream);
    const bool specialized = plan.form == mma_variant::warp_specialized;
    return launch_mma_wg(p, k_was, v_was, specialized, plan.kv_splits, partial, device, stream);
  }
};

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
