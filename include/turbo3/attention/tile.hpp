// TILE: the scalar prefill kernel (n_q >= 3). One work-group serves a tile of rows, a row being
// one (query, query head) pair: every query head of a GQA group is stacked with a run of queries,
// so one dequantized K/V tile feeds all of them. Per key tile:
//   1. K rows are read as packed chunks (issued one phase ahead, into registers) and dequantized
//      straight into a float32 shared-memory tile (turbo3: 16 values per byte-permute lookup, the
//      block norm multiplied in; f16: widened). No f16 copy of the cache exists anywhere.
//   2. Scores S = Q K^T on register-blocked micro-tiles (Q in shared memory, prescaled by
//      scale * log2 e, rotated on load when K is turbo3 and the library rotates).
//   3. Online softmax in float32, base 2: softcap, mask (ALiBi slope), causal window, per row.
//   4. V is dequantized into the same shared tile; O += P V on register-blocked micro-tiles.
// The epilogue adds sinks, normalizes, un-rotates (V turbo3 and the library un-rotates) and stores.
// Overlapped shapes (tile_shape::overlapped; NVIDIA D = 256 and 512) keep K and V in tiles of
// their own and move steps 1 and 4 into the multiplies: V of a tile is decoded, a chunk at a time,
// between runs of its score loop, and K of the next tile between runs of the P V loop, so the
// unpack issues among the FMAs (whose shared-memory waits leave issue slots free) instead of alone
// between two barriers (docs/performance.md, TILE).
// Key tiles past the last key any row may see (causal window; with a mask, each row's last key
// that is not -inf, read up front) are never loaded.
// Tile shapes (threads, rows, keys, micro-tiles) come from a per-architecture-family table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/attention/kernel_args.hpp"
#include "turbo3/attention/options.hpp"
#include "turbo3/attention/params.hpp"
#include "turbo3/attention/prefill_common.hpp"
#include "turbo3/attention/rotate_smem.hpp"
#include "turbo3/kv/loaders.hpp"
#include "turbo3/platform/arch.hpp"
#include "turbo3/platform/device.hpp"
#include "turbo3/platform/limits.hpp"
#include "turbo3/status.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

// ---- tile shapes ---------------------------------------------------------------------------------

// Set field by field in tile_table (C++17 has no designated initializers), from these zeros.
struct tile_shape {
  int threads = 0;             // work-group size
  int rows = 0;                // query rows (queries x heads) per work-group
  int keys = 0;                // keys per K/V tile
  int s_rows = 0, s_keys = 0;  // score micro-tile of one thread
  int o_rows = 0, o_dims = 0;  // output micro-tile of one thread (o_dims a multiple of 4)
  int resident = 0;            // work-groups per multiprocessor the register budget aims for (NVIDIA)
  bool pipelined = false;      // inner loops read shared memory one step ahead (two register buffers)
  bool overlapped = false;     // separate K and V tiles; each is decoded during the other's multiplies
};

// Per architecture family and head dim. Shared memory: float32 Q tile [rows][D+4], one K/V tile
// [keys][D+4] (K, then V; overlapped: a K tile and a V tile), the score/probability tile
// [keys][rows+4] and one float per row. Overlapped (NVIDIA D = 256 and 512, 212 and 198 KB): V of
// a tile is decoded into its own tile while the scores multiply, K of the next tile while P V
// multiplies, so the unpack's integer instructions issue between the FMAs instead of in a phase of
// their own between two barriers (three barriers per tile instead of four).
// NVIDIA D = 256: 64 rows x 64 keys with 4x4 score and 8x8 output micro-tiles, one 256-thread
// work-group per SM (registers uncapped), faster than 64 x 32 at two work-groups per SM, where the
// 128-register cap spills the f16 kernels (docs/performance.md, TILE); D = 128 and 64 keep two
// work-groups per SM. AMD: <= 64 KB LDS per work-group; D = 256 keeps
// rows at 32 and keys at 16 for that; D = 64 takes 32-key tiles (64-key tiles spilled 10-11 VGPRs
// on RDNA and 17 SGPRs on CDNA3). CDNA3 differs from RDNA only where wave64 needs another lane
// layout (D = 256). AMD shapes are compile-checked (tests/amd/RESOURCES.md), not yet timed.
// D = 512 (Gemma's global layers) keeps D = 256's 64 output accumulators per thread by halving the
// rows. NVIDIA: 32 rows x 32 keys, overlapped like D = 256 (202,880 bytes); 64 rows would need 128
// accumulators per thread, and their overlapped tiles do not fit 227 KB. AMD, every family: 16 rows
// x 8 keys (50,240 bytes; 16 x 16 would take 67,392), so a tile's 128 scores are one per thread;
// the 8x8 output grid reads whole V rows in wave32 and wave64 alike. Not yet timed anywhere.
TURBO3_HD constexpr tile_shape tile_table(platform::arch_family f, int d) {
  tile_shape s;
  if (f == platform::arch_family::nvidia && d == 64) {
    s.threads = 256;
    s.rows = 64;
    s.keys = 64;
    s.s_rows = 4;
    s.s_keys = 4;
    s.o_rows = 4;
    s.o_dims = 4;
    s.resident = 2;
    s.pipelined = false;
    s.overlapped = false;
  } else if (f == platform::arch_family::nvidia && d == 128) {
    s.threads = 256;
    s.rows = 64;
    s.keys = 64;
    s.s_rows = 4;
    s.s_keys = 4;
    s.o_rows = 8;
    s.o_dims = 4;
    s.resident = 2;
    s.pipelined = false;
    s.overlapped = false;
  } else if (f == platform::arch_family::nvidia && d == 256) {
    s.threads = 256;
    s.rows = 64;
    s.keys = 64;
    s.s_rows = 4;
    s.s_keys = 4;
    s.o_rows = 8;
    s.o_dims = 8;
    s.resident = 1;
    s.pipelined = true;
    s.overlapped = true;
  } else if (f == platform::arch_family::nvidia) {  // D = 512
    s.threads = 256;
    s.rows = 32;
    s.keys = 32;
    s.s_rows = 2;
    s.s_keys = 2;
    s.o_rows = 8;
    s.o_dims = 8;
    s.resident = 1;
    s.pipelined = true;
    s.overlapped = true;
  } else if (f == platform::arch_family::cdna3 && d == 256) {
    s.threads = 128;
    s.rows = 32;
    s.keys = 16;
    s.s_rows = 2;
    s.s_keys = 2;
    s.o_rows = 4;
    s.o_dims = 16;
    s.resident = 1;
    s.pipelined = true;
    s.overlapped = false;
  } else if (d == 64) {  // AMD
    s.threads = 128;
    s.rows = 64;
    s.keys = 32;
    s.s_rows = 4;
    s.s_keys = 4;
    s.o_rows = 8;
    s.o_dims = 4;
    s.resident = 1;
    s.pipelined = false;
    s.overlapped = false;
  } else if (d == 128) {  // AMD
    s.threads = 128;
    s.rows = 64;
    s.keys = 32;
    s.s_rows = 4;
    s.s_keys = 4;
    s.o_rows = 8;
    s.o_dims = 8;
    s.resident = 1;
    s.pipelined = false;
    s.overlapped = false;
  } else if (d == 512) {  // AMD
    s.threads = 128;
    s.rows = 16;
    s.keys = 8;
    s.s_rows = 1;
    s.s_keys = 1;
    s.o_rows = 8;
    s.o_dims = 8;
    s.resident = 1;
    s.pipelined = true;
    s.overlapped = false;
  } else {  // RDNA, D = 256
    s.threads = 128;
    s.rows = 32;
    s.keys = 16;
    s.s_rows = 2;
    s.s_keys = 2;
    s.o_rows = 8;
    s.o_dims = 8;
    s.resident = 1;
    s.pipelined = true;
    s.overlapped = false;
  }
  return s;
}

TURBO3_HD constexpr bool tile_head_dim(int d) { return d == 64 || d == 128 || d == 256 || d == 512; }

template <int D, int THREADS, int ROWS, int KEYS, int S_ROWS, int S_KEYS, int O_ROWS, int O_DIMS, int RESIDENT,
          bool PIPELINED = false, bool OVERLAPPED = false>
struct tile_config {
  static constexpr int head_dim = D, threads = THREADS, rows = ROWS, keys = KEYS;
  static constexpr int s_rows = S_ROWS, s_keys = S_KEYS, o_rows = O_ROWS, o_dims = O_DIMS, resident = RESIDENT;
  static constexpr bool pipelined = PIPELINED, overlapped = OVERLAPPED;
  // Rotations one whole 128-value group per thread (rotate_groups_in_place), which needs 128
  // registers for the group: not under the 128-register cap of two 256-thread work-groups per SM
  // (NVIDIA D = 128 spilled 620 bytes with it).
  static constexpr bool whole_group_rotation = RESIDENT == 1 && whole_group_rotation_fits;
  static constexpr int qs = D + 4;         // row stride of the Q / K / V tiles (floats)
  static constexpr int ss = ROWS + 4;      // row stride of the score tile
  static constexpr int s_tx = KEYS / S_KEYS, s_ty = ROWS / S_ROWS;   // score thread grid
  static constexpr int o_tx = D / O_DIMS, o_ty = ROWS / O_ROWS;      // output thread grid
  static constexpr int threads_per_row = THREADS / ROWS;                         // softmax threads per row
  static constexpr int chunks = D / kv::chunk_values;                // 16-value chunks per row
  static constexpr int chunks_per_thread = KEYS * chunks / THREADS;                // chunks each thread loads
  static constexpr int q_floats = ROWS * qs, kv_floats = KEYS * qs, s_floats = KEYS * ss;
  static constexpr int kv_tiles = OVERLAPPED ? 2 : 1;
  static constexpr size_t smem_bytes =
      sizeof(float) * static_cast<size_t>(q_floats + kv_tiles * kv_floats + s_floats + ROWS);
  // Overlapped: the pipelined loops run in chunks_per_thread runs, one chunk of the other tile decoded after each.
  static constexpr int score_steps_per_chunk = D / 8 / chunks_per_thread, pv_pairs_per_chunk = KEYS / 2 / chunks_per_thread;
  static_assert(!OVERLAPPED || (PIPELINED && score_steps_per_chunk * 8 * chunks_per_thread == D &&
                                pv_pairs_per_chunk * 2 * chunks_per_thread == KEYS && THREADS % chunks == 0),
                "overlapped tiles: whole runs of the pipelined loops per decoded chunk");
  static_assert(s_tx * s_ty == THREADS && KEYS % S_KEYS == 0 && ROWS % S_ROWS == 0, "score micro-tiles");
  static_assert(o_tx * o_ty == THREADS && D % O_DIMS == 0 && ROWS % O_ROWS == 0, "output micro-tiles");
  static_assert(O_DIMS % 4 == 0 && O_ROWS % 4 == 0, "output micro-tiles are read as float4");
  static_assert(THREADS % ROWS == 0 && KEYS % threads_per_row == 0 && (threads_per_row & (threads_per_row - 1)) == 0 && threads_per_row <= 32, "softmax rows");
  static_assert(KEYS * chunks % THREADS == 0 && chunks_per_thread >= 1, "K/V tile loads");
  static_assert(D % 4 == 0 && (ROWS * D) % block_values == 0, "rotation groups");
};

template <int D, platform::arch_family F>
using tile_config_for =
    tile_config<D, tile_table(F, D).threads, tile_table(F, D).rows, tile_table(F, D).keys, tile_table(F, D).s_rows,
                tile_table(F, D).s_keys, tile_table(F, D).o_rows, tile_table(F, D).o_dims, tile_table(F, D).resident,
                tile_table(F, D).pipelined, tile_table(F, D).overlapped>;

// AMD work-groups get at most 64 KB of LDS (the tile's shared memory is dynamic, so the compile
// reports do not show it: RDNA D = 256 takes 52,352 bytes).
template <platform::arch_family F>
constexpr bool tile_fits_lds() {
  return tile_config_for<64, F>::smem_bytes <= platform::amd_max_lds_bytes &&
         tile_config_for<128, F>::smem_bytes <= platform::amd_max_lds_bytes &&
         tile_config_for<256, F>::smem_bytes <= platform::amd_max_lds_bytes &&
         tile_config_for<512, F>::smem_bytes <= platform::amd_max_lds_bytes;
}
static_assert(tile_fits_lds<platform::arch_family::rdna4>() && tile_fits_lds<platform::arch_family::rdna3>() &&
                  tile_fits_lds<platform::arch_family::cdna3>(),
              "an AMD tile shape needs more than 64 KB of LDS");
static_assert(tile_config_for<256, platform::arch_family::nvidia>::smem_bytes <= platform::nvidia_max_shared_bytes &&
                  tile_config_for<512, platform::arch_family::nvidia>::smem_bytes <= platform::nvidia_max_shared_bytes,
              "an NVIDIA tile shape needs more than 227 KB of shared memory");

// ---- device helpers ------------------------------------------------------------------------------

// Thread (x, y) of a TX x TY grid. Where the shape allows, a warp covers 8 x-positions by
// warp_size / 8 y-positions, so shared-memory reads of neighbouring lanes fall on distinct banks
// and rows are broadcast; otherwise plain row-major order.
template <int TX, int TY>
TURBO3_DEVICE TURBO3_FORCEINLINE void tile_grid_pos(int tid, int& x, int& y) {
  constexpr int ws = platform::warp_size;
  constexpr int lx = TX < 8 ? TX : 8;
  constexpr int ly = ws / lx;
  if constexpr (ws % lx == 0 && TX % lx == 0 && TY % ly == 0 && (TX * TY) % ws == 0) {
    constexpr int wx = TX / lx;
    const int lane = tid % ws, warp = tid / ws;
    x = lane % lx + lx * (warp % wx);
    y = lane / lx + ly * (warp / wx);
  } else {
    x = tid % TX;
    y = tid / TX;
  }
}

// Packed chunks of one K or V tile, loaded into registers ahead of their use. Nothing consumes a
// loaded word before the tile is stored (after the next barrier), so the loads stay in flight
// across the compute phase in between: for turbo3 the 16-bit words (qs halves, signs, norm) are
// kept as loaded and combined only at store time.
template <class L, int CHUNKS_PER_THREAD, bool T3 = L::type == data_type::turbo3>
struct tile_raw {
  typename L::raw_chunk raw[CHUNKS_PER_THREAD];
  TURBO3_DEVICE TURBO3_FORCEINLINE void clear(int u) { raw[u] = typename L::raw_chunk{}; }
  // Chunk u + 1 moves to slot u (overlapped decode: slot 0 is always the next one, so that a loop
  // that is not unrolled never indexes the registers at run time).
  TURBO3_DEVICE TURBO3_FORCEINLINE void shift() {
    TURBO3_UNROLL
    for (int u = 0; u + 1 < CHUNKS_PER_THREAD; ++u) raw[u] = raw[u + 1];
  }
};
template <class L, int CHUNKS_PER_THREAD>
struct tile_raw<L, CHUNKS_PER_THREAD, true> {
  uint32_t qs_lo[CHUNKS_PER_THREAD], qs_hi[CHUNKS_PER_THREAD], signs[CHUNKS_PER_THREAD], norm[CHUNKS_PER_THREAD];
  TURBO3_DEVICE TURBO3_FORCEINLINE void clear(int u) { qs_lo[u] = qs_hi[u] = signs[u] = norm[u] = 0u; }
  TURBO3_DEVICE TURBO3_FORCEINLINE void shift() {
    TURBO3_UNROLL
    for (int u = 0; u + 1 < CHUNKS_PER_THREAD; ++u) {
      qs_lo[u] = qs_lo[u + 1];
      qs_hi[u] = qs_hi[u + 1];
      signs[u] = signs[u + 1];
      norm[u] = norm[u + 1];
    }
  }
};

template <class C, class L>
TURBO3_DEVICE TURBO3_FORCEINLINE void tile_load_raw(tile_raw<L, C::chunks_per_thread>& t, const char* head, int64_t nb1, int j0,
                                                    int n_valid, int tid) {
  TURBO3_UNROLL
  for (int u = 0; u < C::chunks_per_thread; ++u) {
    const int idx = tid + C::threads * u;
    const int jj = idx / C::chunks, c = idx % C::chunks;
    if (jj < n_valid) {
      const char* row = head + static_cast<int64_t>(j0 + jj) * nb1;
      if constexpr (L::type == data_type::turbo3) {
        // Block layout (docs/format.md §1): norm at half-word 0, qs at 1..16, signs at 17..24.
        const uint16_t* b = reinterpret_cast<const uint16_t*>(row + (c >> 3) * block_bytes);
        const int q = c & 7;
        t.qs_lo[u] = b[1 + 2 * q];
        t.qs_hi[u] = b[2 + 2 * q];
        t.signs[u] = b[17 + q];
        t.norm[u] = b[0];
      } else {
        t.raw[u] = L::load_raw(row, c);
      }
    } else if constexpr (C::overlapped) {
      t.clear(u);  // decodes to zeros (turbo3: a zero norm), so the overlapped store needs no branch
    }
  }
}

// Chunk slot u of t decoded into out (16 floats in natural order), scaled (turbo3: the block
// norm; the float product of two fp16 values is exact).
template <class L, int CHUNKS_PER_THREAD>
TURBO3_DEVICE TURBO3_FORCEINLINE void tile_decode_chunk(const tile_raw<L, CHUNKS_PER_THREAD>& t, int u, const turbo3_lut& lut,
                                                        float4* out) {
  float x[kv::chunk_values];
  float s = 1.0f;
  if constexpr (L::type == data_type::turbo3) {
    L::decode16(platform::join_halves(t.qs_lo[u], t.qs_hi[u]), t.signs[u], lut, x);
    s = platform::half_bits_to_float(static_cast<uint16_t>(t.norm[u]));
  } else {
    L::decode(t.raw[u], lut, x);
  }
  TURBO3_UNROLL
  for (int q = 0; q < kv::chunk_values / 4; ++q)
    out[q] = make_float4(x[L::slot(4 * q)] * s, x[L::slot(4 * q + 1)] * s, x[L::slot(4 * q + 2)] * s,
                         x[L::slot(4 * q + 3)] * s);
}

// Decodes the packed chunks into dst [keys][qs] (tile_decode_chunk); keys past n_valid become zeros.
template <class C, class L>
TURBO3_DEVICE TURBO3_FORCEINLINE void tile_store(const tile_raw<L, C::chunks_per_thread>& t, float* dst, int n_valid,
                                                 const turbo3_lut& lut, int tid) {
  TURBO3_UNROLL
  for (int u = 0; u < C::chunks_per_thread; ++u) {
    const int idx = tid + C::threads * u;
    const int jj = idx / C::chunks, c = idx % C::chunks;
    float4* out = reinterpret_cast<float4*>(dst + jj * C::qs + c * kv::chunk_values);
    if (jj < n_valid) {
      tile_decode_chunk(t, u, lut, out);
    } else {
      TURBO3_UNROLL
      for (int q = 0; q < kv::chunk_values / 4; ++q) out[q] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
}

// Overlapped tiles: decodes slot 0 of t (chunk u of the tile, raw bytes of keys past the tile's
// valid ones cleared at load) into its place in dst and shifts the next chunk into slot 0. No
// branch, so its instructions can be scheduled among the multiply-adds around it.
template <class C, class L>
TURBO3_DEVICE TURBO3_FORCEINLINE void tile_store_next(tile_raw<L, C::chunks_per_thread>& t, float* dst, const turbo3_lut& lut,
                                                      int tid, int u) {
  const int idx = tid + C::threads * u;
  const int jj = idx / C::chunks, c = idx % C::chunks;
  tile_decode_chunk(t, 0, lut, reinterpret_cast<float4*>(dst + jj * C::qs + c * kv::chunk_values));
  t.shift();
}

// The Q tile or output rows in q_s, rotated (forward) or un-rotated in place; synchronizes.
template <bool Inverse, int D, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void tile_rotate(float* q_s, int tid) {
  if constexpr (C::whole_group_rotation) rotate_groups_in_place<Inverse, D / block_values>(q_s, C::rows, C::qs, tid, C::threads);
  else rotate_rows_shared<Inverse, D / block_values>(q_s, C::rows, C::qs, tid, C::threads);
}

// ---- the steps of the kernel ---------------------------------------------------------------------

// The Q tile into q_s, prescaled and rotated when asked (rotations come with turbo3, whose rows are
// whole blocks); synchronizes.
template <int D, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void tile_load_q(const prefill_args& a, float* q_s, int kv_head, int head_group,
                                                  int q_tile, int seq, int tid) {
  prefill_load_q<D, C::rows, C::threads>(a, q_s, C::qs, kv_head, head_group, q_tile, seq, tid);
  platform::sync_threads();
  if constexpr (D % block_values == 0) {
    if (a.rotate_q) tile_rotate<false, D, C>(q_s, tid);
  }
}

// The output rows in q_s, un-rotated when asked, to the output.
template <int D, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void tile_store_out(const prefill_args& a, float* q_s, int kv_head, int head_group,
                                                     int q_tile, int seq, int tid) {
  if constexpr (D % block_values == 0) {
    if (a.unrotate_out) tile_rotate<true, D, C>(q_s, tid);
  }
  prefill_store_out<D, C::rows, C::threads>(a, q_s, C::qs, kv_head, head_group, q_tile, seq, tid);
}

template <int ROWS, int COLS>
TURBO3_DEVICE TURBO3_FORCEINLINE void tile_zero(float (&x)[ROWS][COLS]) {
  TURBO3_UNROLL
  for (int i = 0; i < ROWS; ++i)
    TURBO3_UNROLL
    for (int e = 0; e < COLS; ++e) x[i][e] = 0.0f;
}

// One row's online softmax (base 2), kept alike by each of the threads_per_row threads that serve
// the row: a thread takes keys first_key, first_key + threads_per_row, ... of every tile.
struct tile_softmax_row {
  int row, first_key;
  prefill_row info;              // the row's query and head (query < 0: a padding row)
  int key_end;                   // keys [0, key_end) may be visible to the row
  const platform::half* mask;    // the row's mask row, null without a mask
  float slope;                   // the mask's ALiBi slope, times log2 e
  float running_sum, running_max;
};

// Thread tid's softmax row. With a mask, each row's visible end (mask_visible_ends) is gathered
// first, in the score tile (free until the first key tile), and kv_end drops to the largest: keys
// the mask hides from every row of a tile are never loaded. Synchronizes where there is a mask.
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE tile_softmax_row tile_softmax_row_of(const prefill_args& a, float* s_s, int& kv_end,
                                                                      int kv_head, int head_group, int q_tile, int seq,
                                                                      int tid) {
  auto window_end = [&](const prefill_row& row) { return prefill_window_end(a, row, kv_end); };
  int* const mask_end_s = reinterpret_cast<int*>(s_s);
  if (a.mask) kv_end = mask_visible_ends<C::rows, C::threads>(a, kv_head, head_group, q_tile, seq, tid, mask_end_s, window_end);
  tile_softmax_row r;
  r.row = tid / C::threads_per_row;
  r.first_key = tid % C::threads_per_row;
  r.info = prefill_row_of(a, r.row, kv_head, head_group, q_tile);
  r.key_end = 0;
  r.mask = nullptr;
  r.slope = 0.0f;
  if (r.info.query >= 0) {
    r.key_end = prefill_window_end(a, r.info, kv_end);
    if (a.mask) {
      r.key_end = min(r.key_end, mask_visible_end_of(a, mask_end_s, r.row));
      r.mask = mask_row_of(a, r.info, seq);
      r.slope = platform::exp2_fast(alibi_slope_log2(a.max_bias, r.info.head, a.n_head)) * log2e;
    }
  }
  if (a.mask) platform::sync_threads();  // mask_end_s is read; the score tile may be written
  r.running_max = -INFINITY;
  r.running_sum = 0.0f;
  return r;
}

// Online softmax over the scores of the tile at key j0 in row r: the probabilities replace the
// scores, and the row's rescale factor of O goes to row_factors.
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void tile_softmax(tile_softmax_row& r, const prefill_args& a, float* scores,
                                                   float* row_factors, int j0) {
  constexpr int keys_per_thread = C::keys / C::threads_per_row;
  float s[keys_per_thread];
  float tile_max = -INFINITY;
  TURBO3_UNROLL
  for (int k = 0; k < keys_per_thread; ++k) {
    const int jj = r.first_key + k * C::threads_per_row, j = j0 + jj;
    float v = scores[jj * C::ss + r.row];
    if (a.softcap_post != 0.0f) v = a.softcap_post * platform::tanh_fast(v);
    bool visible = j < r.key_end;
    if (visible && r.mask) {
      const float mv = platform::half_to_float(r.mask[j]);
      if (mv == -INFINITY) visible = false;
      else v += r.slope * mv;
    }
    s[k] = visible ? v : -INFINITY;
    tile_max = fmaxf(tile_max, s[k]);
  }
  tile_max = prefill_group_max(tile_max, C::threads_per_row);
  const float m_new = fmaxf(r.running_max, tile_max);
  const float alpha = m_new == -INFINITY ? 1.0f : platform::exp2_fast(r.running_max - m_new);
  float sum = 0.0f;
  TURBO3_UNROLL
  for (int k = 0; k < keys_per_thread; ++k) {
    const int jj = r.first_key + k * C::threads_per_row;
    const float p = s[k] == -INFINITY ? 0.0f : platform::exp2_fast(s[k] - m_new);
    scores[jj * C::ss + r.row] = p;
    sum += p;
  }
  sum = prefill_group_sum(sum, C::threads_per_row);
  r.running_sum = r.running_sum * alpha + sum;
  r.running_max = m_new;
  if (r.first_key == 0) row_factors[r.row] = alpha;
}

// The two products on register-blocked micro-tiles, as one thread computes them: its s_rows x s_keys
// scores at (score_x, score_y) of the score grid (key score_x + k * s_tx, row score_y + i * s_ty)
// and its o_rows x o_dims outputs at (out_x, out_y) of the output grid (o[i][4u + e]: row
// out_y * o_rows + i, dimension (out_x + u * o_tx) * 4 + e). The steps read the tiles and places
// through this struct: passed as arguments, the tile pointers fold into other address arithmetic in
// the overlapped kernels.
template <int D, class C>
struct tile_products {
  const float* q_s;          // [rows][qs]: Q
  float* scores;             // [keys][ss]: scores, then probabilities
  const float* row_factors;  // [rows]: rescale factors of O
  int score_x, score_y, out_x, out_y;

  // S = Q K^T of the key tile at k_tile into scores. Pipelined: two register buffers, the
  // shared-memory reads of step d + 4 issue before the FMAs of step d, so their latency hides
  // behind arithmetic. Overlapped: between_chunks(u) runs after each of the loop's
  // chunks_per_thread runs.
  template <class BetweenChunks>
  TURBO3_DEVICE TURBO3_FORCEINLINE void compute_scores(const float* k_tile, BetweenChunks&& between_chunks) const {
    float acc[C::s_rows][C::s_keys];
    tile_zero(acc);
    const float* q_row = q_s + score_y * C::qs;
    const float* k_row = k_tile + score_x * C::qs;
    auto load = [&](int d, float4(&qv)[C::s_rows], float4(&kv)[C::s_keys]) {
      TURBO3_UNROLL
      for (int i = 0; i < C::s_rows; ++i) qv[i] = *reinterpret_cast<const float4*>(q_row + i * C::s_ty * C::qs + d);
      TURBO3_UNROLL
      for (int k = 0; k < C::s_keys; ++k) kv[k] = *reinterpret_cast<const float4*>(k_row + k * C::s_tx * C::qs + d);
    };
    auto fma = [&](const float4(&qv)[C::s_rows], const float4(&kv)[C::s_keys]) {
      TURBO3_UNROLL
      for (int i = 0; i < C::s_rows; ++i)
        TURBO3_UNROLL
        for (int k = 0; k < C::s_keys; ++k) {
          acc[i][k] = fmaf(qv[i].x, kv[k].x, acc[i][k]);
          acc[i][k] = fmaf(qv[i].y, kv[k].y, acc[i][k]);
          acc[i][k] = fmaf(qv[i].z, kv[k].z, acc[i][k]);
          acc[i][k] = fmaf(qv[i].w, kv[k].w, acc[i][k]);
        }
    };
    float4 qa[C::s_rows], ka[C::s_keys];
    if constexpr (C::overlapped) {
      float4 qb[C::s_rows], kb[C::s_keys];
      load(0, qa, ka);
      int d = 0;
#pragma unroll 1
      for (int u = 0; u < C::chunks_per_thread; ++u) {
        TURBO3_UNROLL
        for (int i = 0; i < C::score_steps_per_chunk; ++i, d += 8) {
          load(d + 4, qb, kb);
          fma(qa, ka);
          load(min(d + 8, D - 4), qa, ka);  // the last step re-reads a valid address, unused
          fma(qb, kb);
        }
        between_chunks(u);
      }
    } else if constexpr (C::pipelined) {
      float4 qb[C::s_rows], kb[C::s_keys];
      load(0, qa, ka);
#pragma unroll 1
      for (int d = 0; d < D; d += 8) {
        load(d + 4, qb, kb);
        fma(qa, ka);
        load(min(d + 8, D - 4), qa, ka);  // the last step re-reads a valid address, unused
        fma(qb, kb);
      }
    } else {
#pragma unroll 1
      for (int d = 0; d < D; d += 4) {
        load(d, qa, ka);
        fma(qa, ka);
      }
    }
    TURBO3_UNROLL
    for (int i = 0; i < C::s_rows; ++i)
      TURBO3_UNROLL
      for (int k = 0; k < C::s_keys; ++k) scores[(score_x + k * C::s_tx) * C::ss + score_y + i * C::s_ty] = acc[i][k];
  }

  // O = O * alpha + P V over the tile at v_tile (n_valid keys), alpha from row_factors. Pipelined:
  // keys in pairs, reads one key ahead (as in the score loop); a pair may run one key past
  // n_valid, whose probability and V row are zeros (keys is even). Overlapped: every pair of the
  // tile (past n_valid, zeros), with between_chunks(u) after each of chunks_per_thread runs.
  template <class BetweenChunks>
  TURBO3_DEVICE TURBO3_FORCEINLINE void accumulate_values(float (&o)[C::o_rows][C::o_dims], const float* v_tile,
                                                          int n_valid, BetweenChunks&& between_chunks) const {
    const int first_row = out_y * C::o_rows;
    TURBO3_UNROLL
    for (int i = 0; i < C::o_rows; ++i) {
      const float alpha = row_factors[first_row + i];
      TURBO3_UNROLL
      for (int e = 0; e < C::o_dims; ++e) o[i][e] *= alpha;
    }
    const float* p_rows = scores + first_row;
    const float* v_dims = v_tile + out_x * 4;
    auto load = [&](int jj, float4(&pv)[C::o_rows / 4], float4(&vv)[C::o_dims / 4]) {
      TURBO3_UNROLL
      for (int u = 0; u < C::o_rows / 4; ++u) pv[u] = *reinterpret_cast<const float4*>(p_rows + jj * C::ss + 4 * u);
      TURBO3_UNROLL
      for (int u = 0; u < C::o_dims / 4; ++u)
        vv[u] = *reinterpret_cast<const float4*>(v_dims + jj * C::qs + u * C::o_tx * 4);
    };
    auto fma = [&](const float4(&pv)[C::o_rows / 4], const float4(&vv)[C::o_dims / 4]) {
      const float* pf = reinterpret_cast<const float*>(pv);
      TURBO3_UNROLL
      for (int i = 0; i < C::o_rows; ++i)
        TURBO3_UNROLL
        for (int u = 0; u < C::o_dims / 4; ++u) {
          o[i][4 * u + 0] = fmaf(pf[i], vv[u].x, o[i][4 * u + 0]);
          o[i][4 * u + 1] = fmaf(pf[i], vv[u].y, o[i][4 * u + 1]);
          o[i][4 * u + 2] = fmaf(pf[i], vv[u].z, o[i][4 * u + 2]);
          o[i][4 * u + 3] = fmaf(pf[i], vv[u].w, o[i][4 * u + 3]);
        }
    };
    static_assert(C::keys % 2 == 0, "keys per tile");
    float4 pa[C::o_rows / 4], va[C::o_dims / 4];
    if constexpr (C::overlapped) {
      float4 pb[C::o_rows / 4], vb[C::o_dims / 4];
      load(0, pa, va);
      int jp = 0;
#pragma unroll 1
      for (int u = 0; u < C::chunks_per_thread; ++u) {
        TURBO3_UNROLL
        for (int i = 0; i < C::pv_pairs_per_chunk; ++i, ++jp) {
          load(2 * jp + 1, pb, vb);
          fma(pa, va);
          load(min(2 * jp + 2, C::keys - 1), pa, va);  // past the last pair: a valid address, unused
          fma(pb, vb);
        }
        between_chunks(u);
      }
    } else if constexpr (C::pipelined) {
      const int n_pairs = (n_valid + 1) / 2;
      float4 pb[C::o_rows / 4], vb[C::o_dims / 4];
      load(0, pa, va);
#pragma unroll 1
      for (int jp = 0; jp < n_pairs; ++jp) {
        load(2 * jp + 1, pb, vb);
        fma(pa, va);
        load(min(2 * jp + 2, C::keys - 1), pa, va);  // past the last pair: a valid address, unused
        fma(pb, vb);
      }
    } else {
#pragma unroll 1
      for (int jj = 0; jj < n_valid; ++jj) {
        load(jj, pa, va);
        fma(pa, va);
      }
    }
  }

  // The output rows, each times its final factor in row_factors, into out [rows][qs].
  TURBO3_DEVICE TURBO3_FORCEINLINE void write_rows(const float (&o)[C::o_rows][C::o_dims], float* out) const {
    const int first_row = out_y * C::o_rows;
    TURBO3_UNROLL
    for (int i = 0; i < C::o_rows; ++i) {
      const float f = row_factors[first_row + i];
      TURBO3_UNROLL
      for (int u = 0; u < C::o_dims / 4; ++u)
        *reinterpret_cast<float4*>(out + (first_row + i) * C::qs + (out_x + u * C::o_tx) * 4) =
            make_float4(o[i][4 * u] * f, o[i][4 * u + 1] * f, o[i][4 * u + 2] * f, o[i][4 * u + 3] * f);
    }
  }
};

template <int D, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE tile_products<D, C> tile_products_of(float* q_s, float* s_s, float* row_s, int tid) {
  tile_products<D, C> p;
  p.q_s = q_s;
  p.scores = s_s;
  p.row_factors = row_s;
  tile_grid_pos<C::s_tx, C::s_ty>(tid, p.score_x, p.score_y);
  tile_grid_pos<C::o_tx, C::o_ty>(tid, p.out_x, p.out_y);
  return p;
}

// ---- the kernel ----------------------------------------------------------------------------------

template <int D, class KL, class VL, class C>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS_RESIDENT(C::threads, C::resident) tile_kernel(prefill_args a) {
  static_assert(C::head_dim == D, "config for another head dim");
  static_assert(KL::type != data_type::turbo3 || D % block_values == 0, "turbo3 K needs D % 128 == 0");
  static_assert(VL::type != data_type::turbo3 || D % block_values == 0, "turbo3 V needs D % 128 == 0");
  extern __shared__ float4 tile_smem4[];
  // Constant pointers, not fields of a struct: their offsets fold into the addresses (through a
  // struct, the overlapped kernels compute their tile addresses differently).
  float* const q_s = reinterpret_cast<float*>(tile_smem4);  // [rows][qs]: Q, later the output rows
  float* const kv_s = q_s + C::q_floats;                     // [keys][qs]: K tile, then V tile (overlapped: K; V after it)
  float* const s_s = kv_s + C::kv_tiles * C::kv_floats;      // [keys][ss]: scores, then probabilities
  float* const row_s = s_s + C::s_floats;                    // [rows]: rescale factors
  const int tid = static_cast<int>(threadIdx.x);
  const prefill_block blk = prefill_block_of(a);
  const turbo3_lut lut = lut_for<KL, VL>(a.lut);
  const prefill_work_group work = prefill_work_group_of(a, blk);
  const int q_tile = work.q_tile, kv_head = work.kv_head, head_group = work.head_group, seq = work.seq;
  int kv_end = work.kv_end;  // with a mask, its largest visible end (tile_softmax_row_of)

  tile_load_q<D, C>(a, q_s, kv_head, head_group, q_tile, seq, tid);
  tile_softmax_row softmax = tile_softmax_row_of<C>(a, s_s, kv_end, kv_head, head_group, q_tile, seq, tid);
  const tile_products<D, C> products = tile_products_of<D, C>(q_s, s_s, row_s, tid);
  float o[C::o_rows][C::o_dims];
  tile_zero(o);

  const int n_tiles = (kv_end + C::keys - 1) / C::keys;
  tile_raw<KL, C::chunks_per_thread> k_raw;
  tile_raw<VL, C::chunks_per_thread> v_raw;
  if constexpr (C::overlapped) {
    // K of tile t + 1 is decoded into k_s while P V of tile t multiplies, V of tile t into v_s while
    // its scores multiply; each tile's raw bytes are loaded a phase before their decode starts.
    float* const k_s = kv_s;
    float* const v_s = kv_s + C::kv_floats;
    if (n_tiles > 0) {
      const int n_valid = min(C::keys, kv_end);
      tile_load_raw<C>(k_raw, work.k_head, a.k_nb1, 0, n_valid, tid);
      tile_store<C>(k_raw, k_s, n_valid, lut, tid);
      tile_load_raw<C>(v_raw, work.v_head, a.v_nb1, 0, n_valid, tid);
    }
    platform::sync_threads();
    for (int t = 0; t < n_tiles; ++t) {
      const int j0 = t * C::keys;
      products.compute_scores(k_s, [&](int u) { tile_store_next<C>(v_raw, v_s, lut, tid, u); });
      platform::sync_threads();  // scores in s_s, V in v_s; k_s is free
      const bool has_next = t + 1 < n_tiles;
      const int next_valid = min(C::keys, kv_end - j0 - C::keys);
      if (has_next) tile_load_raw<C>(k_raw, work.k_head, a.k_nb1, j0 + C::keys, next_valid, tid);
      tile_softmax<C>(softmax, a, s_s, row_s, j0);
      platform::sync_threads();
      // After the last tile the decode writes k_s, which nothing reads again.
      products.accumulate_values(o, v_s, min(C::keys, kv_end - j0),
                                 [&](int u) { tile_store_next<C>(k_raw, k_s, lut, tid, u); });
      if (has_next) tile_load_raw<C>(v_raw, work.v_head, a.v_nb1, j0 + C::keys, next_valid, tid);
      platform::sync_threads();  // the next K in k_s; v_s and the score tile are free
    }
  } else {
    auto no_hook = [](int) {};
    if (n_tiles > 0) tile_load_raw<C>(k_raw, work.k_head, a.k_nb1, 0, min(C::keys, kv_end), tid);
    for (int t = 0; t < n_tiles; ++t) {
      const int j0 = t * C::keys;
      const int n_valid = min(C::keys, kv_end - j0);
      tile_store<C>(k_raw, kv_s, n_valid, lut, tid);
      tile_load_raw<C>(v_raw, work.v_head, a.v_nb1, j0, n_valid, tid);
      platform::sync_threads();
      products.compute_scores(kv_s, no_hook);
      platform::sync_threads();
      // V replaces K in the shared tile; the next K tile's loads are issued before the softmax.
      tile_store<C>(v_raw, kv_s, n_valid, lut, tid);
      if (t + 1 < n_tiles)
        tile_load_raw<C>(k_raw, work.k_head, a.k_nb1, j0 + C::keys, min(C::keys, kv_end - j0 - C::keys), tid);
      tile_softmax<C>(softmax, a, s_s, row_s, j0);
      platform::sync_threads();
      products.accumulate_values(o, kv_s, n_valid, no_hook);
      platform::sync_threads();  // the K/V and score tiles are rewritten by the next tile
    }
  }

  // Sink and normalization per row; the output rows go through q_s, where they are un-rotated.
  if (softmax.first_key == 0)
    row_s[softmax.row] = prefill_row_factor(a, softmax.info, softmax.running_max, softmax.running_sum);
  platform::sync_threads();
  products.write_rows(o, q_s);
  platform::sync_threads();
  tile_store_out<D, C>(a, q_s, kv_head, head_group, q_tile, seq, tid);
}

// ---- host side: support, dispatch ------------------------------------------------------------------

// Whether the TILE kernel takes these (validated) params: D_k == D_v in {64, 128, 256, 512} (64 only
// with f16 K and V), f16 K/V rows 16-byte aligned, grid dimensions within the hardware limits.
inline status tile_supported(const attention_params& p) {
  if (!has_tile_loader(p.k.type) || !has_tile_loader(p.v.type)) return status::unsupported;
  const int64_t d = p.head_dim_k();
  if (d != p.head_dim_v() || !tile_head_dim(static_cast<int>(d))) return status::unsupported;
  if (p.k.type == data_type::f16 && !rows_aligned16(p.k)) return status::unsupported;
  if (p.v.type == data_type::f16 && !rows_aligned16(p.v)) return status::unsupported;
  if (p.n_seq() > 65535 || p.n_head() > 65535 || !prefill_grid_fits(p)) return status::unsupported;
  return status::ok;
}

template <int D, class KL, class VL, class C>
status launch_tile_config(const prefill_args& a, int device, hipStream_t stream) {
  return launch_prefill_grid<&tile_kernel<D, KL, VL, C>>(a, C::threads, C::smem_bytes, device, stream);
}

template <int D, class KL, class VL>
status launch_tile_family(const prefill_args& a, platform::arch_family f, int device, hipStream_t stream) {
#if defined(TURBO3_PLATFORM_CUDA)
  (void)f;
  return launch_tile_config<D, KL, VL, tile_config_for<D, platform::arch_family::nvidia>>(a, device, stream);
#else
  switch (f) {
    case platform::arch_family::cdna3:
      return launch_tile_config<D, KL, VL, tile_config_for<D, platform::arch_family::cdna3>>(a, device, stream);
    case platform::arch_family::rdna3:
      return launch_tile_config<D, KL, VL, tile_config_for<D, platform::arch_family::rdna3>>(a, device, stream);
    default:
      return launch_tile_config<D, KL, VL, tile_config_for<D, platform::arch_family::rdna4>>(a, device, stream);
  }
#endif
}

inline int tile_rows(platform::arch_family f, int d) { return tile_table(f, d).rows; }

// Launches TILE for validated, tile_supported params on `device` (the stream's). k_was / v_was as
// for make_prefill_args.
inline status launch_tile(const attention_params& p, data_type k_was, data_type v_was, int device, hipStream_t stream) {
  const platform::arch_family f = platform::device_family(device);
  const int d = static_cast<int>(p.head_dim_k());
  const prefill_args a = make_prefill_args(p, tile_rows(f, d), k_was, v_was);
  using T3 = kv::turbo3_loader;
  using F16 = kv::f16_loader;
  const bool kt = p.k.type == data_type::turbo3, vt = p.v.type == data_type::turbo3;
  switch (d) {
    case 64:
      if (kt || vt) return status::unsupported;
      return launch_tile_family<64, F16, F16>(a, f, device, stream);
    case 128:
      if (kt && vt) return launch_tile_family<128, T3, T3>(a, f, device, stream);
      if (kt) return launch_tile_family<128, T3, F16>(a, f, device, stream);
      if (vt) return launch_tile_family<128, F16, T3>(a, f, device, stream);
      return launch_tile_family<128, F16, F16>(a, f, device, stream);
    case 256:
      if (kt && vt) return launch_tile_family<256, T3, T3>(a, f, device, stream);
      if (kt) return launch_tile_family<256, T3, F16>(a, f, device, stream);
      if (vt) return launch_tile_family<256, F16, T3>(a, f, device, stream);
      return launch_tile_family<256, F16, F16>(a, f, device, stream);
    case 512:
      if (kt && vt) return launch_tile_family<512, T3, T3>(a, f, device, stream);
      if (kt) return launch_tile_family<512, T3, F16>(a, f, device, stream);
      if (vt) return launch_tile_family<512, F16, T3>(a, f, device, stream);
      return launch_tile_family<512, F16, F16>(a, f, device, stream);
    default:
      return status::unsupported;
  }
}

// ---- the family's entry point (the four questions of vec_family) ----------------------------------
struct tile_family {
  struct plan_type {};
  static status supported(const attention_params& p) { return tile_supported(p); }
  static status plan(const attention_params&, const launch_options&, int, plan_type&) { return status::ok; }
  static size_t workspace_bytes(const plan_type&) { return 0; }  // none
  static status launch(const attention_params& p, const plan_type&, void*, int device, hipStream_t stream) {
    return launch_tile(p, p.k.type, p.v.type, device, stream);
  }
};

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
