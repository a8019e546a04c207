// MMA on warpgroup multiplies (NVIDIA sm_90a, D = 128 or 256, K and V both f16 or both turbo3): the MMA
// kernel's structure with Q K^T and P V issued as asynchronous 64 x 64 x 16 multiplies that read
// their shared-memory operands themselves (platform/warpgroup_mma.hpp), so the warps spend their
// issue slots on the turbo3 unpack and the softmax instead of on fragment loads and multiplies.
//
// One work-group: two warpgroups of four warps, 128 rows (a row is one (query, query head) pair,
// stacked as in TILE and MMA: prefill_row_of); warp w owns rows 16 w .. 16 w + 15, its warpgroup's 64
// rows are the M of its multiplies. Shared memory, all f16 tiles in the 128-byte-swizzled layout
// of wg_piece (64-column panels of 128-byte rows):
//   Q [128 rows][D] (K's slot order, prescaled, rotated when asked: mma_load_q),
//   K and V tiles [64 keys][D] in two buffers each (slot order, turbo3 values times their norm),
//   turbo3: the raw rows of K and of V in two cp.async rings of two slots each.
// Per key tile t, S = Q K^T is 16 multiplies (one per 16 dimensions) and O += P V 16 more (4 key
// steps x 4 dimension panels); the softmax runs on the score fragments (the accumulator layout is
// the fragment layout: mma_fragment_probabilities), P goes to the A operands in registers, and a
// row keeps its running maximum while the tile stays within 2^8 of it, so O is rarely rescaled.
//   f16, one tile at a time: the copies of tile t + 1 go out, S is multiplied, the softmax runs,
//   P V is multiplied, both waited for, one barrier.
//   turbo3, pipelined: step t multiplies S of tile t and P V of tile t - 1 in one batch, decodes K
//   of tile t + 1 and V of tile t from their rings meanwhile, then runs the softmax of tile t
//   while P V still runs (the unpack and the softmax beside the tensor cores, not after them).
// Causal and masked tiles past the work-group's last visible key are not loaded or multiplied.
// The epilogue adds sinks, normalizes and stores each warp's rows from its fragments (un-rotated
// there when asked), as the fragment kernel does on NVIDIA. It is about 1.5-1.9x faster than the
// fragment kernel at D = 256 (docs/performance.md, MMA).
//
// The warp-specialized form (mma_wg_producer_body, below) gives the filling to warpgroups of its
// own (two for turbo3, one for f16): the two that multiply never decode or copy, and the producers
// run up to a buffer ahead of them. Taken by default for every call the warpgroup kernels cover
// (mma_launch.hpp's resolved_mma_variant): it is the faster form for both types, causal and masked
// (docs/performance.md, MMA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <type_traits>

#include "turbo3/attention/mma.hpp"
#include "turbo3/platform/limits.hpp"
#include "turbo3/platform/warpgroup_mma.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

template <int D>
struct wg_config {
  static constexpr int head_dim = D, warpgroups = 2, warps = 4 * warpgroups, wave = 32, threads = wave * warps;
  static constexpr int rows = 16 * warps, keys = 64;
  static constexpr int chunks = D / kv::chunk_values;  // 16-value chunks per row
  static constexpr int pieces = D / 8;                 // 16-byte pieces per f16 row
  static constexpr int panels = D / 64;                // 64-column panels
  static constexpr int n_tiles_d = D / 16, n_tiles_k = keys / 16;
  static constexpr int ldo = D + 4;  // floats: the Q staging rows of the rotation
  static constexpr size_t q_bytes = size_t{2} * rows * D, kv_bytes = size_t{2} * keys * D;
  // turbo3 raw rows: two rings (K, V) of two slots each, a slot holding one tile's rows, each row
  // copied in 16-byte segments from the segment that holds its first byte (raw_segments of them,
  // one lane each).
  static constexpr int raw_row_bytes = D / block_values * static_cast<int>(block_bytes);
  static constexpr int raw_segments = (raw_row_bytes + 14 + 15) / 16;
  static constexpr int raw_pitch = 16 * raw_segments;
  static constexpr int raw_tile_bytes = keys * raw_pitch;  // one ring slot
  static constexpr size_t raw_stage_bytes = size_t{2} * raw_tile_bytes;  // one ring
  static constexpr int raw_row_lanes = raw_segments <= 4 ? 4 : raw_segments <= 8 ? 8 : 16;
  // Q, the two rings (K, then V), the K/V buffers, the row scratch. The Q staging rows of the
  // prologue lie over the K/V buffers and the row scratch (not over the rings, whose first tiles
  // are in flight then).
  static constexpr size_t off_stage = q_bytes, off_k = off_stage + 2 * raw_stage_bytes, off_v = off_k + 2 * kv_bytes;
  static constexpr size_t off_row = off_v + 2 * kv_bytes;
  static constexpr size_t q_stage_bytes = sizeof(float) * rows * ldo;
  static constexpr size_t max2(size_t x, size_t y) { return x > y ? x : y; }
  // + 1 KB so that the tiles can start on a 1024-byte boundary (swizzle atoms).
  static constexpr size_t smem_bytes = max2(off_row + sizeof(int) * rows, off_k + q_stage_bytes) + 1024;
  static_assert(D == 128 || D == 256, "warpgroup MMA covers D = 128 and 256");
  static_assert(q_bytes % 1024 == 0 && kv_bytes % 1024 == 0 && raw_stage_bytes % 1024 == 0, "aligned regions");
  static_assert(smem_bytes <= platform::nvidia_max_shared_bytes, "more than 227 KB of shared memory");
  static_assert((keys * chunks) % threads == 0 && (keys * pieces) % threads == 0, "whole items per thread");
};

// Byte offset of 16-byte piece p (slot positions 8 p .. 8 p + 7) of row r in a tile of R rows:
// panel p / 8 (R rows of 128 bytes), the piece's place in its row XOR r % 8 (the 128-byte swizzle).
// A warp writing the pieces of a row or two touches every bank once per 128 bytes.
TURBO3_HD constexpr int wg_piece(int r, int p, int R) { return (p / 8) * R * 128 + r * 128 + (((p % 8) ^ (r % 8)) << 4); }

// The two multiplies of warpgroup wg's 64 rows against the K/V tile in buffer b (of two, kv_bytes
// apart): S = Q K^T and O += P V, one commit group each. Operands: a descriptor per tile (in
// uniform registers: wg and b must be one value per warp, platform::shfl), a constant offset per
// multiply (an immediate of the multiply's asm, wg_mma_ss / wg_mma_rs). Q (A of S): the
// warpgroup's 64 rows, dimensions 16 ks ..; K (B of S, N = keys, K = dimensions, stored N rows with
// K contiguous); V (B of P V, K = keys 16 ks .., N = dimension panel nb, stored K rows with N
// contiguous: TransB).
template <class C>
struct wg_multiplies {
  uint64_t q_desc, k_desc0, v_desc0;
  TURBO3_DEVICE TURBO3_FORCEINLINE wg_multiplies(const unsigned char* q16, const unsigned char* k16_0,
                                                 const unsigned char* v16_0, int wg)
      : q_desc(platform::wg_operand_swizzled(q16 + 64 * wg * 128, 1024)),
        k_desc0(platform::wg_operand_swizzled(k16_0, 1024)),
        v_desc0(platform::wg_operand_swizzled(v16_0, 1024)) {}
  static constexpr int kv_step = static_cast<int>(C::kv_bytes);  // from buffer 0 to buffer 1
  TURBO3_HD static constexpr int qk_offset(int ks, int rows) { return (ks / 4) * rows * 128 + (ks % 4) * 32; }
  // V's offset for key step ks of dimension panel nb.
  TURBO3_HD static constexpr int pv_offset(int nb, int ks) { return nb * C::keys * 128 + ks * 16 * 128; }
  TURBO3_DEVICE TURBO3_FORCEINLINE void issue_s(platform::frag_acc (&s_acc)[C::n_tiles_k], int b) const {
    issue_s_steps(s_acc, platform::wg_offset(k_desc0, b * kv_step), std::make_integer_sequence<int, C::n_tiles_d>{});
    platform::wg_commit();
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE void issue_pv(platform::frag_acc (&o_acc)[C::n_tiles_d],
                                                 const platform::frag_a (&p)[C::n_tiles_k], int b) const {
    issue_pv_steps(o_acc, p, platform::wg_offset(v_desc0, b * kv_step),
                   std::make_integer_sequence<int, C::panels * C::n_tiles_k>{});
    platform::wg_commit();
  }

 private:
  template <int... KS>
  TURBO3_DEVICE TURBO3_FORCEINLINE void issue_s_steps(platform::frag_acc (&s_acc)[C::n_tiles_k], uint64_t k_desc,
                                                      std::integer_sequence<int, KS...>) const {
    (platform::wg_mma_ss<false, qk_offset(KS, C::rows) / 16, qk_offset(KS, C::keys) / 16>(s_acc, q_desc, k_desc, KS > 0),
     ...);
  }
  // Step i: dimension panel i / n_tiles_k (O's four 16-column tiles 4 nb ..), key step i % n_tiles_k.
  template <int... I>
  TURBO3_DEVICE TURBO3_FORCEINLINE void issue_pv_steps(platform::frag_acc (&o_acc)[C::n_tiles_d],
                                                       const platform::frag_a (&p)[C::n_tiles_k], uint64_t v_desc,
                                                       std::integer_sequence<int, I...>) const {
    (platform::wg_mma_rs<true, pv_offset(I / C::n_tiles_k, I % C::n_tiles_k) / 16>(
         *reinterpret_cast<platform::frag_acc(*)[4]>(o_acc + 4 * (I / C::n_tiles_k)), p[I % C::n_tiles_k], v_desc, true),
     ...);
  }
};

// The epilogue of warp `warp` (of the warps that multiply; tid its thread among them): sink,
// normalization, un-rotation when asked, store from the fragments; with a key split, the
// unnormalized partial rows of split `split` instead.
template <int D, class VL, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void wg_store_out(const prefill_args& a, platform::frag_acc (&o_acc)[C::n_tiles_d],
                                                   const float (&m_lane)[platform::frag_acc_rows],
                                                   const float (&l_lane)[platform::frag_acc_rows], int warp,
                                                   int kv_head, int head_group, int q_tile, int seq, int split,
                                                   int tid) {
  if (a.kv_splits > 1) {
    mma_store_partial_fragments<D, VL, C>(a, o_acc, m_lane, l_lane, warp, kv_head, head_group, q_tile, seq, split);
    return;
  }
  float lane_factor[platform::frag_acc_rows];
  TURBO3_UNROLL
  for (int rr = 0; rr < platform::frag_acc_rows; ++rr) {
    const prefill_row lr = prefill_row_of(a, warp * 16 + platform::frag_acc_row(2 * rr), kv_head, head_group, q_tile);
    lane_factor[rr] = prefill_row_factor(a, lr, m_lane[rr], platform::frag_row_sum(l_lane[rr]));
  }
  if (a.unrotate_out) mma_store_out_fragments<D, VL, C>(a, o_acc, lane_factor, kv_head, head_group, q_tile, seq, tid);
  else mma_store_out_plain_fragments<D, VL, C>(a, o_acc, lane_factor, kv_head, head_group, q_tile, seq, tid);
}

// The dynamic shared memory of a warpgroup kernel from its first 1024-byte boundary (the swizzle
// atoms' alignment; an offset from the shared array, so that the compiler keeps shared-memory
// loads and stores, not generic ones).
TURBO3_DEVICE TURBO3_FORCEINLINE unsigned char* wg_shared_base() {
  extern __shared__ float4 mma_wg_smem4[];
  return reinterpret_cast<unsigned char*>(mma_wg_smem4) +
         ((1024u - (platform::shared_address_of(mma_wg_smem4) & 1023u)) & 1023u);
}

// The shared memory of a warpgroup kernel, as wg_config lays it out, from its 1024-byte boundary.
template <class C>
struct wg_smem {
  unsigned char* const base;
  TURBO3_DEVICE TURBO3_FORCEINLINE wg_smem() : base(wg_shared_base()) {}
  TURBO3_DEVICE TURBO3_FORCEINLINE unsigned char* q16() const { return base; }  // Q: f16, swizzled, [rows][D]
  // Where Q's value in slot position d of row r goes (mma_load_q's q16_at).
  TURBO3_DEVICE TURBO3_FORCEINLINE uint16_t* q16_at(int r, int d) const {
    return reinterpret_cast<uint16_t*>(base + wg_piece(r, d / 8, C::rows)) + d % 8;
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE unsigned char* k16(int b) const { return base + C::off_k + b * C::kv_bytes; }
  TURBO3_DEVICE TURBO3_FORCEINLINE unsigned char* v16(int b) const { return base + C::off_v + b * C::kv_bytes; }
  // turbo3: slot t % 2 of the K ring (v_side false) or of the V ring, after it.
  TURBO3_DEVICE TURBO3_FORCEINLINE unsigned char* ring_slot(int t, bool v_side) const {
    return base + C::off_stage + ((v_side ? 2 : 0) + t % 2) * C::raw_tile_bytes;
  }
  // [rows][ldo] float32: the Q prologue's staging rows, over the K/V buffers and the row scratch.
  TURBO3_DEVICE TURBO3_FORCEINLINE float* q_stage() const { return reinterpret_cast<float*>(base + C::off_k); }
  TURBO3_DEVICE TURBO3_FORCEINLINE int* mask_end() const { return reinterpret_cast<int*>(base + C::off_row); }  // [rows]
};

// ---- mma_wg_body's K/V fills ------------------------------------------------------------------------

// How mma_wg_body's key tiles reach the K/V buffers, every thread taking part: turbo3 raw rows
// copied into their rings (issue_stage) and decoded from there (decode_tile), f16 rows copied
// straight into a buffer (copy_tile). kv_end is the kernel's own: the mask lowers it once the
// first copies are out.
template <class KL, class C>
struct wg_fills {
  static constexpr bool t3 = KL::type == data_type::turbo3;
  // turbo3 overlaps the softmax with P V of the tile before (faster causal, slightly slower
  // masked); f16 runs one tile at a time (pipelined, two sets of P spill next to O and it is
  // slower: docs/performance.md, MMA).
  static constexpr bool pipelined = t3;
  static_assert(t3 || !pipelined, "the pipelined schedule decodes turbo3 tiles");

  const prefill_args& a;
  const wg_smem<C>& sm;
  const turbo3_lut& lut;
  const char* const k_head;
  const char* const v_head;
  const int& kv_end;
  const int tid;
  // Where a row of K or V starts in its ring slot row: the low four bits of its address.
  const uint32_t k_low, v_low;

  // turbo3: the raw rows of K (v_side false) or V of tile t into slot t % 2 of their ring, in
  // 16-byte segments from the aligned segment holding a row's first byte (a row sits
  // (its address & 15) bytes into its slot; nothing past the view's end is read), one lane per
  // segment. One commit group per call (empty past the last tile).
  TURBO3_DEVICE TURBO3_FORCEINLINE void issue_stage(int t, bool v_side) const {
    const int j0 = t * C::keys, n_valid = min(C::keys, kv_end - j0);
    const char* const head = v_side ? v_head : k_head;
    const int64_t nb1 = v_side ? a.v_nb1 : a.k_nb1;
    const char* const view_end = v_side ? a.v_end : a.k_end;
    const platform::async_destination ring = platform::async_destination_of(sm.ring_slot(t, v_side));
    constexpr int per_pass = C::threads / C::raw_row_lanes;
    const int seg = tid % C::raw_row_lanes, slot = tid / C::raw_row_lanes;
    TURBO3_UNROLL
    for (int pass = 0; pass < C::keys / per_pass; ++pass) {
      const int key = slot + pass * per_pass;
      if (key >= n_valid || seg >= C::raw_segments) continue;
      const char* const src = head + static_cast<int64_t>(j0 + key) * nb1;
      const int shift = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
      const int left = C::raw_row_bytes + shift - 16 * seg;  // bytes of the row from this segment on
      const char* const from = src - shift + 16 * seg;
      const platform::async_destination to = ring + key * C::raw_pitch + 16 * seg;
      if (left > 0) {
        if (from + 16 <= view_end) platform::async_copy<16>(to, from);
        else platform::async_copy_head_of16(to, from, left);
      }
    }
    platform::async_commit();
  }

  // turbo3: K (v_side false) or V of tile t from its ring slot into dst. Items are chunks, a row's
  // chunks on neighbouring lanes (the stage reads fall on distinct banks, so do the swizzled
  // stores); keys past the tile decode to zeros (norm 0).
  // In rounds of two chunks per thread (the loads of a round issued together), which keeps the
  // registers next to O, S and two sets of P in bounds.
  TURBO3_DEVICE TURBO3_FORCEINLINE void decode_tile(int t, bool v_side, unsigned char* dst) const {
    constexpr int per_thread = C::keys * C::chunks / C::threads, batch = 2;
    static_assert(per_thread % batch == 0, "whole rounds");
    const int j0 = t * C::keys, n_valid = min(C::keys, kv_end - j0);
    const char* const st = reinterpret_cast<const char*>(sm.ring_slot(t, v_side));
    const uint32_t step = static_cast<uint32_t>(v_side ? a.v_nb1 : a.k_nb1);
    const uint32_t low0 = (v_side ? v_low : k_low) + static_cast<uint32_t>(j0) * step;
    TURBO3_UNROLL
    for (int u0 = 0; u0 < per_thread; u0 += batch) {
      mma_raw<KL> raw[batch];
      TURBO3_UNROLL
      for (int u = 0; u < batch; ++u) {
        const int item = tid + C::threads * (u0 + u), key = item / C::chunks, c = item % C::chunks;
        const bool ok = key < n_valid;
        const int at = ok ? key : 0;
        mma_load_raw<KL>(raw[u], st + at * C::raw_pitch + ((low0 + static_cast<uint32_t>(at) * step) & 15u), c, ok);
      }
      TURBO3_UNROLL
      for (int u = 0; u < batch; ++u) {
        const int item = tid + C::threads * (u0 + u), key = item / C::chunks, c = item % C::chunks;
        uint32_t w[8];
        mma_decode_row_chunk<KL>(raw[u], lut, w);
        *reinterpret_cast<uint4*>(dst + wg_piece(key, 2 * c, C::keys)) = make_uint4(w[0], w[1], w[2], w[3]);
        *reinterpret_cast<uint4*>(dst + wg_piece(key, 2 * c + 1, C::keys)) = make_uint4(w[4], w[5], w[6], w[7]);
      }
    }
  }

  // f16: K and V of tile t copied into buffer b (one commit group); keys past the tile are zeros.
  TURBO3_DEVICE TURBO3_FORCEINLINE void copy_tile(int t, int b) const {
    constexpr int per_thread = C::keys * C::pieces / C::threads;
    const int j0 = t * C::keys, n_valid = min(C::keys, kv_end - j0);
    const platform::async_destination kd = platform::async_destination_of(sm.k16(b));
    const platform::async_destination vd = platform::async_destination_of(sm.v16(b));
    TURBO3_UNROLL
    for (int u = 0; u < per_thread; ++u) {
      const int item = tid + C::threads * u, key = item / C::pieces, p = item % C::pieces;
      const bool ok = key < n_valid;
      const int64_t row = j0 + (ok ? key : 0);
      platform::async_copy16_or_zero(kd + wg_piece(key, p, C::keys), k_head + row * a.k_nb1 + 16 * p, ok);
      platform::async_copy16_or_zero(vd + wg_piece(key, p, C::keys), v_head + row * a.v_nb1 + 16 * p, ok);
    }
    platform::async_commit();
  }

  // The first tiles' copies go out before Q is read (kv_end without the mask: the mask may end the
  // keys sooner, then they are multiplied with zero weight or not at all). Pipelined: K of tiles 0
  // and 1 and V of tile 0; else K and V of tiles 0 and 1 (turbo3 raw rows) or of tile 0 (f16).
  TURBO3_DEVICE TURBO3_FORCEINLINE void start() const {
    if constexpr (t3) {
      issue_stage(0, false);
      issue_stage(0, true);
      issue_stage(1, false);
      if constexpr (!pipelined) issue_stage(1, true);
    } else {
      copy_tile(0, 0);
    }
  }

  // Tile 0 into buffer 0 (pipelined: K only, and V buffer 1 zeroed for the empty first P V), for
  // the multiplies to read.
  TURBO3_DEVICE TURBO3_FORCEINLINE void open_first() const {
    if constexpr (pipelined) {
      for (int i = tid; i < static_cast<int>(C::kv_bytes / 16); i += C::threads)
        reinterpret_cast<uint4*>(sm.v16(1))[i] = make_uint4(0u, 0u, 0u, 0u);
    }
    platform::async_wait<0>();
    if constexpr (t3) {
      platform::sync_threads();
      decode_tile(0, false, sm.k16(0));
      if constexpr (!pipelined) decode_tile(0, true, sm.v16(0));
    }
    platform::shared_writes_to_async();
    platform::sync_threads();
  }

  // The end of a step: its copies landed (f16: tile t + 1; turbo3: the ring slots it copied), its
  // decodes and copies visible to the multiplies, and every warpgroup past its reads of the
  // buffers the next step refills.
  TURBO3_DEVICE TURBO3_FORCEINLINE void close() const {
    platform::async_wait<0>();
    platform::shared_writes_to_async();
    platform::sync_threads();
  }
};

// O's and P's registers stay where they were last written, before the fence that opens the next
// multiplies (wg_hold).
template <int ND, int NK>
TURBO3_DEVICE TURBO3_FORCEINLINE void wg_hold_o_p(platform::frag_acc (&o_acc)[ND], platform::frag_a (&pa)[NK]) {
  platform::wg_hold(o_acc);
  TURBO3_UNROLL
  for (int ks = 0; ks < NK; ++ks) platform::wg_hold(pa[ks]);
}

// ---- the one-work-group form ------------------------------------------------------------------------

template <int D, class KL, class VL, class C>
TURBO3_DEVICE void mma_wg_body(const prefill_args& a) {
  static_assert(KL::type == VL::type, "K and V of one type");
  const wg_smem<C> sm;
  float* const q_stage = sm.q_stage();
  int* const mask_end_s = sm.mask_end();

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / C::wave, wg = platform::shfl(warp / 4, 0);  // one per warp: uniform descriptors
  const prefill_block blk = prefill_block_of(a);
  const turbo3_lut lut = lut_for<KL, VL>(a.lut);
  const prefill_work_group work = prefill_work_group_of(a, blk);
  const int q_tile = work.q_tile, kv_head = work.kv_head, head_group = work.head_group, seq = work.seq;
  int kv_end = work.kv_end;  // with a mask, its largest visible end (below)
  const wg_fills<KL, C> fills{a,
                              sm,
                              lut,
                              work.k_head,
                              work.v_head,
                              kv_end,
                              tid,
                              static_cast<uint32_t>(reinterpret_cast<uintptr_t>(work.k_head)),
                              static_cast<uint32_t>(reinterpret_cast<uintptr_t>(work.v_head))};
  fills.start();

  // ---- Q: prescaled, rotated when asked, f16 in K's slot order, swizzled -------------------------
  mma_load_q<D, KL, C>(
      a, [&](int r, int d) { return sm.q16_at(r, d); }, q_stage, kv_head, head_group, q_tile, seq, tid);
  platform::shared_writes_to_async();
  platform::sync_threads();  // the staging rows are reused by the K/V tiles

  // ---- each row's window (causal; mask: mask_visible_ends) ----------------------------------------
  auto window_end = [&](const prefill_row& row) { return prefill_window_end(a, row, kv_end); };
  if (a.mask) kv_end = mask_visible_ends<C::rows, C::threads>(a, kv_head, head_group, q_tile, seq, tid, mask_end_s, window_end);
  auto row_window_end = [&](const prefill_row& row, int r) {
    return prefill_row_window_end(a, row, r, kv_end, mask_end_s);
  };
  constexpr int R = platform::frag_acc_rows;
  mma_lane_row lane_rows[R];
  float m_lane[R], l_lane[R];
  mma_init_lane_rows(a, warp, kv_head, head_group, q_tile, seq, row_window_end, lane_rows, m_lane, l_lane);
  platform::frag_acc o_acc[C::n_tiles_d];
  TURBO3_UNROLL
  for (int n = 0; n < C::n_tiles_d; ++n) platform::frag_zero(o_acc[n]);

  // ---- the key tiles ------------------------------------------------------------------------------
  const int n_tiles = platform::shfl((kv_end + C::keys - 1) / C::keys, 0);  // one per warp (a uniform loop)
  fills.open_first();
  const wg_multiplies<C> mul(sm.q16(), sm.k16(0), sm.v16(0), wg);
  // No branch between a multiply's issue and its wait (the compiler would serialize around one):
  // every warpgroup multiplies every tile (one whose rows see none of its keys gets zero
  // probabilities; causal tiles of 64 keys end on the work-group's diagonal, which both
  // warpgroups reach), and the tile past the last is decoded anyway (zeros, never read).
  if constexpr (wg_fills<KL, C>::pipelined) {
    // Pipelined (turbo3). Step t multiplies S = Q K^T of tile t and, behind it, O += P V of tile
    // t - 1 (with P of the step before: the first step's P is zero, its V buffer zeroed), decodes K
    // of tile t + 1 and V of tile t while they run, then runs the softmax of tile t while the
    // tensor cores are still on P V. Buffers: K and V of tile t in buffer t % 2; K of tile t + 1
    // replaces K of t - 1 (read by S of step t - 1), V of tile t replaces V of t - 2 (read by P V
    // of step t - 1), both waited for before step t's barrier. Rings: K of tile t + 2 and V of
    // tile t + 1 are copied during step t, into the slots step t - 1 decoded from.
    platform::frag_a pa[C::n_tiles_k];
    TURBO3_UNROLL
    for (int ks = 0; ks < C::n_tiles_k; ++ks) pa[ks] = platform::frag_a{{0u, 0u, 0u, 0u}};
    // O's and P's registers were last written before the fence that opens the step (wg_hold_o_p);
    // a fence between S and P V would end the step's pipeline.
    for (int t = 0; t < n_tiles; ++t) {
      const int j0 = t * C::keys, b = t & 1;
      fills.issue_stage(t + 2, false);
      fills.issue_stage(t + 1, true);

      platform::frag_acc s_acc[C::n_tiles_k];
      wg_hold_o_p(o_acc, pa);
      platform::wg_fence();
      mul.issue_s(s_acc, b);
      mul.issue_pv(o_acc, pa, b ^ 1);  // tile t - 1
      fills.decode_tile(t + 1, false, sm.k16(b ^ 1));
      fills.decode_tile(t, true, sm.v16(b));
      platform::wg_wait<1>();  // S of tile t
      platform::wg_hold(s_acc);

      // The softmax while P V of tile t - 1 runs; O is rescaled (where a row's maximum moved) after it.
      platform::frag_a p_next[C::n_tiles_k];
      float alpha[platform::frag_acc_rows];
      const bool rescale = mma_fragment_probabilities<true>(a, s_acc, lane_rows, m_lane, l_lane, p_next, j0, alpha);
      platform::wg_wait<0>();
      wg_hold_o_p(o_acc, pa);  // P of tile t - 1 stays in its registers (read by the multiplies) until here
      if (rescale) mma_rescale_rows(o_acc, alpha);
      TURBO3_UNROLL
      for (int ks = 0; ks < C::n_tiles_k; ++ks) pa[ks] = p_next[ks];

      fills.close();
    }
    if (n_tiles > 0) {
      wg_hold_o_p(o_acc, pa);
      platform::wg_fence();
      mul.issue_pv(o_acc, pa, (n_tiles - 1) & 1);
      platform::wg_wait<0>();
      platform::wg_hold(o_acc);
    }
  } else {
    // One tile at a time (f16). Step t copies (f16) or stages (turbo3) the tiles ahead, multiplies S
    // of tile t while decoding K of tile t + 1 into the other buffer, runs the softmax, multiplies
    // P V while decoding V of tile t + 1, and waits for both.
    for (int t = 0; t < n_tiles; ++t) {
      const int j0 = t * C::keys, b = t & 1;
      // The other buffer and ring slot t % 2 were last read during tile t - 1 (waited before its barrier).
      if constexpr (wg_fills<KL, C>::t3) {
        fills.issue_stage(t + 2, false);
        fills.issue_stage(t + 2, true);
      } else if (t + 1 < n_tiles) {
        fills.copy_tile(t + 1, b ^ 1);
      }

      platform::frag_acc s_acc[C::n_tiles_k];
      platform::wg_fence();
      mul.issue_s(s_acc, b);
      if constexpr (wg_fills<KL, C>::t3) fills.decode_tile(t + 1, false, sm.k16(b ^ 1));
      platform::wg_wait<0>();
      platform::wg_hold(s_acc);

      platform::frag_a pa[C::n_tiles_k];
      mma_fragment_softmax<true>(a, s_acc, lane_rows, m_lane, l_lane, pa, o_acc, j0);
      wg_hold_o_p(o_acc, pa);
      platform::wg_fence();
      mul.issue_pv(o_acc, pa, b);
      if constexpr (wg_fills<KL, C>::t3) fills.decode_tile(t + 1, true, sm.v16(b ^ 1));
      platform::wg_wait<0>();
      platform::wg_hold(o_acc);

      fills.close();
    }
  }
  platform::async_wait<0>();

  wg_store_out<D, VL, C>(a, o_acc, m_lane, l_lane, warp, kv_head, head_group, q_tile, seq, work.split, tid);
}

// ---- warp-specialized form: producer warpgroups fill the K/V tiles, two consume them -------------
// The producers (the first PRODUCER_WARPGROUPS warpgroups, few registers) stage the raw rows with
// cp.async and decode them (turbo3) or copy the f16 rows (f16) into the two K and V buffers; the
// consumers (the last two warpgroups, rows 0..63 and 64..127) only multiply and run the softmax,
// with the registers the producers handed back. Named barriers pass each buffer between them: full
// (the producers' writes are done) and empty (both consumers' multiplies that read it have
// finished). turbo3 takes two producer warpgroups: the decode is what the consumers wait for, and
// a second producer warp per scheduler decodes beside the first (one producer with 72 registers
// and 8 chunks per round instead of 4 gains nothing, so it is the issue slots of a second warp,
// not the ILP of one). The two split the sides (one fills every K tile, the other every V tile,
// so a thread carries one side's addresses and its barrier numbers are constants), which is
// faster than both filling K, then V, of each tile (docs/performance.md, MMA).
template <int D, int PRODUCER_WARPGROUPS>
struct wg_producer_config : wg_config<D> {
  static constexpr int producer_warpgroups = PRODUCER_WARPGROUPS, consumer_warpgroups = 2;
  static constexpr int producer_threads = 128 * producer_warpgroups, consumer_threads = 128 * consumer_warpgroups;
  static constexpr int threads = producer_threads + consumer_threads;
  // Registers per thread after the split: the consumers hold O (128 f32 at D = 256), S and P and
  // spill below 216; one producer warpgroup decodes 4 chunks per round in 56, two decode 2 in 40.
  static constexpr int producer_registers = producer_warpgroups == 1 ? 56 : 40;
  static constexpr int consumer_registers = producer_warpgroups == 1 ? 224 : 216;
  static constexpr int decode_batch = producer_warpgroups == 1 ? 4 : 2;  // chunks whose stage loads go out together
  // The shares must fit what the launch gave the work-group (the compiler's per-thread cap for
  // `threads`: 168 at 384, 128 at 512), not the whole register file: a consumer's setmaxnreg.inc
  // waits until the registers it asks for are free, so asking for more than the producers hand
  // back hangs.
  static constexpr int launch_registers = platform::nvidia_max_registers / threads / 8 * 8;
  static_assert(producer_registers * producer_threads + consumer_registers * consumer_threads <=
                    launch_registers * threads,
                "more registers than the launch gives the work-group");
  static_assert(wg_config<D>::rows == 64 * consumer_warpgroups, "64 rows per consumer warpgroup");
  // Named barriers (0 is sync_threads): the producers' own, then per buffer b full / empty of K / V.
  static constexpr int bar_producer = 1, bar_k_full = 2, bar_v_full = 4, bar_k_empty = 6, bar_v_empty = 8;
  static constexpr int bar_consumers = 10;  // the consumers' own (Q rotated)
  static constexpr int bar_producer_v = 11;  // the V producers' own, where the producer warpgroups split K and V
};

// ---- the warp-specialized form's fills ---------------------------------------------------------------

// The producers' fills (thread tid of PT; ftid: its place among the fillers of its side). turbo3:
// the raw rows of a side into its ring slot (issue_stage), decoded from there into a K or V buffer
// (decode_tile); f16: K and V rows copied into a buffer (copy_tile). Tile t is key tile tile0 + t;
// the fills stop at key_end: the kernel's own, set once the mask's windows are known.
template <class L, class C>
struct wg_producer_fills {
  static constexpr bool t3 = L::type == data_type::turbo3;
  static constexpr int PT = C::producer_threads, ALL = C::threads;
  // split (turbo3): warpgroup 0 fills every K tile, warpgroup 1 every V tile.
  static constexpr bool split = t3;
  static_assert(!split || C::producer_warpgroups == 2, "split: two producer warpgroups");
  // FT: the producer threads that fill one side; full_count: the threads of a full / empty barrier
  // (the fillers of its side and the consumers).
  static constexpr int FT = split ? PT / 2 : PT, full_count = FT + C::consumer_threads;
  static_assert(FT % C::chunks == 0 && (FT / C::chunks) % 8 == 0, "a thread's keys keep their swizzle");

  const prefill_args& a;
  const wg_smem<C>& sm;
  const char* const k_head;
  const char* const v_head;
  const int& tile0;
  const int& key_end;
  const int tid, ftid;

  // turbo3: the raw rows of K or V of tile t into their ring slot, in 16-byte segments from the
  // aligned segment holding a row's first byte (a row sits (its address & 15) bytes into its slot
  // row), one lane per segment: a thread copies segment `seg` of rows `row`, row + per_pass, ...,
  // its pointers stepped from row to row. Nothing past the view's end is read. One commit group
  // per call.
  TURBO3_DEVICE TURBO3_FORCEINLINE void issue_stage(int t, bool v_side) const {
    constexpr int per_pass = FT / C::raw_row_lanes;
    const int seg = ftid % C::raw_row_lanes, row = ftid / C::raw_row_lanes;
    const int j0 = (tile0 + t) * C::keys, n_valid = min(C::keys, key_end - j0);
    const int64_t nb1 = v_side ? a.v_nb1 : a.k_nb1;
    const char* const view_end = v_side ? a.v_end : a.k_end;
    const char* src = (v_side ? v_head : k_head) + static_cast<int64_t>(j0 + row) * nb1;
    platform::async_destination to =
        platform::async_destination_of(sm.ring_slot(t, v_side)) + row * C::raw_pitch + 16 * seg;
    // The common case: a whole tile of a view whose row stride is a multiple of 16 (every row
    // sits as many bytes into its first segment as the first) that ends inside the view: what
    // each thread copies is fixed for the tile, no test per row (the general loop below spends
    // ~37 instructions per 16-byte copy, a quarter of the producers' instructions:
    // docs/performance.md, MMA).
    const int shift0 = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
    constexpr int passes = C::keys / per_pass;
    const char* const last_end = (v_side ? v_head : k_head) + static_cast<int64_t>(j0 + C::keys - 1) * nb1 - shift0 +
                                 16 * ((C::raw_row_bytes + shift0 + 15) / 16);
    if (nb1 % 16 == 0 && n_valid == C::keys && last_end <= view_end) {
      if (seg < C::raw_segments && 16 * seg < C::raw_row_bytes + shift0) {
        const char* const from = src - shift0 + 16 * seg;
        TURBO3_UNROLL
        for (int pass = 0; pass < passes; ++pass)
          platform::async_copy<16>(to + pass * per_pass * C::raw_pitch, from + pass * per_pass * nb1);
      }
    } else if (seg < C::raw_segments) {
#pragma unroll 1  // unrolled, the compiler hoists each pass's addresses: more than the producer's registers
      for (int key = row; key < n_valid; key += per_pass) {
        const int shift = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
        const int left = C::raw_row_bytes + shift - 16 * seg;  // bytes of the row from here on
        const char* const from = src - shift + 16 * seg;
        if (left > 0) {
          if (from + 16 <= view_end) platform::async_copy<16>(to, from);
          else platform::async_copy_head_of16(to, from, left);
        }
        src += per_pass * nb1;
        to += per_pass * C::raw_pitch;
      }
    }
    platform::async_commit();
  }

  // turbo3: K or V of tile t from its ring slot into dst (swizzled f16, times the norm); keys past
  // the tile decode to zeros (their stage rows are read as they are, the norm taken as 0). A
  // thread always decodes chunk c of keys key0, key0 + 8, ...: its stores are one swizzled place
  // plus 1 KB per step (the row's swizzle, key % 8, stays), its stage reads step by 8 rows.
  // Rounds of `batch` chunks whose loads are issued together.
  TURBO3_DEVICE TURBO3_FORCEINLINE void decode_tile(int t, bool v_side, unsigned char* dst, const turbo3_lut& lut) const {
    constexpr int key_step = FT / C::chunks;
    const int chunk_c = ftid % C::chunks, key0 = ftid / C::chunks;
    const int piece_lo = wg_piece(key0, 2 * chunk_c, C::keys), piece_hi = wg_piece(key0, 2 * chunk_c + 1, C::keys);
    constexpr int per_thread = C::keys / key_step, batch = C::decode_batch;
    static_assert(per_thread % batch == 0, "whole rounds");
    const int j0 = (tile0 + t) * C::keys, n_valid = min(C::keys, key_end - j0);
    const char* const st = reinterpret_cast<const char*>(sm.ring_slot(t, v_side));
    const uint32_t step = static_cast<uint32_t>(v_side ? a.v_nb1 : a.k_nb1);
    // A row sits in its own slot row, (its address & 15) bytes in (issue_stage).
    const uint32_t low0 = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(v_side ? v_head : k_head)) +
                          static_cast<uint32_t>(j0) * step;
    // WHOLE: a whole tile of a view whose row stride is a multiple of 16 (the common case): every
    // row sits (low0 & 15) bytes into its slot row and every key is valid, so a thread's stage
    // reads are one address plus constants.
    auto rounds = [&](auto whole_c) {
      constexpr bool whole = decltype(whole_c)::value;
      const char* const first = st + key0 * C::raw_pitch + (low0 & 15u);
#pragma unroll 1
      for (int u0 = 0; u0 < per_thread; u0 += batch) {
        mma_raw<L> raw[batch];
        TURBO3_UNROLL
        for (int u = 0; u < batch; ++u) {
          if constexpr (whole) {
            mma_load_raw<L>(raw[u], first + key_step * (u0 + u) * C::raw_pitch, chunk_c, true);
          } else {
            const uint32_t key = static_cast<uint32_t>(key0 + key_step * (u0 + u));
            mma_load_raw<L>(raw[u], st + key * C::raw_pitch + ((low0 + key * step) & 15u), chunk_c,
                            static_cast<int>(key) < n_valid);
          }
        }
        TURBO3_UNROLL
        for (int u = 0; u < batch; ++u) {
          uint32_t w[8];
          mma_decode_row_chunk<L>(raw[u], lut, w);
          unsigned char* const row = dst + (u0 + u) * key_step * 128;  // 128-byte swizzled rows
          *reinterpret_cast<uint4*>(row + piece_lo) = make_uint4(w[0], w[1], w[2], w[3]);
          *reinterpret_cast<uint4*>(row + piece_hi) = make_uint4(w[4], w[5], w[6], w[7]);
        }
      }
    };
    if ((step & 15u) == 0 && n_valid == C::keys) rounds(std::true_type{});
    else rounds(std::false_type{});
  }

  // f16: K and V of tile t into buffer b (one commit group); keys past the tile are zeros.
  TURBO3_DEVICE TURBO3_FORCEINLINE void copy_tile(int t, int b) const {
    constexpr int per_thread = C::keys * C::pieces / PT;
    const int j0 = (tile0 + t) * C::keys, n_valid = min(C::keys, key_end - j0);
    const platform::async_destination kd = platform::async_destination_of(sm.k16(b));
    const platform::async_destination vd = platform::async_destination_of(sm.v16(b));
#pragma unroll 2
    for (int u = 0; u < per_thread; ++u) {
      const int item = tid + PT * u, key = item / C::pieces, p = item % C::pieces;
      const bool ok = key < n_valid;
      const int64_t row = j0 + (ok ? key : 0);
      platform::async_copy16_or_zero(kd + wg_piece(key, p, C::keys), k_head + row * a.k_nb1 + 16 * p, ok);
      platform::async_copy16_or_zero(vd + wg_piece(key, p, C::keys), v_head + row * a.v_nb1 + 16 * p, ok);
    }
    platform::async_commit();
  }

  // The first tiles' copies (tiles 0 and 1 for turbo3, 0 for f16).
  TURBO3_DEVICE TURBO3_FORCEINLINE void start(bool v_role) const {
    if constexpr (t3) {
      issue_stage(0, v_role);
      issue_stage(1, v_role);
    } else {
      copy_tile(0, 0);
    }
  }

  // turbo3: one side, K (V false) or V, of every tile, from the side's own ring slots, with its
  // own barrier; the side is a constant of each copy of the loop, so that a thread holds one
  // side's addresses and no barrier number in a register.
  template <bool V>
  TURBO3_DEVICE TURBO3_FORCEINLINE void fill_side(int n_tiles) const {
    constexpr int bar_side = V ? C::bar_producer_v : C::bar_producer;
    constexpr int bar_empty = V ? C::bar_v_empty : C::bar_k_empty;
    constexpr int bar_full = V ? C::bar_v_full : C::bar_k_full;
    const turbo3_lut lut = lut_in_registers(a.lut);
    for (int t = 0; t < n_tiles; ++t) {
      const int b = t & 1;
      platform::async_wait<1>();  // this thread's rows of tile t (tile t + 1's may be in flight)
      platform::named_barrier_sync(bar_side, FT);  // the side's rows of tile t
      if (t >= 2) platform::named_barrier_sync(bar_empty + b, full_count);
      decode_tile(t, V, V ? sm.v16(b) : sm.k16(b), lut);
      platform::shared_writes_to_async();
      platform::named_barrier_arrive(bar_full + b, full_count);
      platform::named_barrier_sync(bar_side, FT);  // ring slot t % 2 read by the side
      issue_stage(t + 2, V);
    }
  }

  // f16: tile t is published as soon as it has landed (the full barriers complete once every
  // producer thread's copies have), then tile t + 1 is copied while the consumers work on t.
  TURBO3_DEVICE TURBO3_FORCEINLINE void copy_tiles(int n_tiles) const {
    for (int t = 0; t < n_tiles; ++t) {
      const int b = t & 1;
      platform::async_wait<0>();
      platform::shared_writes_to_async();
      platform::named_barrier_arrive(C::bar_k_full + b, ALL);
      platform::named_barrier_arrive(C::bar_v_full + b, ALL);
      if (t + 1 < n_tiles) {
        if (t + 1 >= 2) {
          platform::named_barrier_sync(C::bar_k_empty + (b ^ 1), ALL);
          platform::named_barrier_sync(C::bar_v_empty + (b ^ 1), ALL);
        }
        copy_tile(t + 1, b ^ 1);
      }
    }
  }
};

// MASKED: the instantiation for calls with a mask (the consumers read each whole tile's mask
// values ahead of its multiplies); the other is launched without one (mma_wg_producer_kernel).
template <int D, class L, class C, bool MASKED>
TURBO3_DEVICE void mma_wg_producer_body(const prefill_args& a) {
  using platform::frag_a;
  using platform::frag_acc;
  using F = wg_producer_fills<L, C>;
  constexpr bool t3 = F::t3, split = F::split;
  constexpr int PT = F::PT, ALL = F::ALL, FT = F::FT, full_count = F::full_count;
  const wg_smem<C> sm;
  int* const mask_end_s = sm.mask_end();

  const int tid = static_cast<int>(threadIdx.x);
  const bool producer = tid < PT;
  const bool v_role = split && tid >= FT;  // one value per warpgroup
  const int ftid = split ? tid % FT : tid;
  const prefill_work_group work = prefill_work_group_of(a, prefill_block_of(a));
  const int q_tile = work.q_tile, kv_head = work.kv_head, head_group = work.head_group, seq = work.seq;
  int kv_end = work.kv_end;  // with a mask, its largest visible end (key_tiles)
  // Tile t of the loops below is key tile tile0 + t; the fills stop at key_end (kv_end, or the end
  // of this work-group's key split). Both are set once the mask's windows are known (key_tiles).
  int tile0 = 0, key_end = kv_end;
  const bool split_keys = a.kv_splits > 1;

  const wg_producer_fills<L, C> fills{a, sm, work.k_head, work.v_head, tile0, key_end, tid, ftid};

  // The first tiles' copies (tiles 0 and 1 for turbo3, 0 for f16). Without a key split they go out
  // before Q is read (kv_end without the mask); a split's first tile is known once the mask's
  // windows are (key_tiles).
  if (producer && !split_keys) fills.start(v_role);

  // ---- setup: Q's runs (every thread) straight to q16, with no staging rows over the K/V buffers;
  // with the rotation the consumers then rotate them there (mma_rotate_q16_pairs_in_place, a whole
  // 128-value group per thread in f16 pairs) while the producers already fill
  // the first K/V tiles; each row's window (every thread).
  const auto q16_at = [&](int r, int d) { return sm.q16_at(r, d); };
  mma_load_q_runs<D, L, C>(a, q16_at, nullptr, kv_head, head_group, q_tile, seq, tid, ALL);
  platform::shared_writes_to_async();
  // Each row's window (with a mask, every thread reads mask rows), and the number of key tiles.
  // Called in each role's own branch, so that no code runs under both register shares.
  auto window_end = [&](const prefill_row& row) { return prefill_window_end(a, row, kv_end); };
  auto key_tiles = [&] {
    platform::sync_threads();  // Q's runs are in q16
    if (a.mask) kv_end = mask_visible_ends<C::rows, ALL>(a, kv_head, head_group, q_tile, seq, tid, mask_end_s, window_end);
    const key_tile_range range = prefill_key_tiles(a, kv_end, C::keys, work.split);
    tile0 = range.begin;
    key_end = min(kv_end, range.end * C::keys);
    return range.end - range.begin;
  };

  if (producer) {
    // ---- producers: tile t into buffer t % 2 once the consumers are done with tile t - 2 -----------
    platform::wg_registers_down<C::producer_registers>();
    const int n_tiles = key_tiles();
    if (split_keys) fills.start(v_role);
    if constexpr (t3) {
      if (v_role) fills.template fill_side<true>(n_tiles);
      else fills.template fill_side<false>(n_tiles);
    } else {
      fills.copy_tiles(n_tiles);
    }
    platform::async_wait<0>();
    return;
  }

  // ---- consumers: warp cw of 8, warpgroup cwg of 2 -------------------------------------------------
  platform::wg_registers_up<C::consumer_registers>();
  // cwg through a lane broadcast: a value the compiler knows to be one per warp, so the multiplies'
  // descriptors are worked out in uniform registers.
  const int ctid = tid - PT, cw = ctid / C::wave, cwg = platform::shfl(cw / 4, 0);
  const int n_tiles = platform::shfl(key_tiles(), 0);  // one per warp (uniform loop, see cwg)
  if (a.rotate_q) {
    mma_rotate_q16_pairs_in_place<D, L, C>(q16_at, ctid, ALL - PT);
    platform::shared_writes_to_async();
    platform::named_barrier_sync(C::bar_consumers, ALL - PT);
  }
  auto row_window_end = [&](const prefill_row& row, int r) {
    return prefill_row_window_end(a, row, r, kv_end, mask_end_s);
  };
  constexpr int R = platform::frag_acc_rows;
  mma_lane_row lane_rows[R];
  float m_lane[R], l_lane[R];
  mma_init_lane_rows(a, cw, kv_head, head_group, q_tile, seq, row_window_end, lane_rows, m_lane, l_lane);
  frag_acc o_acc[C::n_tiles_d];
  TURBO3_UNROLL
  for (int n = 0; n < C::n_tiles_d; ++n) platform::frag_zero(o_acc[n]);
  const wg_multiplies<C> mul(sm.q16(), sm.k16(0), sm.v16(0), cwg);
  // With a mask, the mask values of whole tiles are read before the tile's barrier and multiplies
  // (mma_load_mask_pairs), where the rows allow pair loads.
  const bool mask_paired = a.mask != nullptr && mma_mask_rows_paired(a);
  // One tile at a time per consumer warpgroup (the two drift apart, so one's softmax runs beside
  // the other's multiplies). Overlapping a warpgroup's own softmax with its P V (two sets of P)
  // spills at the consumers' 224 registers and is slower (docs/performance.md, MMA).
  for (int t = 0; t < n_tiles; ++t) {
    const int j0 = (tile0 + t) * C::keys, b = t & 1;
    frag_acc s_acc[C::n_tiles_k];
    mma_mask_pairs<C::n_tiles_k> mask_pairs;
    const bool prefetched = mask_paired && j0 + C::keys <= a.n_kv;
    if (prefetched) mma_load_mask_pairs(lane_rows, j0, mask_pairs);
    platform::named_barrier_sync(C::bar_k_full + b, full_count);
    platform::wg_fence();
    mul.issue_s(s_acc, b);
    platform::wg_wait<0>();
    platform::wg_hold(s_acc);
    if (t + 2 < n_tiles) platform::named_barrier_arrive(C::bar_k_empty + b, full_count);

    frag_a pa[C::n_tiles_k];
    mma_fragment_softmax<true>(a, s_acc, lane_rows, m_lane, l_lane, pa, o_acc, j0, mask_pairs, prefetched);
    platform::wg_hold(o_acc);
    TURBO3_UNROLL
    for (int ks = 0; ks < C::n_tiles_k; ++ks) platform::wg_hold(pa[ks]);
    platform::named_barrier_sync(C::bar_v_full + b, full_count);
    platform::wg_fence();
    mul.issue_pv(o_acc, pa, b);
    platform::wg_wait<0>();
    platform::wg_hold(o_acc);
    if (t + 2 < n_tiles) platform::named_barrier_arrive(C::bar_v_empty + b, full_count);
  }

  wg_store_out<D, L, C>(a, o_acc, m_lane, l_lane, cw, kv_head, head_group, q_tile, seq, work.split, ctid);
}

template <int D, class L, class C, bool MASKED>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS_RESIDENT(C::threads, 1) mma_wg_producer_kernel(prefill_args a) {
  if constexpr (platform::has_warpgroup_mma) {
    // Launched only without a mask: the mask's code compiles out (docs/performance.md, MMA).
    if constexpr (!MASKED) a.mask = nullptr;
    mma_wg_producer_body<D, L, C, MASKED>(a);
  } else {
#if TURBO3_DEVICE_PASS
    platform::trap();  // never launched: warpgroup_mma_available routes other devices elsewhere
#endif
  }
}

template <int D, class KL, class VL, class C>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS_RESIDENT(C::threads, 1) mma_wg_kernel(prefill_args a) {
  if constexpr (platform::has_warpgroup_mma) {
    mma_wg_body<D, KL, VL, C>(a);
  } else {
#if TURBO3_DEVICE_PASS
    platform::trap();  // never launched: warpgroup_mma_available routes other devices elsewhere
#endif
  }
}

// ---- host side ------------------------------------------------------------------------------------

// Whether the warpgroup kernel takes these (validated, mma_supported) params on `device`.
inline bool mma_wg_applies(const attention_params& p, int device) {
  const int64_t d = p.head_dim_k();
  return platform::warpgroup_mma_available(device) && (d == 128 || d == 256) && p.k.type == p.v.type;
}

template <int D, class L>
status launch_mma_wg(const attention_params& p, data_type k_was, data_type v_was, bool specialized, int kv_splits,
                     float* partial, int device, hipStream_t stream) {
  if (specialized) {
    // turbo3: two producer warpgroups (the decode wants their issue slots: docs/performance.md,
    // MMA); f16: one (it only copies).
    constexpr bool t3 = L::type == data_type::turbo3;
    using C = wg_producer_config<D, t3 ? 2 : 1>;
    prefill_args a = make_prefill_args(p, C::rows, k_was, v_was);
    a.kv_splits = kv_splits;
    a.partial = partial;
    // Calls with a mask take an instantiation of their own (the mask read ahead of the
    // multiplies), so that the one without keeps its registers and code (docs/performance.md, MMA).
    const status s =
        a.mask != nullptr
            ? launch_prefill_grid<&mma_wg_producer_kernel<D, L, C, true>>(a, C::threads, C::smem_bytes, device, stream)
            : launch_prefill_grid<&mma_wg_producer_kernel<D, L, C, false>>(a, C::threads, C::smem_bytes, device, stream);
    if (s != status::ok || kv_splits <= 1) return s;
    return launch_prefill_merge(a, D, stream);
  }
  using C = wg_config<D>;
  const prefill_args a = make_prefill_args(p, C::rows, k_was, v_was);  // no key split (mma_kv_splits)
  return launch_prefill_grid<&mma_wg_kernel<D, L, L, C>>(a, C::threads, C::smem_bytes, device, stream);
}

// Launches the warpgroup kernel for params mma_wg_applies takes (specialized: the form with a
// producer warpgroup; kv_splits > 1 only there). k_was / v_was as for make_prefill_args.
inline status launch_mma_wg(const attention_params& p, data_type k_was, data_type v_was, bool specialized,
                            int kv_splits, float* partial, int device, hipStream_t stream) {
  using T3 = kv::turbo3_loader;
  using F16 = kv::f16_loader;
  const bool t3 = p.k.type == data_type::turbo3;
  if (p.head_dim_k() == 128) {
    if (t3) return launch_mma_wg<128, T3>(p, k_was, v_was, specialized, kv_splits, partial, device, stream);
    return launch_mma_wg<128, F16>(p, k_was, v_was, specialized, kv_splits, partial, device, stream);
  }
  if (t3) return launch_mma_wg<256, T3>(p, k_was, v_was, specialized, kv_splits, partial, device, stream);
  return launch_mma_wg<256, F16>(p, k_was, v_was, specialized, kv_splits, partial, device, stream);
}

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
