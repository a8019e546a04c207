// VEC on matrix instructions (NVIDIA): the same work-group layout, tiles and online softmax as the
// scalar VEC kernel, but Q.K^T and P.V run as m16n8k16 fragments with f32 accumulation. The
// turbo3 unpack produces fp16 pairs straight from byte permutes (no float conversion), and the
// multiply-adds cost one instruction per 4096 of them, so the per-value cost is the unpack alone.
//
// Up to 8 query rows (the fragment's N). Score phase: a warp multiplies 16 keys (M) by all rows;
// lane (g, t) holds keys g and g+8, and per 128-value block the chunks 8b+t and 8b+t+4, whose
// slots map to the fragment's K index (dims are a free permutation of a dot product). A separate
// accumulator per block lets each key's block norm multiply once. Value phase: O^T (dims x rows)
// += V^T (dims x 16 keys) P^T; the packed pairs of V^T run along keys, so two key rows are decoded
// together; m-tile tau of block b holds chunk 8b+g, slots tau%8 and tau%8+8, and P^T of block b
// carries p * norm_b.
#pragma once

#include "turbo3/attention/vec.hpp"
#include "turbo3/platform/mma.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

inline constexpr int vec_mma_rows = 8;

TURBO3_HD constexpr bool vec_mma_head_dim(int d) { return d == 128 || d == 256; }

template <int D, class KL, class VL>
struct vec_mma_config {
  static constexpr int ROWS = vec_mma_rows;
  static constexpr int blocks = D / block_values;                       // 128-value groups per row
  static constexpr int v_scales = VL::type == data_type::turbo3 ? blocks : 1;
  static constexpr int m_tiles = D / 16;                                // value-phase accumulators
  static constexpr int n_warps = vec_threads / 32;
  static constexpr int q_floats = ROWS * D;
  static constexpr int w_floats = v_scales * vec_tile * ROWS;
  static constexpr int reduce_floats = n_warps * ROWS * D;
  static constexpr int max2(int a, int b) { return a > b ? a : b; }
  static constexpr int smem_floats = max2(max2(q_floats + w_floats, reduce_floats), 2 * q_floats);
  static_assert(vec_mma_head_dim(D), "matrix VEC covers D = 128 and 256");
};

template <int D, class KL, class VL>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(vec_threads) vec_mma_kernel(attention_args a, int head_splits) {
  using C = vec_mma_config<D, KL, VL>;
  constexpr int ROWS = C::ROWS;
  alignas(16) __shared__ float smem[C::smem_floats];  // 16-byte rows for the rotation
  __shared__ float warp_part[C::n_warps][ROWS];
  __shared__ float alpha_s[ROWS];
  __shared__ float m_s[ROWS];
  __shared__ vec_row_info rows_s[ROWS];
  __shared__ float score_s[vec_tile * ROWS];
  float* q_s = smem;
  float* w_s = smem + C::q_floats;

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const vec_context x = make_vec_context(a, head_splits);
  if (tid < ROWS) {  // load_queries synchronizes before any use
    m_s[tid] = -INFINITY;
    rows_s[tid] = vec_row_info_at(a, x, tid);
  }
  load_queries<D, KL, ROWS>(a, x, q_s, smem + C::q_floats, tid);

  // Q^T fragments: row g, chunk 8b+t+4h, k-step s: slots (4s, 4s+1) and (4s+2, 4s+3).
  uint32_t qb[C::blocks][2][4][2];
  TURBO3_UNROLL
  for (int b = 0; b < C::blocks; ++b)
    TURBO3_UNROLL
    for (int h = 0; h < 2; ++h)
      TURBO3_UNROLL
      for (int s = 0; s < 4; ++s) {
        const float* q = q_s + g * D + (8 * b + t + 4 * h) * kv::chunk_values + 4 * s;
        qb[b][h][s][0] = platform::pack_half2(q[0], q[1]);
        qb[b][h][s][1] = platform::pack_half2(q[2], q[3]);
      }
  platform::sync_threads();  // q_s is reused for w_s below

  float l_run[ROWS];
  TURBO3_UNROLL
  for (int r = 0; r < ROWS; ++r) l_run[r] = 0.0f;
  float acc[C::m_tiles][4];
  TURBO3_UNROLL
  for (int m = 0; m < C::m_tiles; ++m)
    TURBO3_UNROLL
    for (int i = 0; i < 4; ++i) acc[m][i] = 0.0f;

  for (int tile = x.tile_begin; tile < x.tile_end; ++tile) {
    const int j0 = tile * vec_tile;
    if (j0 >= x.kv_end) break;
    const int n_valid = min(vec_tile, x.kv_end - j0);

    // ---- scores: S (16 keys x 8 rows) per warp step ------------------------------------------
    for (int kg = warp; kg * 16 < n_valid; kg += C::n_warps) {
      const int key_a = kg * 16 + g, key_b = key_a + 8;
      const bool ok_a = key_a < n_valid, ok_b = key_b < n_valid;
      const char* row_a = x.k_head + static_cast<int64_t>(j0 + key_a) * a.k_nb1;
      const char* row_b = x.k_head + static_cast<int64_t>(j0 + key_b) * a.k_nb1;
      typename KL::raw_chunk raw_a[C::blocks][2], raw_b[C::blocks][2];
      float norm_a[C::blocks], norm_b[C::blocks];
      TURBO3_UNROLL
      for (int b = 0; b < C::blocks; ++b) {  // all loads first
        norm_b[b] = ok_b ? KL::scale(row_b, b) : 0.0f;
        norm_a[b] = ok_a ? KL::scale(row_a, b) : 0.0f;
        TURBO3_UNROLL
        for (int h = 0; h < 2; ++h) {
          raw_a[b][h] = ok_a ? KL::load_raw(row_a, 8 * b + t + 4 * h) : typename KL::raw_chunk{};
          raw_b[b][h] = ok_b ? KL::load_raw(row_b, 8 * b + t + 4 * h) : typename KL::raw_chunk{};
        }
      }
      float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      TURBO3_UNROLL
      for (int b = 0; b < C::blocks; ++b) {
        float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        TURBO3_UNROLL
        for (int h = 0; h < 2; ++h) {
          uint32_t ha[8], hb[8];
          KL::decode_half2(raw_a[b][h], a.lut, ha);
          KL::decode_half2(raw_b[b][h], a.lut, hb);
          TURBO3_UNROLL
          for (int s = 0; s < 4; ++s) {
            const uint32_t frag[4] = {ha[2 * s], hb[2 * s], ha[2 * s + 1], hb[2 * s + 1]};
            platform::mma_m16n8k16(part, frag, qb[b][h][s]);
          }
        }
        sc[0] += norm_a[b] * part[0];
        sc[1] += norm_a[b] * part[1];
        sc[2] += norm_b[b] * part[2];
        sc[3] += norm_b[b] * part[3];
      }
      if (ok_a) { score_s[key_a * ROWS + 2 * t] = sc[0]; score_s[key_a * ROWS + 2 * t + 1] = sc[1]; }
      if (ok_b) { score_s[key_b * ROWS + 2 * t] = sc[2]; score_s[key_b * ROWS + 2 * t + 1] = sc[3]; }
    }
    platform::sync_threads();
    softmax_tile<ROWS, C::v_scales, VL>(a, x, j0, score_s, rows_s, warp_part, alpha_s, w_s, m_s, l_run, tid);
    platform::sync_threads();

    // ---- values: O^T (dims x 8 rows) += V^T (dims x 16 keys) P^T --------------------------------
    const float alpha0 = alpha_s[2 * t], alpha1 = alpha_s[2 * t + 1];
    TURBO3_UNROLL
    for (int m = 0; m < C::m_tiles; ++m) {
      acc[m][0] *= alpha0;
      acc[m][1] *= alpha1;
      acc[m][2] *= alpha0;
      acc[m][3] *= alpha1;
    }
    for (int kb = warp; kb * 16 < n_valid; kb += C::n_warps) {
      const int k0 = kb * 16 + 2 * t;
      const int keys[4] = {k0, k0 + 1, k0 + 8, k0 + 9};
      uint32_t pb[C::v_scales][2];
      TURBO3_UNROLL
      for (int vb = 0; vb < C::v_scales; ++vb) {
        const float* w = w_s + vb * vec_tile * ROWS + g;  // p * norm is 0 for keys past n_valid
        pb[vb][0] = platform::pack_half2(w[keys[0] * ROWS], w[keys[1] * ROWS]);
        pb[vb][1] = platform::pack_half2(w[keys[2] * ROWS], w[keys[3] * ROWS]);
      }
      TURBO3_UNROLL
      for (int b = 0; b < C::blocks; ++b) {
        typename VL::raw_chunk raw[4];
        TURBO3_UNROLL
        for (int k = 0; k < 4; ++k)
          raw[k] = keys[k] < n_valid ? VL::load_raw(x.v_head + static_cast<int64_t>(j0 + keys[k]) * a.v_nb1, 8 * b + g)
                                     : typename VL::raw_chunk{};
        uint32_t p01[16], p89[16];
        VL::decode_pairs(raw[0], raw[1], a.lut, p01);
        VL::decode_pairs(raw[2], raw[3], a.lut, p89);
        const uint32_t* pv = pb[C::v_scales > 1 ? b : 0];
        TURBO3_UNROLL
        for (int s = 0; s < 8; ++s) {
          const uint32_t frag[4] = {p01[s], p01[s + 8], p89[s], p89[s + 8]};
          platform::mma_m16n8k16(acc[8 * b + s], frag, pv);
        }
      }
    }
    platform::sync_threads();  // w_s, score_s and alpha_s are rewritten by the next tile
  }

  // ---- partial result: each warp's accumulators, natural dimension order -------------------------
  float* red = smem;  // [n_warps][ROWS][D]
  TURBO3_UNROLL
  for (int m = 0; m < C::m_tiles; ++m) {
    const int b = m / 8, s = m % 8, c = 8 * b + g;
    const int dim_a = c * kv::chunk_values + VL::value_of_slot(s);
    const int dim_b = c * kv::chunk_values + VL::value_of_slot(s + 8);
    red[(warp * ROWS + 2 * t) * D + dim_a] = acc[m][0];
    red[(warp * ROWS + 2 * t + 1) * D + dim_a] = acc[m][1];
    red[(warp * ROWS + 2 * t) * D + dim_b] = acc[m][2];
    red[(warp * ROWS + 2 * t + 1) * D + dim_b] = acc[m][3];
  }
  write_partial<D, ROWS, C::n_warps>(a, x, red, warp_part, m_s, l_run, head_splits, tid);
}

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
