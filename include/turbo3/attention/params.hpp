// attention_params: the views and scalars of one flash-attention call, following ggml's
// FLASH_ATTN_EXT semantics so an engine maps onto it without copies.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/format/codebook.hpp"
#include "turbo3/types.hpp"

namespace turbo3 {

// A strided 4-d view in ggml order: ne[0] is the contiguous dimension. nb[1..3] are byte strides
// of dimensions 1..3 (nb[0] is implied by the type: elements are contiguous within a row; a row of
// a block type is ne[0] / values_per_block(type) consecutive blocks).
struct tensor_view {
  const void* data = nullptr;
  data_type type = data_type::f16;
  int64_t ne[4] = {0, 1, 1, 1};
  size_t nb[4] = {0, 0, 0, 0};
};

struct output_view {
  void* data = nullptr;
  data_type type = data_type::f32;  // f32 or f16
  int64_t ne[4] = {0, 1, 1, 1};
  size_t nb[4] = {0, 0, 0, 0};
};

// MLA's cache as the TurboQuant fork keeps it (DeepSeek, Kimi and GLM's MLA models): K rows of 576
// values (512 latent, then 64 of RoPE) zero-padded to 640 for whole 128-value groups, V a view of
// each K row's first 512 values (K's data, type and strides). docs/design.md says which kernels serve it.
inline constexpr int mla_head_dim_k = 640, mla_head_dim_v = 512;

// Shapes (ggml order):
//   q    [D_k, n_q,  n_head,    n_seq]  f32 or f16
//   k    [D_k, n_kv, n_head_kv, n_seq]  f16, turbo3, turbo4, turbo2 or q8_0 (the kernels: f16 or turbo3)
//   v    [D_v, n_kv, n_head_kv, n_seq]  f16, turbo3, turbo4, turbo2 or q8_0 (the kernels: f16 or turbo3)
//   mask [>=n_kv, >=n_q, m2, m3]        f16, optional; head h uses mask plane h % m2, seq s uses s % m3
//   out  [D_v, n_q,  n_head,    n_seq]  f32 or f16, any strides (ggml's permuted layout is a stride choice)
// Query head h reads KV head h / (n_head / n_head_kv).
//
// Aliasing: out must not overlap any input. Its bytes (the span of its view) share none with the
// spans of q, k, v and the mask, nor with the n_head floats of sinks, and no two of its rows share
// a byte. The inputs may overlap each other (Q may broadcast with a stride of 0, K and V may be
// one buffer). validate() refuses a call that breaks this (validate.hpp, rules 11-13).
//
// Score of query i against key j, exactly as ggml:
//   s = scale * <q_i, k_j>;  if softcap > 0: s = softcap * tanh(s / softcap);
//   s += slope(h) * mask[i][j] (slope 1 without ALiBi);  a -inf entry skips the key.
//   causal: key j is visible to query i iff j <= i + (n_kv - n_q) (the queries are the last n_q
//   positions of the context), in addition to the mask when both are given.
//   sinks (per query head, f32): exp(sink[h] - max) joins the softmax denominator only.
//   A query row that sees no key at all (every key masked or outside the causal window) gets
//   zeros, with or without a sink (as ggml's CPU path does).
struct attention_params {
  tensor_view q, k, v;
  tensor_view mask;                // mask.data == nullptr: no mask
  const float* sinks = nullptr;    // [n_head] or nullptr
  output_view out;

  float scale = 1.0f;
  float max_bias = 0.0f;           // ALiBi; 0 disables it
  float softcap = 0.0f;            // 0 disables it
  bool causal = false;

  codebook kv_codebook = codebook::lloyd_max;  // the table every turbo3 dequant in the call uses
  // The library applies the rotation of docs/format.md §5 itself: it rotates Q when K is of a
  // rotated type (turbo3, turbo4, turbo2: stores_rotated_values) and un-rotates the output when V
  // is. An engine that does either in its own graph turns the matching flag off. Ignored for f16
  // and q8_0 K (resp. V).
  bool rotate_q = true;
  bool unrotate_out = true;

  int64_t head_dim_k() const { return q.ne[0]; }
  int64_t head_dim_v() const { return v.ne[0]; }
  int64_t n_q() const { return q.ne[1]; }
  int64_t n_head() const { return q.ne[2]; }
  int64_t n_seq() const { return q.ne[3]; }
  int64_t n_kv() const { return k.ne[1]; }
  int64_t n_head_kv() const { return k.ne[2]; }
};

// Base-2 exponent of the ALiBi slope of query head h (ggml's definition): slope = 2^exponent.
// n2 = 2^floor(log2 n_head); h < n2: m0^(h+1), m0 = 2^(-b/n2); else m1^(2(h-n2)+1), m1 = 2^(-b/(2 n2)).
TURBO3_HD inline float alibi_slope_log2(float max_bias, int h, int n_head) {
  if (max_bias <= 0.0f) return 0.0f;
  int n2 = 1;
  while (2 * n2 <= n_head) n2 *= 2;
  return h < n2 ? -max_bias / static_cast<float>(n2) * static_cast<float>(h + 1)
                : -max_bias / static_cast<float>(2 * n2) * static_cast<float>(2 * (h - n2) + 1);
}

}  // namespace turbo3
