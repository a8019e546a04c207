// validate(): the well-formedness and storage-format rules of one attention call, checked on the
// host before anything is launched. Plain C++ (no runtime needed); it never dereferences a data
// pointer, so host pointers or device pointers are equally fine.
//
// Rules, in the order they are checked (the first failure is returned):
//
//  1. q, k, v and out data pointers are non-null.                                  invalid_argument
//     (mask.data == nullptr means "no mask"; sinks == nullptr means "no sinks".)
//  2. Types: q f32 or f16; k and v f16, turbo3, turbo4, turbo2 or q8_0; out f32 or f16;
//     mask f16.                                                                     unsupported
//  3. Every ne[i] of q, k, v, out (and mask when present) is >= 1               -> invalid_argument
//     and fits a 32-bit int (kernels index with int)                            -> unsupported.
//  4. Shapes agree (D_k = q.ne[0], n_q = q.ne[1], n_head = q.ne[2], n_seq = q.ne[3],
//     n_kv = k.ne[1], n_head_kv = k.ne[2], D_v = v.ne[0]):                         invalid_argument
//       k.ne[0] == D_k; v.ne[1] == n_kv; v.ne[2] == n_head_kv; k.ne[3] == v.ne[3] == n_seq;
//       out.ne == [D_v, n_q, n_head, n_seq].
//  5. GQA: n_head % n_head_kv == 0.                                                invalid_argument
//  6. K (resp. V) rows are whole blocks: D_k (resp. D_v) % values_per_block(type) == 0 (128 for
//     turbo3, turbo4 and turbo2, 32 for q8_0).                                     unsupported
//  7. Data pointers are aligned to the storage alignment of their type
//     (f32: 4, f16: 2, block types: 2 for the block's fp16 norm or scale); sinks (f32): 4.
//                                                                                  invalid_argument
//  8. Strides of q, k, v, out: nb[1], nb[2], nb[3] are multiples of the storage alignment; when
//     ne[1] > 1, nb[1] >= row_bytes(type, ne[0]) (rows do not overlap). For q, k and v, nb[2] and
//     nb[3] may be anything aligned, 0 included (broadcast); out's rows are rule 12. nb[0] is
//     ignored (a row is always contiguous).                                         invalid_argument
//  9. Mask (when present): ne[0] >= n_kv, ne[1] >= n_q, n_head % ne[2] == 0 and
//     n_seq % ne[3] == 0 (plane h % ne[2], sequence s % ne[3]); pointer and strides aligned
//     to 2; when ne[1] > 1, nb[1] >= 2 * ne[0].                                      invalid_argument
// 10. Scalars: scale finite; softcap finite and >= 0; max_bias finite and >= 0;
//     kv_codebook one of the known tables.                                          invalid_argument
// 11. Spans: for q, k, v, out (and mask when present) every nb[1..3] is below 2^63, and the span
//     of the view, (ne[1]-1)*nb[1] + (ne[2]-1)*nb[2] + (ne[3]-1)*nb[3] + one row's bytes, fits in
//     2^63 - 1 bytes without wrapping the address space from its data pointer (view_bytes; the
//     kernels offset rows with signed 64-bit strides).                              invalid_argument
// 12. Out's rows, one per (query, head, sequence), never share a byte (two work-groups would write
//     it): taken in increasing stride order, each of out's dimensions 1..3 with more than one
//     element steps past the whole span of those before it (out_rows_disjoint). Every dense or
//     permuted layout (ggml's included) meets it; an interleaving it cannot prove disjoint is
//     refused.                                                                      invalid_argument
// 13. Aliasing: out shares no byte with an input: the spans of q, k, v and the mask (rule 11) and
//     the n_head floats of sinks. Inputs may overlap each other.                    invalid_argument
//
// Which head dims and type combinations a given kernel instantiates is the launcher's business
// (it reports `unsupported`); validate() only says whether the request is well formed. turbo4,
// turbo2 and q8_0 K/V are read by the scalar VEC kernel and materialize only (has_kernel_loader,
// has_tile_loader, kv/loaders.hpp): TILE and MMA report unsupported for them.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "turbo3/attention/params.hpp"
#include "turbo3/status.hpp"
#include "turbo3/types.hpp"

namespace turbo3 {
namespace detail {

// Alignment, in bytes, of a pointer or stride into storage of type t (block types: their fp16 norm
// or scale).
constexpr size_t storage_alignment(data_type t) { return t == data_type::f32 ? 4 : 2; }

constexpr bool is_float_type(data_type t) { return t == data_type::f32 || t == data_type::f16; }
constexpr bool is_kv_type(data_type t) {
  return t == data_type::f16 || t == data_type::turbo3 || t == data_type::turbo4 || t == data_type::turbo2 ||
         t == data_type::q8_0;
}

// Rule 3 for one view.
inline status check_extents(const int64_t (&ne)[4]) {
  for (int i = 0; i < 4; ++i)
    if (ne[i] < 1) return status::invalid_argument;
  for (int i = 0; i < 4; ++i)
    if (ne[i] > INT32_MAX) return status::unsupported;
  return status::ok;
}

// Rule 11 for one view: its span in bytes from its data pointer (see the list above), computed
// in unsigned arithmetic checked against 2^63 - 1, and not wrapping the address space from data.
// false where it does not fit (or ne is out of rule 3's range). The kernels' view_end uses it too.
inline bool view_bytes(const void* data, data_type t, const int64_t (&ne)[4], const size_t (&nb)[4], size_t& bytes) {
  constexpr uint64_t limit = static_cast<uint64_t>(INT64_MAX);
  if (ne[0] < 1 || ne[0] > INT32_MAX) return false;
  uint64_t total = row_bytes(t, ne[0]);
  for (int i = 1; i < 4; ++i) {
    if (ne[i] < 1 || ne[i] > INT32_MAX || nb[i] > limit) return false;
    const uint64_t steps = static_cast<uint64_t>(ne[i] - 1);
    if (steps != 0 && nb[i] > (limit - total) / steps) return false;
    total += steps * nb[i];
  }
  if (total > UINTPTR_MAX - reinterpret_cast<uintptr_t>(data)) return false;
  bytes = static_cast<size_t>(total);
  return true;
}

// Rule 12 (spans already checked by rule 11, so no sum below overflows): the dimensions 1..3 of
// more than one element, in increasing stride order, each step at least past the span of the
// smaller ones. Sufficient for disjoint rows, and exactly the nested layouts.
inline bool out_rows_disjoint(data_type t, const int64_t (&ne)[4], const size_t (&nb)[4]) {
  int dims[3];
  int n = 0;
  for (int i = 1; i < 4; ++i)
    if (ne[i] > 1) dims[n++] = i;
  for (int i = 1; i < n; ++i)  // insertion sort by stride
    for (int j = i; j > 0 && nb[dims[j]] < nb[dims[j - 1]]; --j) {
      const int d = dims[j];
      dims[j] = dims[j - 1];
      dims[j - 1] = d;
    }
  uint64_t span = row_bytes(t, ne[0]);
  for (int i = 0; i < n; ++i) {
    const int d = dims[i];
    if (nb[d] < span) return false;
    span += static_cast<uint64_t>(ne[d] - 1) * nb[d];
  }
  return true;
}

// Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share a byte.
inline bool ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const uintptr_t x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  if (a_bytes == 0 || b_bytes == 0) return false;
  return x <= y ? y - x < a_bytes : x - y < b_bytes;
}

// Rules 7 and 8 for one view (types and extents already checked).
inline status check_layout(const void* data, data_type t, const int64_t (&ne)[4],
                           const size_t (&nb)[4]) {
  const size_t a = storage_alignment(t);
  if (!is_aligned(data, a)) return status::invalid_argument;
  for (int i = 1; i < 4; ++i)
    if (nb[i] % a != 0) return status::invalid_argument;
  if (ne[1] > 1 && nb[1] < row_bytes(t, ne[0])) return status::invalid_argument;
  return status::ok;
}

}  // namespace detail

inline status validate(const attention_params& p) {
  const bool has_mask = p.mask.data != nullptr;

  // 1. pointers
  if (!p.q.data || !p.k.data || !p.v.data || !p.out.data) return status::invalid_argument;

  // 2. types
  if (!detail::is_float_type(p.q.type)) return status::unsupported;
  if (!detail::is_kv_type(p.k.type) || !detail::is_kv_type(p.v.type)) return status::unsupported;
  if (!detail::is_float_type(p.out.type)) return status::unsupported;
  if (has_mask && p.mask.type != data_type::f16) return status::unsupported;

  // 3. extents
  for (const int64_t(*ne)[4] : {&p.q.ne, &p.k.ne, &p.v.ne, &p.out.ne}) {
    const status s = detail::check_extents(*ne);
    if (s != status::ok) return s;
  }
  if (has_mask) {
    const status s = detail::check_extents(p.mask.ne);
    if (s != status::ok) return s;
  }

  // 4. shapes
  const int64_t d_k = p.q.ne[0], n_q = p.q.ne[1], n_head = p.q.ne[2], n_seq = p.q.ne[3];
  const int64_t n_kv = p.k.ne[1], n_head_kv = p.k.ne[2], d_v = p.v.ne[0];
  if (p.k.ne[0] != d_k) return status::invalid_argument;
  if (p.v.ne[1] != n_kv || p.v.ne[2] != n_head_kv) return status::invalid_argument;
  if (p.k.ne[3] != n_seq || p.v.ne[3] != n_seq) return status::invalid_argument;
  if (p.out.ne[0] != d_v || p.out.ne[1] != n_q || p.out.ne[2] != n_head || p.out.ne[3] != n_seq)
    return status::invalid_argument;

  // 5. GQA
  if (n_head % n_head_kv != 0) return status::invalid_argument;

  // 6. rows are whole blocks
  if (d_k % values_per_block(p.k.type) != 0 || d_v % values_per_block(p.v.type) != 0) return status::unsupported;

  // 7 + 8. pointer alignment and strides
  for (const tensor_view* t : {&p.q, &p.k, &p.v}) {
    const status s = detail::check_layout(t->data, t->type, t->ne, t->nb);
    if (s != status::ok) return s;
  }
  {
    const status s = detail::check_layout(p.out.data, p.out.type, p.out.ne, p.out.nb);
    if (s != status::ok) return s;
  }
  if (p.sinks && !detail::is_aligned(p.sinks, alignof(float))) return status::invalid_argument;

  // 9. mask
  if (has_mask) {
    const tensor_view& m = p.mask;
    if (m.ne[0] < n_kv || m.ne[1] < n_q) return status::invalid_argument;
    if (n_head % m.ne[2] != 0 || n_seq % m.ne[3] != 0) return status::invalid_argument;
    const status s = detail::check_layout(m.data, m.type, m.ne, m.nb);
    if (s != status::ok) return s;
  }

  // 10. scalars
  if (!std::isfinite(p.scale)) return status::invalid_argument;
  if (!std::isfinite(p.softcap) || !(p.softcap >= 0.0f)) return status::invalid_argument;
  if (!std::isfinite(p.max_bias) || !(p.max_bias >= 0.0f)) return status::invalid_argument;
  if (!is_known(p.kv_codebook)) return status::invalid_argument;

  // 11. spans
  size_t q_bytes = 0, k_bytes = 0, v_bytes = 0, out_bytes = 0, mask_bytes = 0;
  if (!detail::view_bytes(p.q.data, p.q.type, p.q.ne, p.q.nb, q_bytes) ||
      !detail::view_bytes(p.k.data, p.k.type, p.k.ne, p.k.nb, k_bytes) ||
      !detail::view_bytes(p.v.data, p.v.type, p.v.ne, p.v.nb, v_bytes) ||
      !detail::view_bytes(p.out.data, p.out.type, p.out.ne, p.out.nb, out_bytes))
    return status::invalid_argument;
  if (has_mask && !detail::view_bytes(p.mask.data, p.mask.type, p.mask.ne, p.mask.nb, mask_bytes))
    return status::invalid_argument;

  // 12. out's rows are disjoint
  if (!detail::out_rows_disjoint(p.out.type, p.out.ne, p.out.nb)) return status::invalid_argument;

  // 13. out overlaps no input
  const size_t sinks_bytes = p.sinks ? static_cast<size_t>(n_head) * sizeof(float) : 0;
  if (detail::ranges_overlap(p.out.data, out_bytes, p.q.data, q_bytes) ||
      detail::ranges_overlap(p.out.data, out_bytes, p.k.data, k_bytes) ||
      detail::ranges_overlap(p.out.data, out_bytes, p.v.data, v_bytes) ||
      (has_mask && detail::ranges_overlap(p.out.data, out_bytes, p.mask.data, mask_bytes)) ||
      (p.sinks && detail::ranges_overlap(p.out.data, out_bytes, p.sinks, sinks_bytes)))
    return status::invalid_argument;

  return status::ok;
}

}  // namespace turbo3
