// The device-side form of attention_params: raw pointers, strides and precomputed scalars,
// passed by value to the kernels. attention_views holds what every kernel reads of a call; the VEC
// and TILE argument structs add their own launch layout to it.
#pragma once

#include <cstdint>

#include "turbo3/attention/params.hpp"
#include "turbo3/attention/validate.hpp"
#include "turbo3/kv/loaders.hpp"

namespace turbo3 {
namespace detail {

inline constexpr float log2e = 1.4426950408889634f;

struct attention_views {
  const char* q;
  const char* k;
  const char* v;
  const char* k_end;    // one past the last byte of the K view (its highest row's end)
  const char* v_end;
  const char* mask;     // nullptr: no mask
  const float* sinks;   // nullptr: no sinks
  char* out;

  int64_t q_nb1, q_nb2, q_nb3;
  int64_t k_nb1, k_nb2, k_nb3;
  int64_t v_nb1, v_nb2, v_nb3;
  int64_t mask_nb1, mask_nb2, mask_nb3;
  int64_t out_nb1, out_nb2, out_nb3;

  int n_q, n_kv, n_head, n_head_kv, n_seq;
  int gqa;              // query heads per KV head
  int mask_ne2, mask_ne3;

  bool q_f16, out_f16, causal;
  bool rotate_q;        // rotate Q forward on load (K stores rotated values, or did before materializing)
  bool unrotate_out;    // rotate the output back (V stores rotated values, or did)
  data_type k_type, v_type;  // the K and V storage types the kernel reads (kv::any_loader's)

  float q_prescale;     // scale * log2(e), or scale / softcap with softcap
  float softcap_post;   // softcap * log2(e), 0 without softcap
  float max_bias;
  turbo3_lut lut;
};

// One past the last byte of a view: its highest-addressed row's end (strides are positive), from
// view_bytes' checked unsigned sum; validate() has refused every view whose span does not fit.
inline const char* view_end(const tensor_view& t) {
  size_t bytes = 0;
  (void)view_bytes(t.data, t.type, t.ne, t.nb, bytes);
  return reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(t.data) + bytes);
}

// k_was / v_was: the storage types of K and V as the caller gave them (the materialize path runs
// the f16 kernels on dequantized copies, and the rotations follow the original types).
inline attention_views make_views(const attention_params& p, data_type k_was, data_type v_was) {
  attention_views a{};
  a.q = static_cast<const char*>(p.q.data);
  a.k = static_cast<const char*>(p.k.data);
  a.v = static_cast<const char*>(p.v.data);
  a.k_end = view_end(p.k);
  a.v_end = view_end(p.v);
  a.mask = static_cast<const char*>(p.mask.data);
  a.sinks = p.sinks;
  a.out = static_cast<char*>(p.out.data);
  a.q_nb1 = static_cast<int64_t>(p.q.nb[1]); a.q_nb2 = static_cast<int64_t>(p.q.nb[2]); a.q_nb3 = static_cast<int64_t>(p.q.nb[3]);
  a.k_nb1 = static_cast<int64_t>(p.k.nb[1]); a.k_nb2 = static_cast<int64_t>(p.k.nb[2]); a.k_nb3 = static_cast<int64_t>(p.k.nb[3]);
  a.v_nb1 = static_cast<int64_t>(p.v.nb[1]); a.v_nb2 = static_cast<int64_t>(p.v.nb[2]); a.v_nb3 = static_cast<int64_t>(p.v.nb[3]);
  a.mask_nb1 = static_cast<int64_t>(p.mask.nb[1]); a.mask_nb2 = static_cast<int64_t>(p.mask.nb[2]);
  a.mask_nb3 = static_cast<int64_t>(p.mask.nb[3]);
  a.out_nb1 = static_cast<int64_t>(p.out.nb[1]); a.out_nb2 = static_cast<int64_t>(p.out.nb[2]);
  a.out_nb3 = static_cast<int64_t>(p.out.nb[3]);
  a.n_q = static_cast<int>(p.n_q());
  a.n_kv = static_cast<int>(p.n_kv());
  a.n_head = static_cast<int>(p.n_head());
  a.n_head_kv = static_cast<int>(p.n_head_kv());
  a.n_seq = static_cast<int>(p.n_seq());
  a.gqa = a.n_head / a.n_head_kv;
  a.mask_ne2 = p.mask.data ? static_cast<int>(p.mask.ne[2]) : 1;
  a.mask_ne3 = p.mask.data ? static_cast<int>(p.mask.ne[3]) : 1;
  a.q_f16 = p.q.type == data_type::f16;
  a.out_f16 = p.out.type == data_type::f16;
  a.causal = p.causal;
  a.rotate_q = p.rotate_q && stores_rotated_values(k_was);
  a.unrotate_out = p.unrotate_out && stores_rotated_values(v_was);
  a.k_type = p.k.type;
  a.v_type = p.v.type;
  a.q_prescale = p.softcap > 0.0f ? p.scale / p.softcap : p.scale * log2e;
  a.softcap_post = p.softcap > 0.0f ? p.softcap * log2e : 0.0f;
  a.max_bias = p.max_bias;
  a.lut = make_turbo3_lut(p.kv_codebook);
  return a;
}

// Whether a view's rows (and head and sequence strides) are 16-byte aligned: the kernels' f16
// K/V loads are 16 bytes wide.
inline bool rows_aligned16(const tensor_view& t) {
  return is_aligned(t.data, 16) && t.nb[1] % 16 == 0 && t.nb[2] % 16 == 0 && t.nb[3] % 16 == 0;
}

// VEC and its combine pass.
struct attention_args : attention_views {
  float* partial;       // split-KV partials: [seq][kv_block][q_tile][split][row][D_v + 2]
  // Kernels that merge their own splits: one counter per (seq, kv_block, q_tile), zero at launch.
  // nullptr: the combine kernel merges them.
  unsigned* split_counters;
  // The kernel's last work-group of a row set merges its splits (only with split_counters); false:
  // the combine kernel merges them (with split_counters the last work-group still resets
  // caller-owned counters).
  bool merge_in_kernel;
  // Kernels that hand out their keys at run time (the warp variant): one counter per (seq,
  // kv_block, q_tile) of the chunks claimed so far, zero at launch; nullptr otherwise.
  unsigned* work_counters;
  bool reset_counters;  // the counters outlive the call (launch_options::counters): leave them zero
  int ncols;            // queries per work-group
  int q_tiles;          // ceil(n_q / ncols)
  int n_splits, tiles_per_split;
};

#if TURBO3_HAS_RUNTIME
// The caller's output row of (query, head, sequence), and one value stored into it as the output
// type (f16 or f32).
TURBO3_DEVICE TURBO3_FORCEINLINE char* output_row(const attention_views& a, int query, int head, int seq) {
  return a.out + query * a.out_nb1 + head * a.out_nb2 + seq * a.out_nb3;
}
TURBO3_DEVICE TURBO3_FORCEINLINE void store_output(const attention_views& a, char* row, int d, float v) {
  if (a.out_f16) reinterpret_cast<platform::half*>(row)[d] = platform::float_to_half(v);
  else reinterpret_cast<float*>(row)[d] = v;
}
#endif  // TURBO3_HAS_RUNTIME

}  // namespace detail
}  // namespace turbo3
