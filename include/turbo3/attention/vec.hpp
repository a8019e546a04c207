// VEC: the decode kernel (few query rows per KV head). One work-group serves every query head of
// a GQA group (and up to two queries), so each K/V byte is read once per group. Keys are processed
// in tiles of 128: in the score phase each thread owns one key and dots it with every query row
// (Q is broadcast from shared memory; a turbo3 block's norm multiplies the block's partial sum
// once); in the value phase each thread owns 16 dimensions of a slice of the keys and accumulates
// p_j * norm_j * C[i] for its rows. Online softmax in float32, base 2 (log2 e folded into the
// query scale). Each work-group covers one split of the context and writes an unnormalized
// partial; the combine kernel merges the splits, adds sinks, normalizes and un-rotates.
#pragma once

#include <type_traits>

#include "turbo3/attention/kernel_args.hpp"
#include "turbo3/attention/rotate_smem.hpp"
#include "turbo3/kv/loader_any.hpp"
#include "turbo3/kv/loaders.hpp"
#include "turbo3/platform/device.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

inline constexpr int vec_threads = 128;
inline constexpr int vec_tile = 128;          // keys per tile: one per thread in the score phase
inline constexpr int vec_max_splits = 256;    // the combine kernel keeps one weight per split
inline constexpr int vec_target_blocks_per_sm = 3;  // split-KV sizing (launch.hpp, make_vec_plan)
// Chunks whose loads a thread issues together before decoding any. Batches of 8 for turbo3 (and
// the first V batch issued before the score phase) raise registers from 126 to 163 and cut
// resident work-groups from 4 to 3 per SM, which makes decode much slower (docs/performance.md).
inline constexpr int vec_load_batch = 4;

// Query rows per work-group (GQA heads x queries), padded to a power of two.
TURBO3_HD constexpr int vec_max_rows(int head_dim) { return head_dim >= 512 ? 8 : 16; }

template <int D, class KL, class VL, int ROWS>
struct vec_config {
  static constexpr int chunks = D / kv::chunk_values;              // 16-value chunks per row
  static constexpr int rows_per_thread = ROWS < 4 ? ROWS : 4;          // value-phase rows per thread
  static constexpr int row_slices = ROWS / rows_per_thread;
  static constexpr int key_slices = vec_threads / (chunks * row_slices);
  static constexpr int v_batch = (vec_load_batch < vec_tile / key_slices) ? vec_load_batch : vec_tile / key_slices;
  static constexpr int keys_per_pass = vec_threads / chunks;       // score phase: keys read at once
  static constexpr int min2(int a, int b) { return a < b ? a : b; }
  static constexpr int k_batch = min2(vec_load_batch, vec_tile / keys_per_pass);
  static constexpr bool q_in_registers = ROWS <= 4;                  // else Q chunks come from shared memory
  static constexpr int k_scale_values = KL::values_per_scale < D ? KL::values_per_scale : D;
  static constexpr int v_scale_values = VL::values_per_scale < D ? VL::values_per_scale : D;
  static constexpr int v_scales = D / v_scale_values;
  // V scales of 128 values or more (f16: none; the turbo types: a norm per block) are folded into
  // the softmax weights, one weight per scale and key in w_s. Finer ones (q8_0's 32 values,
  // any_loader's per-chunk scale) would take 4-8x the shared memory that way: the value phase
  // multiplies each chunk's weight by its scale instead.
  static constexpr bool v_scale_in_weights = VL::values_per_scale >= block_values;
  static constexpr int w_scales = v_scale_in_weights ? v_scales : 1;
  static constexpr int q_floats = ROWS * D;
  static constexpr int w_floats = w_scales * vec_tile * ROWS;
  static constexpr int reduce_floats = key_slices * ROWS * D;
  static constexpr int max2(int a, int b) { return a > b ? a : b; }
  static constexpr int smem_floats = max2(max2(q_floats + w_floats, reduce_floats), 2 * q_floats);
  static_assert(D % kv::chunk_values == 0, "head dim must be a multiple of 16");
  static_assert(ROWS >= 1 && ROWS <= vec_max_rows(D) && (ROWS & (ROWS - 1)) == 0, "rows per work-group");
  static_assert(vec_threads % (chunks * row_slices) == 0 && key_slices >= 1, "value-phase layout");
  static_assert(chunks <= 32 && (chunks & (chunks - 1)) == 0, "a key's lanes must sit in one warp");
  static_assert(!KL::may_rotate || D % block_values == 0, "a rotated K type needs D % 128 == 0");
  static_assert(D % v_scale_values == 0 && D % k_scale_values == 0, "whole scale groups per row");
};

TURBO3_DEVICE TURBO3_FORCEINLINE float warp_max(float v) {
  for (int o = platform::warp_size / 2; o > 0; o /= 2) v = fmaxf(v, platform::shfl_xor(v, o));
  return v;
}
TURBO3_DEVICE TURBO3_FORCEINLINE float warp_sum(float v) {
  for (int o = platform::warp_size / 2; o > 0; o /= 2) v += platform::shfl_xor(v, o);
  return v;
}

TURBO3_DEVICE TURBO3_FORCEINLINE float load_q_value(const attention_args& a, const char* row, int d) {
  return a.q_f16 ? platform::half_to_float(reinterpret_cast<const platform::half*>(row)[d])
                 : reinterpret_cast<const float*>(row)[d];
}

// Query row r of a work-group: column c = r / heads_per_block, head g = r % heads_per_block.
struct vec_row {
  int query;  // query index, or -1 for a padding row
  int head;
};

TURBO3_DEVICE TURBO3_FORCEINLINE vec_row vec_row_of(const attention_args& a, int r, int kv_head, int head_split,
                                                     int q_tile, int heads_per_block) {
  const int c = r / heads_per_block, g = r % heads_per_block;
  const int i = q_tile * a.ncols + c;
  const bool active = c < a.ncols && i < a.n_q;
  return {active ? i : -1, kv_head * a.gqa + head_split * heads_per_block + g};
}

// What the softmax needs of row r, computed once per work-group and kept in shared memory (as
// per-row registers they are wave-uniform values that AMD compilers hold in scalar registers,
// which 16 rows overflow).
struct vec_row_info {
  const platform::half* mask;  // the row's mask row, or nullptr (no mask, or a padding row)
  int query;                   // -1 for a padding row
  float slope;                 // ALiBi slope times log2(e)
};

TURBO3_DEVICE TURBO3_FORCEINLINE vec_row_info vec_row_info_of(const attention_args& a, const vec_row& row, int seq) {
  vec_row_info info;
  info.query = row.query;
  info.slope = exp2f(alibi_slope_log2(a.max_bias, row.head, a.n_head)) * log2e;
  info.mask = a.mask && row.query >= 0
                  ? reinterpret_cast<const platform::half*>(a.mask + row.query * a.mask_nb1 +
                                                            (row.head % a.mask_ne2) * a.mask_nb2 +
                                                            (seq % a.mask_ne3) * a.mask_nb3)
                  : nullptr;
  return info;
}

// A split's partial row in the workspace: D values, then the row's maximum and sum, padded to a
// multiple of 32 bytes (partial rows start at a 32-byte boundary: vec_partial_align), so that a
// warp's 16-byte loads of a 128-value group read 16 whole sectors.
TURBO3_HD constexpr int vec_partial_pitch(int D) { return D + 8; }
inline constexpr int vec_partial_align = 32;  // bytes

TURBO3_DEVICE TURBO3_FORCEINLINE size_t vec_partial_row(const attention_args& a, int seq, int kv_block, int q_tile,
                                                        int split, int blocks_per_seq, int ROWS, int r, int D) {
  const size_t base = ((static_cast<size_t>(seq) * blocks_per_seq + kv_block) * a.q_tiles + q_tile) * a.n_splits + split;
  return (base * ROWS + r) * static_cast<size_t>(vec_partial_pitch(D));
}

// Where a VEC work-group sits: KV head, head split, sequence, query tile, split and key range.
struct vec_context {
  int kv_block, kv_head, head_split, heads_per_block, seq, q_tile, split;
  int tile_begin, tile_end, kv_end;
  int active_rows;  // rows that hold a query (the rest pad the row count to a power of two)
  const char* k_head;
  const char* v_head;
};

// What the softmax needs of the work-group's row r.
TURBO3_DEVICE TURBO3_FORCEINLINE vec_row_info vec_row_info_at(const attention_args& a, const vec_context& x, int r) {
  return vec_row_info_of(a, vec_row_of(a, r, x.kv_head, x.head_split, x.q_tile, x.heads_per_block), x.seq);
}

// kv_blocks_first: work-groups in launch order take the KV blocks of a split before the next split
// (the grid stays splits x KV blocks), so the first work-group each multiprocessor receives and
// the second are spread over every KV block alike.
TURBO3_DEVICE TURBO3_FORCEINLINE vec_context make_vec_context(const attention_args& a, int head_splits,
                                                             bool kv_blocks_first = false) {
  vec_context x;
  x.split = static_cast<int>(blockIdx.x);
  x.kv_block = static_cast<int>(blockIdx.y);  // kv head x head split
  if (kv_blocks_first) {
    const int in_plane = static_cast<int>(blockIdx.x + blockIdx.y * gridDim.x);
    x.kv_block = in_plane % static_cast<int>(gridDim.y);
    x.split = in_plane / static_cast<int>(gridDim.y);
  }
  x.kv_head = x.kv_block / head_splits;
  x.head_split = x.kv_block % head_splits;
  x.heads_per_block = a.gqa / head_splits;
  x.seq = static_cast<int>(blockIdx.z) / a.q_tiles;
  x.q_tile = static_cast<int>(blockIdx.z) % a.q_tiles;
  const int n_tiles = (a.n_kv + vec_tile - 1) / vec_tile;
  x.tile_begin = x.split * a.tiles_per_split;
  x.tile_end = min(n_tiles, x.tile_begin + a.tiles_per_split);
  x.kv_end = a.n_kv;
  if (a.causal) {  // nothing past the last query's diagonal
    const int last_query = min(a.n_q - 1, x.q_tile * a.ncols + a.ncols - 1);
    x.kv_end = max(0, min(a.n_kv, last_query + a.n_kv - a.n_q + 1));
  }
  x.active_rows = x.heads_per_block * a.ncols;
  x.k_head = a.k + x.kv_head * a.k_nb2 + x.seq * a.k_nb3;
  x.v_head = a.v + x.kv_head * a.v_nb2 + x.seq * a.v_nb3;
  return x;
}

// The (sequence, KV block, query tile) row set of a work-group: the index of its counters.
TURBO3_DEVICE TURBO3_FORCEINLINE size_t vec_row_set(const attention_args& a, const vec_context& x, int head_splits) {
  const int blocks_per_seq = a.n_head_kv * head_splits;
  return (static_cast<size_t>(x.seq) * blocks_per_seq + x.kv_block) * a.q_tiles + x.q_tile;
}

// Counters of a row set (its split count and its key-chunk claims) sit in a 128-byte line of their
// own, vec_counter_stride words from the next row set's: every warp of a row set claims its chunks
// from one counter, and row sets sharing a line would queue their atomics behind each other's.
inline constexpr int vec_counter_stride = 32;
TURBO3_DEVICE TURBO3_FORCEINLINE size_t vec_counter_offset(const attention_args& a, const vec_context& x, int head_splits) {
  return vec_row_set(a, x, head_splits) * vec_counter_stride;
}

// Zeroes a call's counters ahead of its kernel: a small kernel costs less than a memset node in
// the graph (docs/performance.md, decode). Counters the caller owns (launch_options::counters)
// need no zeroing at all.
inline constexpr int vec_zero_threads = 256;
template <int Threads>  // a template, so that every translation unit may hold it
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(Threads) vec_zero_counters_kernel(unsigned* counters, int n) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += static_cast<int>(gridDim.x * blockDim.x))
    counters[i] = 0u;
}

// Q rows of the work-group into q_s [ROWS][D]: prescaled, rotated when K stores rotated values and
// the library rotates (a.rotate_q), permuted into the K loader's slot order. q_nat is ROWS * D floats of scratch.
template <int D, class KL, int ROWS>
TURBO3_DEVICE void load_queries(const attention_args& a, const vec_context& x, float* q_s, float* q_nat, int tid) {
  for (int idx = tid; idx < ROWS * D; idx += vec_threads) {
    const int r = idx / D, d = idx % D;
    float v = 0.0f;
    if (r < x.active_rows) {  // the rest pad the row count: zeros
      const vec_row row = vec_row_of(a, r, x.kv_head, x.head_split, x.q_tile, x.heads_per_block);
      if (row.query >= 0)
        v = load_q_value(a, a.q + row.query * a.q_nb1 + row.head * a.q_nb2 + x.seq * a.q_nb3, d) * a.q_prescale;
    }
    q_nat[idx] = v;
  }
  platform::sync_threads();
  // Only the rows that hold a query: padding rows are zeros, which the rotation keeps.
  if constexpr (KL::may_rotate && D % block_values == 0) {
    if (a.rotate_q) rotate_groups_shared<false>(q_nat, x.active_rows * D / block_values, tid, vec_threads);
  }
  for (int idx = tid; idx < ROWS * D; idx += vec_threads) {
    const int r = idx / D, d = idx % D, c = d / kv::chunk_values, e = d % kv::chunk_values;
    q_s[r * D + c * kv::chunk_values + KL::slot(e)] = q_nat[idx];
  }
  platform::sync_threads();
}

// Online softmax over one tile. Thread tid owns key j0 + tid: it reads its raw scores from
// score_s [tile][ROWS], applies softcap, mask, ALiBi and the causal window, updates the running sum
// of every row (its own keys' share), and writes p * norm of each V block to w_s [V_SCALES][tile][ROWS]
// (V scales of fewer than 128 values: p alone, V_SCALES = 1, vec_config::v_scale_in_weights) and the
// rows' rescale factors to alpha_s. The running maxima live in shared memory (m_s, one
// thread updates each row): as per-thread copies they are wave-uniform values that AMD compilers
// keep in scalar registers, and 16 rows of them spill there. The caller synchronizes before
// reading w_s.
template <int ROWS, int V_SCALES, class VL>
TURBO3_DEVICE void softmax_tile(const attention_args& a, const vec_context& x, int j0, const float* score_s,
                                const vec_row_info* rows, float (*warp_part)[ROWS], float* alpha_s, float* w_s,
                                float* m_s, float l_run[ROWS], int tid, const VL& vl = VL{}) {
  constexpr int n_warps = vec_threads / platform::warp_size;
  const int warp = tid / platform::warp_size, lane = tid % platform::warp_size;
  const int j = j0 + tid;
  const bool key_ok = j < x.kv_end;
  float s[ROWS];
  TURBO3_UNROLL
  for (int r = 0; r < ROWS; ++r) {
    const vec_row_info row = rows[r];
    float v = key_ok ? score_s[tid * ROWS + r] : 0.0f;
    if (a.softcap_post != 0.0f) v = a.softcap_post * platform::tanh_fast(v);
    bool visible = key_ok && row.query >= 0 && (!a.causal || j <= row.query + a.n_kv - a.n_q);
    if (visible && row.mask) {
      const float mv = platform::half_to_float(row.mask[j]);
      if (mv == -INFINITY) visible = false;
      else v += row.slope * mv;
    }
    s[r] = visible ? v : -INFINITY;
  }
  TURBO3_UNROLL
  for (int r = 0; r < ROWS; ++r) {
    if (r >= x.active_rows) break;  // uniform over the work-group
    const float mx = warp_max(s[r]);
    if (lane == 0) warp_part[warp][r] = mx;
  }
  platform::sync_threads();
  if (tid < ROWS) {
    const int r = tid;
    float alpha = 1.0f;
    if (r < x.active_rows) {
      float mx = warp_part[0][r];
      for (int w = 1; w < n_warps; ++w) mx = fmaxf(mx, warp_part[w][r]);
      const float m_old = m_s[r], m_new = fmaxf(m_old, mx);
      alpha = m_new == -INFINITY ? 1.0f : platform::exp2_fast(m_old - m_new);
      m_s[r] = m_new;
    }
    alpha_s[r] = alpha;
  }
  platform::sync_threads();
  // Padding rows hold no query, so their scores are all -inf: testing r < x.active_rows here as
  // well would keep one wave-uniform mask per row live across the tile loop, which 16 rows on
  // wave64 (a mask takes two SGPRs there) do not fit.
  float p[ROWS];
  TURBO3_UNROLL
  for (int r = 0; r < ROWS; ++r) {
    p[r] = s[r] != -INFINITY ? platform::exp2_fast(s[r] - m_s[r]) : 0.0f;
    l_run[r] = l_run[r] * alpha_s[r] + p[r];
  }
  const char* v_row = x.v_head + static_cast<int64_t>(j) * a.v_nb1;
  constexpr bool scaled = VL::values_per_scale >= block_values;
  static_assert(scaled || V_SCALES == 1, "finer V scales are the value phase's");
  TURBO3_UNROLL
  for (int b = 0; b < V_SCALES; ++b) {
    float sc = key_ok ? 1.0f : 0.0f;
    if constexpr (scaled) sc = key_ok ? vl.scale(v_row, b) : 0.0f;
    TURBO3_UNROLL
    for (int r = 0; r < ROWS; ++r) w_s[(b * vec_tile + tid) * ROWS + r] = p[r] * sc;
  }
}

// The split's partial result: red [KEY_SLICES][ROWS][D] holds the unnormalized rows of each key
// slice (natural dimension order); they are summed and stored with the rows' max and sum.
// warp_part is reused for the sums, so the caller must not need it any more.
template <int D, int ROWS, int KEY_SLICES>
TURBO3_DEVICE void write_partial(const attention_args& a, const vec_context& x, const float* red,
                                 float (*warp_part)[ROWS], const float* m_s, const float l_run[ROWS],
                                 int head_splits, int tid) {
  constexpr int n_warps = vec_threads / platform::warp_size;
  const int warp = tid / platform::warp_size, lane = tid % platform::warp_size;
  TURBO3_UNROLL
  for (int r = 0; r < ROWS; ++r) {
    const float sum = warp_sum(l_run[r]);
    if (lane == 0) warp_part[warp][r] = sum;
  }
  platform::sync_threads();
  const int blocks_per_seq = a.n_head_kv * head_splits;
  for (int idx = tid; idx < ROWS * D; idx += vec_threads) {
    const int r = idx / D, d = idx % D;
    float v = 0.0f;
    for (int ks = 0; ks < KEY_SLICES; ++ks) v += red[(ks * ROWS + r) * D + d];
    a.partial[vec_partial_row(a, x.seq, x.kv_block, x.q_tile, x.split, blocks_per_seq, ROWS, r, D) + d] = v;
  }
  if (tid < ROWS) {
    float sum = 0.0f;
    for (int w = 0; w < n_warps; ++w) sum += warp_part[w][tid];
    const float m = m_s[tid];
    float* tail = a.partial + vec_partial_row(a, x.seq, x.kv_block, x.q_tile, x.split, blocks_per_seq, ROWS, tid, D) + D;
    tail[0] = m;
    tail[1] = sum;
  }
}

template <int D, class KL, class VL, int ROWS>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(vec_threads) vec_kernel(attention_args a, int head_splits) {
  using C = vec_config<D, KL, VL, ROWS>;
  constexpr int n_warps = vec_threads / platform::warp_size;
  alignas(16) __shared__ float smem[C::smem_floats];  // 16-byte rows for the rotation
  __shared__ float warp_part[n_warps > 0 ? n_warps : 1][ROWS];
  __shared__ float alpha_s[ROWS];
  __shared__ float m_s[ROWS];          // running max of each row
  __shared__ vec_row_info rows_s[ROWS];
  __shared__ float score_s[vec_tile * ROWS];
  float* q_s = smem;                 // [ROWS][D], prescaled, rotated, in the K loader's slot order
  float* w_s = smem + C::q_floats;   // [v_scales][tile][ROWS]: p * norm of each V block

  const int tid = static_cast<int>(threadIdx.x);
  const vec_context x = make_vec_context(a, head_splits);
  const KL kl = kv::loader_for<KL>(a.k_type);
  const VL vl = kv::loader_for<VL>(a.v_type);
  if (tid < ROWS) {  // load_queries synchronizes before any use
    m_s[tid] = -INFINITY;
    rows_s[tid] = vec_row_info_at(a, x, tid);
  }
  load_queries<D, KL, ROWS>(a, x, q_s, smem + C::q_floats, tid);

  // Score-phase layout: lane group of `chunks` lanes per key, one chunk per lane.
  const int k_chunk = tid % C::chunks, k_key = tid / C::chunks;
  float q_reg[C::q_in_registers ? ROWS : 1][kv::chunk_values];
  if constexpr (C::q_in_registers) {
    TURBO3_UNROLL
    for (int r = 0; r < ROWS; ++r)
      TURBO3_UNROLL
      for (int e = 0; e < kv::chunk_values; ++e) q_reg[r][e] = q_s[r * D + k_chunk * kv::chunk_values + e];
  }

  float l_run[ROWS];
  TURBO3_UNROLL
  for (int r = 0; r < ROWS; ++r) l_run[r] = 0.0f;

  // Value-phase layout: chunk, row slice, key slice.
  const int v_chunk = tid % C::chunks;
  const int v_row0 = ((tid / C::chunks) % C::row_slices) * C::rows_per_thread;
  const int v_keys0 = tid / (C::chunks * C::row_slices);
  const int v_scale_index = v_chunk * kv::chunk_values / C::v_scale_values;  // of V's scale groups
  const int w_index = C::v_scale_in_weights ? v_scale_index : 0;              // of w_s's
  float acc[C::rows_per_thread][kv::chunk_values];
  TURBO3_UNROLL
  for (int r = 0; r < C::rows_per_thread; ++r)
    TURBO3_UNROLL
    for (int e = 0; e < kv::chunk_values; ++e) acc[r][e] = 0.0f;

  for (int tile = x.tile_begin; tile < x.tile_end; ++tile) {
    const int j0 = tile * vec_tile;
    if (j0 >= x.kv_end) break;

    // ---- scores: a group of `chunks` adjacent lanes reads one key row (coalesced), each lane one
    // 16-value chunk; partial dots scaled by the chunk's block norm are summed across the group.
    const int n_valid = min(vec_tile, x.kv_end - j0);
    typename VL::raw_chunk v_raw[C::v_batch];
    [[maybe_unused]] float v_sc[C::v_scale_in_weights ? 1 : C::v_batch];  // each chunk's V scale, where w_s holds none
    auto load_v_batch = [&](int jj0) {
      TURBO3_UNROLL
      for (int u = 0; u < C::v_batch; ++u) {
        const int jj = jj0 + u * C::key_slices;
        if (jj < n_valid) {
          const char* v_row = x.v_head + static_cast<int64_t>(j0 + jj) * a.v_nb1;
          v_raw[u] = vl.load_raw(v_row, v_chunk);
          if constexpr (!C::v_scale_in_weights) v_sc[u] = vl.scale(v_row, v_scale_index);
        }
      }
    };
    for (int pass0 = 0; pass0 * C::keys_per_pass < n_valid; pass0 += C::k_batch) {
      typename KL::raw_chunk raw[C::k_batch];
      float sc[C::k_batch];
      TURBO3_UNROLL
      for (int u = 0; u < C::k_batch; ++u) {  // all loads first
        const int jj = (pass0 + u) * C::keys_per_pass + k_key;
        sc[u] = 0.0f;
        if (jj < n_valid) {
          const char* k_row = x.k_head + static_cast<int64_t>(j0 + jj) * a.k_nb1;
          raw[u] = kl.load_raw(k_row, k_chunk);
          sc[u] = kl.scale(k_row, k_chunk * kv::chunk_values / C::k_scale_values);
        }
      }
      TURBO3_UNROLL
      for (int u = 0; u < C::k_batch; ++u) {
        const int jj = (pass0 + u) * C::keys_per_pass + k_key;
        const bool ok = jj < n_valid;
        float part[ROWS];
        TURBO3_UNROLL
        for (int r = 0; r < ROWS; ++r) part[r] = 0.0f;
        if (ok) {
          float x[kv::chunk_values];
          kl.decode(raw[u], a.lut, x);
          TURBO3_UNROLL
          for (int r = 0; r < ROWS; ++r) {
            float dot = 0.0f;
            if constexpr (C::q_in_registers) {
              TURBO3_UNROLL
              for (int e = 0; e < kv::chunk_values; ++e) dot += q_reg[r][e] * x[e];
            } else {
              const float4* q4 = reinterpret_cast<const float4*>(q_s + r * D + k_chunk * kv::chunk_values);
              TURBO3_UNROLL
              for (int e4 = 0; e4 < kv::chunk_values / 4; ++e4) {
                const float4 q = q4[e4];
                dot += q.x * x[4 * e4] + q.y * x[4 * e4 + 1] + q.z * x[4 * e4 + 2] + q.w * x[4 * e4 + 3];
              }
            }
            part[r] = dot * sc[u];
          }
        }
        TURBO3_UNROLL
        for (int r = 0; r < ROWS; ++r) {
          TURBO3_UNROLL
          for (int o = 1; o < C::chunks; o *= 2) part[r] += platform::shfl_xor(part[r], o);
        }
        if (k_chunk == 0 && ok) {
          TURBO3_UNROLL
          for (int r = 0; r < ROWS; ++r) score_s[jj * ROWS + r] = part[r];
        }
      }
    }
    platform::sync_threads();
    softmax_tile<ROWS, C::w_scales, VL>(a, x, j0, score_s, rows_s, warp_part, alpha_s, w_s, m_s, l_run, tid, vl);
    platform::sync_threads();

    // ---- values: acc = acc * alpha + sum_j w_j * C[i_j] ----------------------------------------
    TURBO3_UNROLL
    for (int r = 0; r < C::rows_per_thread; ++r) {
      const float alpha = alpha_s[v_row0 + r];
      TURBO3_UNROLL
      for (int e = 0; e < kv::chunk_values; ++e) acc[r][e] *= alpha;
    }
    for (int jj0 = v_keys0; jj0 < n_valid; jj0 += C::v_batch * C::key_slices) {
      load_v_batch(jj0);
      TURBO3_UNROLL
      for (int u = 0; u < C::v_batch; ++u) {
        const int jj = jj0 + u * C::key_slices;
        if (jj >= n_valid) break;
        float vals[kv::chunk_values];
        vl.decode(v_raw[u], a.lut, vals);
        const float* w = w_s + (w_index * vec_tile + jj) * ROWS + v_row0;
        TURBO3_UNROLL
        for (int r = 0; r < C::rows_per_thread; ++r) {
          float wr = w[r];
          if constexpr (!C::v_scale_in_weights) wr *= v_sc[u];
          TURBO3_UNROLL
          for (int e = 0; e < kv::chunk_values; ++e) acc[r][e] += wr * vals[e];
        }
      }
    }
    platform::sync_threads();  // w_s, warp_part and alpha_s are rewritten by the next tile
  }

  // ---- partial result of this split --------------------------------------------------------
  float* red = smem;  // [key_slices][ROWS][D]
  TURBO3_UNROLL
  for (int r = 0; r < C::rows_per_thread; ++r)
    TURBO3_UNROLL
    for (int e = 0; e < kv::chunk_values; ++e)
      red[(v_keys0 * ROWS + v_row0 + r) * D + v_chunk * kv::chunk_values + VL::value_of_slot(e)] = acc[r][e];
  write_partial<D, ROWS, C::key_slices>(a, x, red, warp_part, m_s, l_run, head_splits, tid);
}

// The combine's work-groups each take one output row and a slice of up to 128 of its dimensions
// (one rotation group), so a decode call spreads over n_q * n_head * D / 128 work-groups.
template <int D>
inline constexpr int vec_combine_slice = D < block_values ? D : block_values;
template <int D>
inline constexpr int vec_combine_slices = D / vec_combine_slice<D>;

// Sum over splits s < n of w[s] * p[s * stride]: `batch` splits' values are loaded before any is
// added, since the loads are what takes the time. The combine kernel and the in-kernel merge.
TURBO3_DEVICE TURBO3_FORCEINLINE float weighted_split_sum(const float* p, size_t stride, const float* w, int n) {
  constexpr int batch = 16;
  float v = 0.0f;
  for (int s0 = 0; s0 < n; s0 += batch) {
    float x[batch];
    TURBO3_UNROLL
    for (int b = 0; b < batch; ++b) x[b] = s0 + b < n ? platform::load_coherent(p + (s0 + b) * stride) : 0.0f;
    TURBO3_UNROLL
    for (int b = 0; b < batch; ++b) v += (s0 + b < n ? w[s0 + b] : 0.0f) * x[b];
  }
  return v;
}

// One work-group per output row (query, head, seq) and slice: merge the splits, add the sink,
// normalize, un-rotate, convert and store. Its time is the latency of its loads, so each thread
// reads its splits' maxima and sums at once, and then its dimension of `batch` splits at a time.
template <int D>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(vec_threads) vec_combine_kernel(attention_args a, int head_splits, int ROWS,
                                                                         bool unrotate) {
  constexpr int W = vec_combine_slice<D>;
  constexpr int n_warps = vec_threads / platform::warp_size;
  constexpr int splits_per_thread = (vec_max_splits + vec_threads - 1) / vec_threads;
  static_assert(W <= vec_threads, "one dimension per thread");
  alignas(16) __shared__ float row_s[W];
  __shared__ float split_w[vec_max_splits];
  __shared__ float warp_scalar[2][n_warps];
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / platform::warp_size, lane = tid % platform::warp_size;
  const int i = static_cast<int>(blockIdx.x) / vec_combine_slices<D>;
  const int slice = static_cast<int>(blockIdx.x) % vec_combine_slices<D>;
  const int h = static_cast<int>(blockIdx.y), seq = static_cast<int>(blockIdx.z);
  const int kv_head = h / a.gqa, g = h % a.gqa;
  const int heads_per_block = a.gqa / head_splits;
  const int kv_block = kv_head * head_splits + g / heads_per_block;
  const int q_tile = i / a.ncols, r = (i % a.ncols) * heads_per_block + g % heads_per_block;
  const int blocks_per_seq = a.n_head_kv * head_splits;
  const int n = a.n_splits;
  // Split s of this row: first + s * stride floats (D values, then the maximum and the sum).
  const float* const first = a.partial + vec_partial_row(a, seq, kv_block, q_tile, 0, blocks_per_seq, ROWS, r, D);
  const size_t stride = static_cast<size_t>(ROWS) * vec_partial_pitch(D);
  const float sink = a.sinks ? a.sinks[h] * log2e : -INFINITY;

  float m_split[splits_per_thread], l_split[splits_per_thread];
  float m = -INFINITY;
  TURBO3_UNROLL
  for (int k = 0; k < splits_per_thread; ++k) {
    const int s = tid + k * vec_threads;
    m_split[k] = s < n ? first[s * stride + D] : -INFINITY;
    l_split[k] = s < n ? first[s * stride + D + 1] : 0.0f;
    m = fmaxf(m, m_split[k]);
  }
  m = warp_max(m);
  if (lane == 0) warp_scalar[0][warp] = m;
  platform::sync_threads();
  float m_all = sink;
  TURBO3_UNROLL
  for (int w = 0; w < n_warps; ++w) m_all = fmaxf(m_all, warp_scalar[0][w]);
  float l = 0.0f;
  TURBO3_UNROLL
  for (int k = 0; k < splits_per_thread; ++k) {
    const int s = tid + k * vec_threads;
    const float w = m_split[k] == -INFINITY ? 0.0f : platform::exp2_fast(m_split[k] - m_all);
    if (s < n) split_w[s] = w;
    l += w * l_split[k];
  }
  l = warp_sum(l);
  if (lane == 0) warp_scalar[1][warp] = l;
  platform::sync_threads();
  float sum = sink != -INFINITY ? platform::exp2_fast(sink - m_all) : 0.0f;
  TURBO3_UNROLL
  for (int w = 0; w < n_warps; ++w) sum += warp_scalar[1][w];
  const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;

  if (tid < W) row_s[tid] = weighted_split_sum(first + slice * W + tid, stride, split_w, n) * inv_sum;
  platform::sync_threads();
  if constexpr (W == block_values) {
    if (unrotate) rotate_groups_shared<true>(row_s, 1, tid, vec_threads);
  }
  char* out = output_row(a, i, h, seq);
  for (int d = tid; d < W; d += vec_threads) store_output(a, out, slice * W + d, row_s[d]);
}

// Split-KV merge inside the VEC kernel, in place of the combine kernel: its launch and the wait
// for the whole grid before it are a fixed part of every decode call (docs/performance.md). A work-group that has stored its partial rows counts itself on its
// (sequence, KV block, query tile) counter; the one that completes the count merges every split's
// rows, un-rotates and stores the output. The counters are zero at launch: workspace counters are
// cleared by vec_zero_counters_kernel ahead of every launch, caller-owned ones are left zero by the
// call before (below).
// Every thread calls it after its last partial store. THREADS: the work-group's (whole warps of 32).
inline constexpr int vec_merge_batch = 17;  // splits whose loads merge_splits_if_last issues together
// GROUPS_AT_ONCE: 128-value groups of one row a warp folds at once, their loads issued together
// and their (maximum, sum) loads shared (each batch costs about one round trip whatever its
// loads): 2 at D = 256 in the warp kernel's wide form, whose warps have 4 groups each to merge and
// registers to spare after the loop.
template <int D, int ROWS, int THREADS = vec_threads, int GROUPS_AT_ONCE = 1>
TURBO3_DEVICE void merge_splits_if_last(const attention_args& a, const vec_context& x, int head_splits, int tid) {
  static_assert(D % block_values == 0, "the un-rotation takes whole 128-value groups");
  static_assert(THREADS % 32 == 0 && (D == 0 || platform::warp_size == 32), "a warp of 32 lanes per 128-value group");
  __shared__ bool is_last;
  platform::sync_threads();  // every partial row of this work-group is stored
  const int blocks_per_seq = a.n_head_kv * head_splits;
  unsigned* counter = a.split_counters + vec_counter_offset(a, x, head_splits);
  // Release: this work-group's rows before its count; acquire (the last): every other split's rows.
  if (tid == 0) {
    const unsigned counted = platform::atomic_add_acq_rel(counter, 1u);
#ifndef NDEBUG
    // The splits of one launch count 0 .. n_splits - 1 from a counter that is zero at launch; a
    // higher count means caller-owned counters (launch_options::counters) were not zero on entry
    // or are shared with a launch running at the same time: the results would be wrong.
    if (counted >= static_cast<unsigned>(a.n_splits)) platform::trap();
#endif
    is_last = counted == static_cast<unsigned>(a.n_splits - 1);
  }
  platform::sync_threads();
  if (!is_last) return;
  // Caller-owned counters are left zero for the next call: every split has counted, and every
  // claim of the row set came before its work-group's count.
  if (a.reset_counters && tid == 0) {
    counter[0] = 0u;
    if (a.work_counters) a.work_counters[vec_counter_offset(a, x, head_splits)] = 0u;
  }
  if (!a.merge_in_kernel) return;

  // The tail of the whole kernel, with the rest of the GPU idle, so its time is the round trips
  // of its loads: a warp takes one (row, 128-value group), 4 values per lane (one 16-byte load per
  // split), and loads, for `batch` splits at once, those values and the split's (maximum, sum)
  // pair, then folds the batch in with a running maximum (online, as the softmax does): no pass
  // over the maxima first, no weights through shared memory. The group then un-rotates in
  // registers (rotate_group_warp32) and goes straight to the output: no barrier after the count.
  // Each batch's loads take about one round trip whatever their size or request count, so the
  // merge costs about two round trips at an H200's 33 splits; 33 splits in one batch need 132
  // registers, which the deep kernel does not have (docs/performance.md, decode).
  constexpr int groups = D / block_values, warps = THREADS / 32, batch = vec_merge_batch;
  constexpr int at_once = GROUPS_AT_ONCE;
  static_assert(groups % at_once == 0, "a warp folds whole shares of one row's groups");
  const int warp = tid / 32, lane = tid % 32;
  const int n = a.n_splits;
  const size_t stride = static_cast<size_t>(ROWS) * vec_partial_pitch(D);  // from one split's row to the next split's
  const float* const first = a.partial + vec_partial_row(a, x.seq, x.kv_block, x.q_tile, 0, blocks_per_seq, ROWS, 0, D);
  for (int item = warp; item < x.active_rows * groups / at_once; item += warps) {  // warp-uniform
    const int r = item * at_once / groups, d0 = (item * at_once % groups) * block_values + 4 * lane;
    const float* const f = first + r * vec_partial_pitch(D);
    const vec_row row = vec_row_of(a, r, x.kv_head, x.head_split, x.q_tile, x.heads_per_block);
    const float sink = a.sinks && row.query >= 0 ? a.sinks[row.head] * log2e : -INFINITY;
    float m_run = sink, l_run = 0.0f, acc[at_once][4] = {};
    for (int s0 = 0; s0 < n; s0 += batch) {
      float2 ml[batch];
      float4 v[at_once][batch];
      TURBO3_UNROLL
      for (int b = 0; b < batch; ++b) {
        const bool in = s0 + b < n;
        const float* src = f + (s0 + b) * stride;
        ml[b] = in ? platform::load_coherent2(src + D) : make_float2(-INFINITY, 0.0f);
        TURBO3_UNROLL
        for (int i = 0; i < at_once; ++i)
          v[i][b] = in ? platform::load_coherent4(src + d0 + i * block_values) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      float m_new = m_run;
      TURBO3_UNROLL
      for (int b = 0; b < batch; ++b) m_new = fmaxf(m_new, ml[b].x);
      const float rescale = m_run == -INFINITY ? 0.0f : platform::exp2_fast(m_run - m_new);
      l_run *= rescale;
      TURBO3_UNROLL
      for (int i = 0; i < at_once; ++i)
        TURBO3_UNROLL
        for (int c = 0; c < 4; ++c) acc[i][c] *= rescale;
      TURBO3_UNROLL
      for (int b = 0; b < batch; ++b) {
        const float w = ml[b].x == -INFINITY ? 0.0f : platform::exp2_fast(ml[b].x - m_new);
        l_run += w * ml[b].y;
        TURBO3_UNROLL
        for (int i = 0; i < at_once; ++i) {
          acc[i][0] += w * v[i][b].x;
          acc[i][1] += w * v[i][b].y;
          acc[i][2] += w * v[i][b].z;
          acc[i][3] += w * v[i][b].w;
        }
      }
      m_run = m_new;
    }
    if (sink != -INFINITY) l_run += platform::exp2_fast(sink - m_run);
    const float inv = l_run > 0.0f ? 1.0f / l_run : 0.0f;
    TURBO3_UNROLL
    for (int i = 0; i < at_once; ++i) {
      float u[4];
      TURBO3_UNROLL
      for (int c = 0; c < 4; ++c) u[c] = acc[i][c] * inv;
      if (a.unrotate_out) rotate_group_warp32<true>(u, lane);  // warp-uniform
      if (row.query >= 0) {
        char* const out = output_row(a, row.query, row.head, x.seq);
        TURBO3_UNROLL
        for (int c = 0; c < 4; ++c) store_output(a, out, d0 + i * block_values + c, u[c]);
      }
    }
  }
}

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
