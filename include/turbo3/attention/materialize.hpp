// Materialize ("stock" prefill): dequantize the K/V views to dense f16 in workspace from the
// caller's allocator, then run the device's default f16 prefill kernel over the copies (MMA on
// NVIDIA, with its key split where the call has one; TILE elsewhere, and at D = 64). It is the
// prefill route of turbo4, turbo2 and q8_0 K/V, which no fused prefill kernel reads, the fallback
// for views the f16 kernels cannot read directly (f16 rows that are not 16-byte aligned), and
// the baseline that shows what turbo3's inline dequantization saves.
//
// The copies stay in the rotated domain (docs/format.md §4: no inverse rotation at dequant
// time), so the rotations follow the caller's original types exactly as the fused kernels apply
// them: Q is rotated when the original K stores rotated values (turbo3, turbo4, turbo2; and
// rotate_q), the output is un-rotated when the original V does (and unrotate_out). The result
// then matches ref::attention up to the f16 rounding of the dequantized values.
//
// Workspace: n_seq * n_head_kv * n_kv * D * 2 bytes for each view copied (each rounded up to 256
// bytes; views the f16 kernels read as they are, 16-byte aligned f16, are not copied), then the
// MMA key split's partial rows where it splits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/attention/mma_launch.hpp"
#include "turbo3/attention/options.hpp"
#include "turbo3/attention/params.hpp"
#include "turbo3/attention/prefill_route.hpp"
#include "turbo3/attention/tile.hpp"
#include "turbo3/kv/loader_any.hpp"
#include "turbo3/kv/loaders.hpp"
#include "turbo3/platform/device.hpp"
#include "turbo3/status.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

inline constexpr int materialize_threads = 256;

struct materialize_plan {
  bool k = false, v = false;  // which views are copied
  size_t k_bytes = 0, v_bytes = 0;
  size_t v_offset = 0;        // of the V copy from the aligned start
  bool mma = false;           // the dense call runs MMA (else TILE)
  mma_plan dense_mma;         // its plan where it does
  size_t partial_offset = 0;  // of the MMA partial rows from the aligned start
  size_t total = 0;           // workspace bytes
};

inline bool materialize_view(const tensor_view& t) {
  return t.type != data_type::f16 || !rows_aligned16(t);
}

inline size_t dense_f16_bytes(const tensor_view& t) {
  return static_cast<size_t>(t.ne[0]) * static_cast<size_t>(t.ne[1]) * static_cast<size_t>(t.ne[2]) *
         static_cast<size_t>(t.ne[3]) * 2;
}

// Whether a view's dense f16 copy fits: its bytes (dense_f16_bytes) do not overflow with the two
// copies' alignment slack, and the copy kernel's grid (one thread per 16-value chunk,
// materialize_threads per work-group, both views in one grid) stays below 2^31 work-groups.
inline bool dense_copy_fits(const tensor_view& t) {
  const uint64_t limit = static_cast<uint64_t>(INT64_MAX) / 4;  // two copies and their slack stay far below 2^63
  uint64_t values = 1;
  for (int i = 0; i < 4; ++i) {
    const uint64_t n = static_cast<uint64_t>(t.ne[i]);
    if (values > limit / n) return false;
    values *= n;
  }
  return values / 16 / 256 < static_cast<uint64_t>(INT32_MAX) / 2 && values * 2 <= limit;
}

inline constexpr size_t materialize_align = 256;  // bytes: where each dense copy starts

// Dense f16 view over a materialized copy of t.
inline tensor_view dense_view(const tensor_view& t, void* data) {
  tensor_view d = t;
  d.data = data;
  d.type = data_type::f16;
  d.nb[0] = 2;
  d.nb[1] = static_cast<size_t>(t.ne[0]) * 2;
  d.nb[2] = d.nb[1] * static_cast<size_t>(t.ne[1]);
  d.nb[3] = d.nb[2] * static_cast<size_t>(t.ne[2]);
  return d;
}

// p with the views a plan copies replaced by their dense copies at base (aligned to
// materialize_align; nullptr while planning: only the copies' shapes and alignment count then).
inline attention_params dense_params(const attention_params& p, const materialize_plan& m, char* base) {
  attention_params dense = p;
  if (m.k) dense.k = dense_view(p.k, base);
  if (m.v) dense.v = dense_view(p.v, base ? base + m.v_offset : nullptr);
  return dense;
}

// The copies, and on a device whose prefill default is MMA (where the MMA kernel takes the dense
// call) its plan with the caller's options; the partial rows of its key split follow the copies.
inline materialize_plan make_materialize_plan(const attention_params& p, const launch_options& opt, int device) {
  constexpr size_t align = materialize_align;
  materialize_plan m;
  m.k = materialize_view(p.k);
  m.v = materialize_view(p.v);
  m.k_bytes = m.k ? (dense_f16_bytes(p.k) + align - 1) / align * align : 0;
  m.v_bytes = m.v ? (dense_f16_bytes(p.v) + align - 1) / align * align : 0;
  m.v_offset = m.k_bytes;
  m.partial_offset = m.k_bytes + m.v_bytes;
  const attention_params dense = dense_params(p, m, nullptr);
  m.mma = mma_by_default(platform::device_family(device)) && mma_supported(dense) == status::ok;
  if (m.mma) mma_family::plan(dense, opt, device, m.dense_mma);
  const size_t partial_bytes = m.mma ? mma_family::workspace_bytes(m.dense_mma) : 0;
  const size_t bytes = m.k_bytes + m.v_bytes + partial_bytes;
  m.total = bytes > 0 ? align - 1 + bytes : 0;  // with the slack to align the start
  return m;
}

// The head dims materialize takes: those of the f16 TILE kernel, which serves its dense call where
// MMA does not (D = 64 and 512).
TURBO3_HD constexpr bool materialize_head_dim(int d) { return tile_head_dim(d); }

// Whether the materialize route takes these (validated) params: any K/V type pair (every one has a
// loader for the copy), materialize_head_dim.
inline status materialize_supported(const attention_params& p) {
  if (!has_kernel_loader(p.k.type) || !has_kernel_loader(p.v.type)) return status::unsupported;
  const int64_t d = p.head_dim_k();
  if (d != p.head_dim_v() || !materialize_head_dim(static_cast<int>(d))) return status::unsupported;
  if (p.n_seq() > 65535 || p.n_head() > 65535 || !prefill_grid_fits(p)) return status::unsupported;
  if (!dense_copy_fits(p.k) || !dense_copy_fits(p.v)) return status::unsupported;
  return status::ok;
}

// One view's dense copy (materialize_kernel): its stored rows in (token, head, seq) order.
struct materialize_copy {
  const char* src = nullptr;
  int64_t nb1 = 0, nb2 = 0, nb3 = 0;
  uint4* dst = nullptr;
  int64_t n_chunks = 0;         // 16-value chunks of the view
  int n_rows = 0, n_heads = 0;  // ne[1], ne[2]
  int chunk_shift = 0;          // log2 of the chunks per row (materialize_head_dim: powers of two)
  data_type type = data_type::f16;
  unsigned blocks = 0;          // work-groups of the grid that copy it
};

inline materialize_copy make_materialize_copy(const tensor_view& t, void* dst) {
  materialize_copy c;
  c.src = static_cast<const char*>(t.data);
  c.nb1 = static_cast<int64_t>(t.nb[1]);
  c.nb2 = static_cast<int64_t>(t.nb[2]);
  c.nb3 = static_cast<int64_t>(t.nb[3]);
  c.dst = static_cast<uint4*>(dst);
  const int64_t chunks_per_row = t.ne[0] / kv::chunk_values;
  while ((int64_t{1} << c.chunk_shift) < chunks_per_row) ++c.chunk_shift;
  c.n_chunks = static_cast<int64_t>(t.ne[1]) * t.ne[2] * t.ne[3] * chunks_per_row;
  c.n_rows = static_cast<int>(t.ne[1]);
  c.n_heads = static_cast<int>(t.ne[2]);
  c.type = t.type;
  c.blocks = static_cast<unsigned>((c.n_chunks + materialize_threads - 1) / materialize_threads);
  return c;
}

// Whether a copy's rows need materialize_source_row_of's 64-bit form (2^32 rows or more).
inline bool materialize_wide_rows(const materialize_copy& c) {
  return (c.n_chunks >> c.chunk_shift) >= (int64_t{1} << 32);
}

// Chunk c of a stored row as 32 bytes of dense f16: dequantized through loader L (decoded values
// times the chunk's scale, rounded to f16), or copied (f16 at any 2-byte alignment).
template <class L>
TURBO3_DEVICE TURBO3_FORCEINLINE void materialize_chunk(const char* src_row, int c, const turbo3_lut& lut, uint4* out) {
  uint32_t w[8];
  if constexpr (L::type != data_type::f16) {
    static_assert(L::values_per_scale % kv::chunk_values == 0, "a chunk lies in one scale group");
    float x[kv::chunk_values];
    L::decode(L::load_raw(src_row, c), lut, x);
    const float sc = kv::chunk_scale<L>(src_row, c);
    TURBO3_UNROLL
    for (int i = 0; i < 8; ++i)
      w[i] = static_cast<uint32_t>(platform::float_to_half_bits(x[L::slot(2 * i)] * sc)) |
             (static_cast<uint32_t>(platform::float_to_half_bits(x[L::slot(2 * i + 1)] * sc)) << 16);
  } else {
    const uint16_t* h16 = reinterpret_cast<const uint16_t*>(src_row) + c * kv::chunk_values;
    TURBO3_UNROLL
    for (int i = 0; i < 8; ++i) w[i] = static_cast<uint32_t>(h16[2 * i]) | (static_cast<uint32_t>(h16[2 * i + 1]) << 16);
  }
  out[0] = make_uint4(w[0], w[1], w[2], w[3]);
  out[1] = make_uint4(w[4], w[5], w[6], w[7]);
}

// Where row `row` of a view's copy comes from: its token, head and sequence (rows in (token, head,
// seq) order, n_rows tokens and n_heads heads). WIDE_ROWS: the view has 2^32 rows or more and the
// divisions take 64 bits; otherwise 32-bit ones, a fraction of the instructions.
struct materialize_source_row {
  int64_t token, head, seq;
};
template <bool WIDE_ROWS>
TURBO3_HD inline materialize_source_row materialize_source_row_of(int64_t row, int n_rows, int n_heads) {
  if constexpr (WIDE_ROWS) {
    return {row % n_rows, (row / n_rows) % n_heads, row / (static_cast<int64_t>(n_rows) * n_heads)};
  } else {
    const uint32_t r = static_cast<uint32_t>(row), token_group = r / static_cast<uint32_t>(n_rows);
    return {r - token_group * static_cast<uint32_t>(n_rows), token_group % static_cast<uint32_t>(n_heads),
            token_group / static_cast<uint32_t>(n_heads)};
  }
}

// Both views' copies in one launch, a kernel boundary fewer in front of the f16 prefill kernel
// (docs/performance.md, materialize): work-groups [0, k.blocks) copy K, the rest V, one thread per
// 16-value chunk. The storage type is a run-time value, one per work-group, so that one kernel
// serves every K/V pair. WIDE_ROWS as for materialize_source_row_of.
template <bool WIDE_ROWS>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(materialize_threads)
    materialize_kernel(materialize_copy k, materialize_copy v, turbo3_lut lut) {
  const bool v_side = blockIdx.x >= k.blocks;
  const unsigned block = v_side ? blockIdx.x - k.blocks : blockIdx.x;
  const int64_t idx = static_cast<int64_t>(block) * materialize_threads + threadIdx.x;
  if (idx >= (v_side ? v.n_chunks : k.n_chunks)) return;
  const int shift = v_side ? v.chunk_shift : k.chunk_shift;
  const int c = static_cast<int>(idx & ((int64_t{1} << shift) - 1));
  const materialize_source_row at = materialize_source_row_of<WIDE_ROWS>(idx >> shift, v_side ? v.n_rows : k.n_rows,
                                                                         v_side ? v.n_heads : k.n_heads);
  const char* const src_row = (v_side ? v.src : k.src) + at.token * (v_side ? v.nb1 : k.nb1) +
                              at.head * (v_side ? v.nb2 : k.nb2) + at.seq * (v_side ? v.nb3 : k.nb3);
  uint4* const out = (v_side ? v.dst : k.dst) + 2 * idx;
  switch (v_side ? v.type : k.type) {
    case data_type::turbo3: materialize_chunk<kv::turbo3_loader>(src_row, c, lut, out); break;
    case data_type::turbo4: materialize_chunk<kv::turbo4_loader>(src_row, c, lut, out); break;
    case data_type::turbo2: materialize_chunk<kv::turbo2_loader>(src_row, c, lut, out); break;
    case data_type::q8_0: materialize_chunk<kv::q8_0_loader>(src_row, c, lut, out); break;
    default: materialize_chunk<kv::f16_loader>(src_row, c, lut, out); break;
  }
}

// The copies of the views a plan copies (k_dst / v_dst: nullptr for a view not copied).
inline void launch_materialize(const attention_params& p, const materialize_plan& plan, const turbo3_lut& lut,
                               void* k_dst, void* v_dst, hipStream_t stream) {
  materialize_copy k, v;
  if (plan.k) k = make_materialize_copy(p.k, k_dst);
  if (plan.v) v = make_materialize_copy(p.v, v_dst);
  const unsigned blocks = k.blocks + v.blocks;
  if (blocks == 0) return;
  if (materialize_wide_rows(k) || materialize_wide_rows(v))
    materialize_kernel<true><<<blocks, materialize_threads, 0, stream>>>(k, v, lut);
  else
    materialize_kernel<false><<<blocks, materialize_threads, 0, stream>>>(k, v, lut);
}

// ---- the family's entry point (the four questions of vec_family) ----------------------------------
struct materialize_family {
  using plan_type = materialize_plan;
  static status supported(const attention_params& p) { return materialize_supported(p); }
  static status plan(const attention_params& p, const launch_options& opt, int device, materialize_plan& out) {
    out = make_materialize_plan(p, opt, device);
    return status::ok;
  }
  static size_t workspace_bytes(const materialize_plan& plan) { return plan.total; }
  // The dense copies into the workspace, then the f16 kernel over them.
  static status launch(const attention_params& p, const materialize_plan& plan, void* workspace, int device,
                       hipStream_t stream) {
    const platform::error_scope errors;
    char* const base = plan.total > 0 ? static_cast<char*>(align_up(workspace, materialize_align)) : nullptr;
    if (plan.k || plan.v)
      launch_materialize(p, plan, make_turbo3_lut(p.kv_codebook), base, base + plan.v_offset, stream);
    if (!errors.launches_ok()) return status::runtime_error;
    const attention_params dense = dense_params(p, plan, base);
    if (plan.mma)
      return mma_family::launch_as(dense, p.k.type, p.v.type, plan.dense_mma, base + plan.partial_offset, device,
                                   stream);
    return launch_tile(dense, p.k.type, p.v.type, device, stream);
  }
};

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
