// The device-side form of attention_params: raw pointers, strides and precomputed scalars,
// passed by value to the VEC and combine kernels.
#pragma once

#include <cstdint>

#include "turbo3/attention/params.hpp"
#include "turbo3/kv/loaders.hpp"

namespace turbo3 {
namespace detail {

inline constexpr float log2e = 1.4426950408889634f;

struct attention_args {
  const char* q;
  const char* k;
  const char* v;
  const char* mask;     // nullptr: no mask
  const float* sinks;   // nullptr: no sinks
  char* out;
  float* partial;       // split-KV partials: [seq][kv_head][q_tile][split][row][D_v + 2]

  int64_t q_nb1, q_nb2, q_nb3;
  int64_t k_nb1, k_nb2, k_nb3;
  int64_t v_nb1, v_nb2, v_nb3;
  int64_t mask_nb1, mask_nb2, mask_nb3;
  int64_t out_nb1, out_nb2, out_nb3;

  int n_q, n_kv, n_head, n_head_kv, n_seq;
  int gqa;              // query heads per KV head
  int ncols;            // queries per work-group
  int q_tiles;          // ceil(n_q / ncols)
  int mask_ne2, mask_ne3;
  int n_splits, tiles_per_split;

  bool q_f16, out_f16;
  bool causal, rotate_q, unrotate_out;

  float q_prescale;     // scale * log2(e), or scale / softcap with softcap
  float softcap_post;   // softcap * log2(e), 0 without softcap
  float max_bias;
  turbo3_lut lut;
};

}  // namespace detail
}  // namespace turbo3
