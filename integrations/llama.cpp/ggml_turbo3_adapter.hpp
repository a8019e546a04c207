// The mapping from a ggml FLASH_ATTN_EXT node to turbo3::attention_params. Plain C++: it reads
// only the fields every ggml tensor has (type, ne, nb, data, op, op_params, src), so it builds and
// is tested without ggml (tests/cpu/test_ggml_adapter.cpp); the engine's glue
// (ggml-turbo3.cu) instantiates it with ggml_tensor and ggml's enum values.
//
// ggml's FLASH_ATTN_EXT, as the TurboQuant fork builds it:
//   src[0] q     [D_k, n_q, n_head, n_seq]     f32 (any strides)
//   src[1] k     [D_k, n_kv, n_head_kv, n_seq] f16 / turbo3 / ... (a view of the cache)
//   src[2] v     [D_v, n_kv, n_head_kv, n_seq]
//   src[3] mask  [n_kv', n_q', m2, m3]         f16 or absent
//   src[4] sinks [n_head]                      f32 or absent
//   dst          [D_v, n_head, n_q, n_seq]     f32, contiguous (heads before queries)
//   op_params    float scale, float max_bias, float logit_softcap, int32 precision
//
// Rotation: the fork's graph rotates Q before the node and un-rotates the node's output after it
// (ggml_turbo_wht, with its optional per-channel InnerQ scale), so the node itself is plain
// attention over the stored (rotated-domain) K/V: the call must rotate nothing
// (rotate_q = unrotate_out = false). The codebook is the table the fork's quantizer and kernels
// hold (codebook::legacy: levels +-0.190685, ...; tests/cpu/test_fork_golden.cpp reproduces the
// fork's bytes with it), so the library decodes the cache the fork wrote with the fork's levels.
#pragma once

#include <cstdint>
#include <cstring>

#include "turbo3/attention/params.hpp"
#include "turbo3/types.hpp"

namespace turbo3 {
namespace ggml_adapter {

// The turbo3 table of the fork's cache (its quantizer's and kernels' levels).
inline constexpr codebook turbo3_codebook = codebook::legacy;

// The ggml enum values the mapping compares against (the engine's ggml.h supplies them).
struct ggml_ids {
  int type_f32;
  int type_f16;
  int type_turbo3;
  int op_flash_attn_ext;
};

// Which FLASH_ATTN_EXT nodes the adapter offers to the library.
enum class serve_policy {
  none,    // every node stays on the engine's kernels
  turbo3,  // nodes with a turbo3 K or V (the default)
  all,     // also f16/f16 nodes
};

// Why a node stays on the engine's kernels, or none. Each value names one counter of the glue.
enum class refusal {
  none,
  policy,          // the serve policy leaves this node to the engine
  not_flash_attn,  // another op (e.g. the fork's banded variant)
  kv_type,         // K or V is neither f16 nor turbo3 (q8_0, turbo2, turbo4, bf16, f32, ...)
  q_type,          // Q is neither f32 nor f16
  out_type,        // the output is not f32
  mask_type,       // a mask that is not f16
  sinks_layout,    // sinks that are not a contiguous f32 vector of n_head values
  row_layout,      // a view whose elements are not contiguous within a row (nb[0])
  library,         // turbo3::supported() says unsupported or invalid (the glue fills this in)
  count_
};

inline const char* to_string(refusal r) {
  switch (r) {
    case refusal::none: return "served";
    case refusal::policy: return "policy";
    case refusal::not_flash_attn: return "not FLASH_ATTN_EXT";
    case refusal::kv_type: return "K/V type";
    case refusal::q_type: return "Q type";
    case refusal::out_type: return "output type";
    case refusal::mask_type: return "mask type";
    case refusal::sinks_layout: return "sinks layout";
    case refusal::row_layout: return "row layout";
    case refusal::library: return "library";
    case refusal::count_: break;
  }
  return "unknown";
}

struct mapping {
  attention_params params;
  refusal why = refusal::none;
};

namespace detail {

inline bool to_data_type(int ggml_type, const ggml_ids& ids, data_type& out) {
  if (ggml_type == ids.type_f32) return out = data_type::f32, true;
  if (ggml_type == ids.type_f16) return out = data_type::f16, true;
  if (ggml_type == ids.type_turbo3) return out = data_type::turbo3, true;
  return false;
}

// Bytes between consecutive elements of a row: ggml's nb[0] (a turbo3 row's "element" is a block).
inline size_t element_stride(data_type t) { return t == data_type::turbo3 ? block_bytes : element_bytes(t); }

template <class View, class Tensor>
void copy_shape(View& v, const Tensor* t) {
  for (int i = 0; i < 4; ++i) {
    v.ne[i] = t->ne[i];
    v.nb[i] = static_cast<size_t>(t->nb[i]);
  }
}

template <class Tensor>
float op_param_float(const Tensor* t, int i) {
  float f;
  std::memcpy(&f, reinterpret_cast<const char*>(t->op_params) + i * sizeof(float), sizeof f);
  return f;
}

}  // namespace detail

// Maps `dst` (a FLASH_ATTN_EXT node) onto attention_params, or says why it stays with the engine.
// The params are complete only when why == refusal::none; turbo3::supported(params) then decides
// whether the library's kernels cover the shape (the glue's refusal::library).
template <class Tensor>
mapping map_flash_attn_ext(const Tensor* dst, const ggml_ids& ids, serve_policy policy = serve_policy::turbo3) {
  mapping m;
  attention_params& p = m.params;
  auto refuse = [&m](refusal r) {
    m.why = r;
    return m;
  };
  if (static_cast<int>(dst->op) != ids.op_flash_attn_ext) return refuse(refusal::not_flash_attn);
  const Tensor* q = dst->src[0];
  const Tensor* k = dst->src[1];
  const Tensor* v = dst->src[2];
  const Tensor* mask = dst->src[3];
  const Tensor* sinks = dst->src[4];

  if (!detail::to_data_type(static_cast<int>(k->type), ids, p.k.type) || p.k.type == data_type::f32 ||
      !detail::to_data_type(static_cast<int>(v->type), ids, p.v.type) || p.v.type == data_type::f32)
    return refuse(refusal::kv_type);
  const bool any_turbo3 = p.k.type == data_type::turbo3 || p.v.type == data_type::turbo3;
  if (policy == serve_policy::none || (policy == serve_policy::turbo3 && !any_turbo3)) return refuse(refusal::policy);
  if (!detail::to_data_type(static_cast<int>(q->type), ids, p.q.type) || p.q.type == data_type::turbo3)
    return refuse(refusal::q_type);
  if (static_cast<int>(dst->type) != ids.type_f32) return refuse(refusal::out_type);

  p.q.data = q->data;
  detail::copy_shape(p.q, q);
  p.k.data = k->data;
  detail::copy_shape(p.k, k);
  p.v.data = v->data;
  detail::copy_shape(p.v, v);

  // The output: ggml stores heads before queries ([D_v, n_head, n_q, n_seq]); the library's view
  // is [D_v, n_q, n_head, n_seq], so dimensions 1 and 2 swap their extents and strides.
  p.out.data = dst->data;
  p.out.type = data_type::f32;
  p.out.ne[0] = dst->ne[0];
  p.out.ne[1] = dst->ne[2];
  p.out.ne[2] = dst->ne[1];
  p.out.ne[3] = dst->ne[3];
  p.out.nb[0] = static_cast<size_t>(dst->nb[0]);
  p.out.nb[1] = static_cast<size_t>(dst->nb[2]);
  p.out.nb[2] = static_cast<size_t>(dst->nb[1]);
  p.out.nb[3] = static_cast<size_t>(dst->nb[3]);

  if (static_cast<size_t>(q->nb[0]) != detail::element_stride(p.q.type) ||
      static_cast<size_t>(k->nb[0]) != detail::element_stride(p.k.type) ||
      static_cast<size_t>(v->nb[0]) != detail::element_stride(p.v.type) ||
      static_cast<size_t>(dst->nb[0]) != sizeof(float))
    return refuse(refusal::row_layout);

  if (mask) {
    if (static_cast<int>(mask->type) != ids.type_f16) return refuse(refusal::mask_type);
    if (static_cast<size_t>(mask->nb[0]) != 2) return refuse(refusal::row_layout);
    p.mask.data = mask->data;
    p.mask.type = data_type::f16;
    detail::copy_shape(p.mask, mask);
  }
  if (sinks) {
    if (static_cast<int>(sinks->type) != ids.type_f32 || sinks->ne[0] != q->ne[2] || sinks->ne[1] != 1 ||
        sinks->ne[2] != 1 || sinks->ne[3] != 1 || static_cast<size_t>(sinks->nb[0]) != sizeof(float))
      return refuse(refusal::sinks_layout);
    p.sinks = static_cast<const float*>(sinks->data);
  }

  p.scale = detail::op_param_float(dst, 0);
  p.max_bias = detail::op_param_float(dst, 1);
  p.softcap = detail::op_param_float(dst, 2);
  // op_params[3], the precision, asks for f32 softmax and accumulation where a kernel offers f16
  // ones; the library's kernels always keep them in f32, so every precision is served.
  p.causal = false;  // ggml passes causality in the mask
  p.kv_codebook = turbo3_codebook;
  p.rotate_q = false;
  p.unrotate_out = false;
  return m;
}

// A TURBO_WHT node's parameters (the fork's rotation of Q before attention and of the output after
// it): direction 0 forward, 1 inverse, and the group size. ggml_turbo_wht stores the group size at
// `op_params + sizeof(int)` on an int32_t pointer, which is element 4, not element 1.
struct rotation_params {
  int32_t direction = 0, group = 0;
};

template <class Tensor>
rotation_params rotation_params_of(const Tensor* t) {
  rotation_params r;
  std::memcpy(&r.direction, t->op_params, sizeof r.direction);
  std::memcpy(&r.group, t->op_params + sizeof(int), sizeof r.group);
  return r;
}

}  // namespace ggml_adapter
}  // namespace turbo3
