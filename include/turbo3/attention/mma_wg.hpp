// MMA on warpgroup multiplies (NVIDIA sm_90a, D = 256, K and V both f16 or both turbo3): the MMA
// kernel's structure with Q K^T and P V issued as asynchronous 64 x 64 x 16 multiplies that read
// their shared-memory operands themselves (platform/warpgroup_mma.hpp), so the warps spend their
// issue slots on the turbo3 unpack and the softmax instead of on fragment loads and multiplies.
//
// One work-group: two warpgroups of four warps, 128 rows (a row is one (query, query head) pair,
// stacked as in TILE and MMA: tile_row_of); warp w owns rows 16 w .. 16 w + 15, its warpgroup's 64
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
// there when asked), as the fragment kernel does on NVIDIA.
// Measured on an H200 (bench/RESULTS.md, thirteenth session): D = 256 causal pp4096, f16 420 us,
// turbo3 566 us, against 785 / 830 us with the fragment kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/attention/mma.hpp"
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
  static_assert(D == 256, "warpgroup MMA covers D = 256");
  static_assert(q_bytes % 1024 == 0 && kv_bytes % 1024 == 0 && raw_stage_bytes % 1024 == 0, "aligned regions");
  static_assert(smem_bytes <= 232448, "more than 227 KB of shared memory");
  static_assert((keys * chunks) % threads == 0 && (keys * pieces) % threads == 0, "whole items per thread");
};

// Byte offset of 16-byte piece p (slot positions 8 p .. 8 p + 7) of row r in a tile of R rows:
// panel p / 8 (R rows of 128 bytes), the piece's place in its row XOR r % 8 (the 128-byte swizzle).
// A warp writing the pieces of a row or two touches every bank once per 128 bytes.
TURBO3_HD constexpr int wg_piece(int r, int p, int R) { return (p / 8) * R * 128 + r * 128 + (((p % 8) ^ (r % 8)) << 4); }

template <int D, class KL, class VL, class C>
TURBO3_DEVICE void mma_wg_body(const tile_args& a) {
  using platform::frag_a;
  using platform::frag_acc;
  constexpr bool t3 = KL::type == data_type::turbo3;
  // turbo3 overlaps the softmax with P V of the tile before (measured on an H200, D = 256: 5% faster
  // causal, 1-3% slower masked); f16 runs one tile at a time (the pipelined form was 6-8% slower
  // causal, 12-20% masked: two sets of P spill next to O).
  constexpr bool pipelined = t3;
  static_assert(KL::type == VL::type, "K and V of one type");
  extern __shared__ float4 mma_wg_smem4[];
  // The tiles from the first 1024-byte boundary (an offset from the shared array, so that the
  // compiler keeps shared-memory loads and stores, not generic ones).
  unsigned char* const smem = reinterpret_cast<unsigned char*>(mma_wg_smem4) +
                              ((1024u - (platform::shared_address_of(mma_wg_smem4) & 1023u)) & 1023u);
  unsigned char* const q16 = smem;
  auto k16_of = [&](int b) { return smem + C::off_k + b * C::kv_bytes; };
  auto v16_of = [&](int b) { return smem + C::off_v + b * C::kv_bytes; };
  unsigned char* const stages = smem + C::off_stage;
  float* const q_stage = reinterpret_cast<float*>(smem + C::off_k);  // [rows][ldo] (Q prologue)
  int* const mask_end_s = reinterpret_cast<int*>(smem + C::off_row);  // [rows]

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / C::wave, wg = warp / 4;
  const prefill_block blk = prefill_block_of(a);
  const int q_tile = blk.q_tile, kv_head = blk.kv_head, head_group = blk.head_group, seq = blk.seq;
  const turbo3_lut lut = lut_for<KL, VL>(a.lut);

  int kv_end = prefill_kv_end(a, q_tile);
  const char* const k_head = a.k + kv_head * a.k_nb2 + seq * a.k_nb3;
  const char* const v_head = a.v + kv_head * a.v_nb2 + seq * a.v_nb3;

  // ---- tile fills ---------------------------------------------------------------------------------
  // turbo3: slot t % 2 of the K ring (v_side false) or of the V ring, after it.
  auto ring_slot = [&](int t, bool v_side) { return stages + ((v_side ? 2 : 0) + t % 2) * C::raw_tile_bytes; };
  // turbo3: the raw rows of K (v_side false) or V of tile t into slot t % 2 of their ring, in
  // 16-byte segments from the aligned segment holding a row's first byte (a row sits
  // (its address & 15) bytes into its slot; nothing past the view's end is read), one lane per
  // segment. One commit group per call (empty past the last tile).
  auto issue_stage = [&](int t, bool v_side) {
    const int j0 = t * C::keys, n_valid = min(C::keys, kv_end - j0);
    const char* const head = v_side ? v_head : k_head;
    const int64_t nb1 = v_side ? a.v_nb1 : a.k_nb1;
    const char* const view_end = v_side ? a.v_end : a.k_end;
    const platform::async_destination ring = platform::async_destination_of(ring_slot(t, v_side));
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
  };
  const uint32_t k_low = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(k_head));
  const uint32_t v_low = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(v_head));
  // turbo3: K (v_side false) or V of tile t from its ring slot into dst. Items are chunks, a row's
  // chunks on neighbouring lanes (the stage reads fall on distinct banks, so do the swizzled
  // stores); keys past the tile decode to zeros (norm 0).
  // In rounds of two chunks per thread (the loads of a round issued together), which keeps the
  // registers next to O, S and two sets of P in bounds.
  auto decode_tile = [&](int t, bool v_side, unsigned char* dst) {
    constexpr int per_thread = C::keys * C::chunks / C::threads, batch = 2;
    static_assert(per_thread % batch == 0, "whole rounds");
    const int j0 = t * C::keys, n_valid = min(C::keys, kv_end - j0);
    const char* const st = reinterpret_cast<const char*>(ring_slot(t, v_side));
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
  };
  // f16: K and V of tile t copied into buffer b (one commit group); keys past the tile are zeros.
  auto copy_tile = [&](int t, int b) {
    constexpr int per_thread = C::keys * C::pieces / C::threads;
    const int j0 = t * C::keys, n_valid = min(C::keys, kv_end - j0);
    const platform::async_destination kd = platform::async_destination_of(k16_of(b));
    const platform::async_destination vd = platform::async_destination_of(v16_of(b));
    TURBO3_UNROLL
    for (int u = 0; u < per_thread; ++u) {
      const int item = tid + C::threads * u, key = item / C::pieces, p = item % C::pieces;
      const bool ok = key < n_valid;
      const int64_t row = j0 + (ok ? key : 0);
      platform::async_copy16_or_zero(kd + wg_piece(key, p, C::keys), k_head + row * a.k_nb1 + 16 * p, ok);
      platform::async_copy16_or_zero(vd + wg_piece(key, p, C::keys), v_head + row * a.v_nb1 + 16 * p, ok);
    }
    platform::async_commit();
  };

  // The first tiles' copies go out before Q is read (kv_end without the mask: the mask may end the
  // keys sooner, then they are multiplied with zero weight or not at all). Pipelined: K of tiles 0
  // and 1 and V of tile 0; else K and V of tiles 0 and 1 (turbo3 raw rows) or of tile 0 (f16).
  if constexpr (t3) {
    issue_stage(0, false);
    issue_stage(0, true);
    issue_stage(1, false);
    if constexpr (!pipelined) issue_stage(1, true);
  } else {
    static_assert(!pipelined, "the pipelined schedule decodes turbo3 tiles");
    copy_tile(0, 0);
  }

  // ---- Q: prescaled, rotated when asked, f16 in K's slot order, swizzled -------------------------
  mma_load_q<D, KL, C>(
      a, [&](int r, int d) { return reinterpret_cast<uint16_t*>(q16 + wg_piece(r, d / 8, C::rows)) + d % 8; }, q_stage,
      kv_head, head_group, q_tile, seq, tid);
  platform::shared_writes_to_async();
  platform::sync_threads();  // the staging rows are reused by the K/V tiles

  // ---- each row's window (causal; mask: mask_visible_ends) ----------------------------------------
  auto window_end = [&](const tile_row& row) { return prefill_window_end(a, row, kv_end); };
  if (a.mask) kv_end = mask_visible_ends<C::rows, C::threads>(a, kv_head, head_group, q_tile, seq, tid, mask_end_s, window_end);
  auto row_window_end = [&](const tile_row& row, int r) {
    return a.mask ? min(window_end(row), mask_visible_end_of(a, mask_end_s, r)) : window_end(row);
  };
  constexpr int R = platform::frag_acc_rows;
  mma_lane_row lane_rows[R];
  float m_lane[R], l_lane[R];
  mma_init_lane_rows(a, warp, kv_head, head_group, q_tile, seq, row_window_end, lane_rows, m_lane, l_lane);
  frag_acc o_acc[C::n_tiles_d];
  TURBO3_UNROLL
  for (int n = 0; n < C::n_tiles_d; ++n) platform::frag_zero(o_acc[n]);
  // O's dimension panel nb: four 16-column tiles, the accumulator of one multiply.
  auto o_panel = [&](int nb) -> frag_acc(&)[4] { return *reinterpret_cast<frag_acc(*)[4]>(o_acc + 4 * nb); };

  // ---- tile 0 into buffer 0 (pipelined: K only, and V buffer 1 zeroed for the empty first P V) ------
  const int n_tiles = (kv_end + C::keys - 1) / C::keys;
  if constexpr (pipelined) {
    for (int i = tid; i < static_cast<int>(C::kv_bytes / 16); i += C::threads)
      reinterpret_cast<uint4*>(v16_of(1))[i] = make_uint4(0u, 0u, 0u, 0u);
  }
  platform::async_wait<0>();
  if constexpr (t3) {
    platform::sync_threads();
    decode_tile(0, false, k16_of(0));
    if constexpr (!pipelined) decode_tile(0, true, v16_of(0));
  }
  platform::shared_writes_to_async();
  platform::sync_threads();

  // Operands: a descriptor per tile, a constant byte offset per multiply (wg_offset). Q (A of S):
  // this warpgroup's 64 rows, dimensions 16 ks ..; K (B of S, N = keys, K = dimensions, stored N
  // rows with K contiguous); V (B of P V, K = keys 16 ks .., N = dimension panel nb, stored K rows
  // with N contiguous: TransB).
  const uint64_t q_desc = platform::wg_operand_swizzled(q16 + 64 * wg * 128, 1024);
  const uint64_t k_desc0 = platform::wg_operand_swizzled(k16_of(0), 1024);
  const uint64_t v_desc0 = platform::wg_operand_swizzled(v16_of(0), 1024);
  constexpr int kv_step = static_cast<int>(C::kv_bytes);  // from buffer 0 to buffer 1
  auto qk_offset = [](int ks, int rows) { return (ks / 4) * rows * 128 + (ks % 4) * 32; };
  // S = Q K^T of the tile in buffer b; O += P V of the tile in buffer b. One commit group each.
  auto issue_s = [&](frag_acc (&s_acc)[C::n_tiles_k], int b) {
    TURBO3_UNROLL
    for (int ks = 0; ks < C::n_tiles_d; ++ks)
      platform::wg_mma_ss<false>(s_acc, platform::wg_offset(q_desc, qk_offset(ks, C::rows)),
                                 platform::wg_offset(k_desc0, b * kv_step + qk_offset(ks, C::keys)), ks > 0);
    platform::wg_commit();
  };
  auto issue_pv = [&](const frag_a (&p)[C::n_tiles_k], int b) {
    TURBO3_UNROLL
    for (int nb = 0; nb < C::panels; ++nb)
      TURBO3_UNROLL
      for (int ks = 0; ks < C::n_tiles_k; ++ks)
        platform::wg_mma_rs<true>(o_panel(nb), p[ks],
                                  platform::wg_offset(v_desc0, b * kv_step + nb * C::keys * 128 + ks * 16 * 128), true);
    platform::wg_commit();
  };

  // No branch between a multiply's issue and its wait (the compiler would serialize around one):
  // every warpgroup multiplies every tile (one whose rows see none of its keys gets zero
  // probabilities; causal tiles of 64 keys end on the work-group's diagonal, which both
  // warpgroups reach), and the tile past the last is decoded anyway (zeros, never read).
  if constexpr (pipelined) {
  // Pipelined (turbo3). Step t multiplies S = Q K^T of tile t and, behind it, O += P V of tile t - 1 (with P of the
  // step before: the first step's P is zero, its V buffer zeroed), decodes (or copies) K of tile
  // t + 1 and V of tile t while they run, then runs the softmax of tile t while the tensor cores
  // are still on P V. Buffers: K and V of tile t in buffer t % 2; K of tile t + 1 replaces K of
  // t - 1 (read by S of step t - 1), V of tile t replaces V of t - 2 (read by P V of step t - 1),
  // both waited for before step t's barrier. turbo3 rings: K of tile t + 2 and V of tile t + 1 are
  // copied during step t, into the slots step t - 1 decoded from.
  frag_a pa[C::n_tiles_k];
  TURBO3_UNROLL
  for (int ks = 0; ks < C::n_tiles_k; ++ks) pa[ks] = frag_a{{0u, 0u, 0u, 0u}};
  // O's and P's registers were last written before the fence that opens the step (wg_hold keeps
  // those writes there); a fence between S and P V would end the step's pipeline.
  auto hold_o_p = [&] {
    platform::wg_hold(o_acc);
    TURBO3_UNROLL
    for (int ks = 0; ks < C::n_tiles_k; ++ks) platform::wg_hold(pa[ks]);
  };
  for (int t = 0; t < n_tiles; ++t) {
    const int j0 = t * C::keys, b = t & 1;
    issue_stage(t + 2, false);
    issue_stage(t + 1, true);

    frag_acc s_acc[C::n_tiles_k];
    hold_o_p();
    platform::wg_fence();
    issue_s(s_acc, b);
    issue_pv(pa, b ^ 1);  // tile t - 1
    decode_tile(t + 1, false, k16_of(b ^ 1));
    decode_tile(t, true, v16_of(b));
    platform::wg_wait<1>();  // S of tile t
    platform::wg_hold(s_acc);

    // The softmax while P V of tile t - 1 runs; O is rescaled (where a row's maximum moved) after it.
    frag_a p_next[C::n_tiles_k];
    float alpha[R];
    const bool rescale = mma_fragment_probabilities<true>(a, s_acc, lane_rows, m_lane, l_lane, p_next, j0, alpha);
    platform::wg_wait<0>();
    hold_o_p();  // P of tile t - 1 stays in its registers (read by the multiplies) until here
    if (rescale) mma_rescale_rows(o_acc, alpha);
    TURBO3_UNROLL
    for (int ks = 0; ks < C::n_tiles_k; ++ks) pa[ks] = p_next[ks];

    platform::async_wait<0>();
    platform::shared_writes_to_async();
    platform::sync_threads();
  }
  if (n_tiles > 0) {
    hold_o_p();
    platform::wg_fence();
    issue_pv(pa, (n_tiles - 1) & 1);
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
    if constexpr (t3) {
      issue_stage(t + 2, false);
      issue_stage(t + 2, true);
    } else if (t + 1 < n_tiles) {
      copy_tile(t + 1, b ^ 1);
    }

    frag_acc s_acc[C::n_tiles_k];
    platform::wg_fence();
    issue_s(s_acc, b);
    if constexpr (t3) decode_tile(t + 1, false, k16_of(b ^ 1));
    platform::wg_wait<0>();
    platform::wg_hold(s_acc);

    frag_a pa[C::n_tiles_k];
    mma_fragment_softmax<true>(a, s_acc, lane_rows, m_lane, l_lane, pa, o_acc, j0);
    platform::wg_hold(o_acc);
    TURBO3_UNROLL
    for (int ks = 0; ks < C::n_tiles_k; ++ks) platform::wg_hold(pa[ks]);
    platform::wg_fence();
    issue_pv(pa, b);
    if constexpr (t3) decode_tile(t + 1, true, v16_of(b ^ 1));
    platform::wg_wait<0>();
    platform::wg_hold(o_acc);

    platform::async_wait<0>();  // f16: tile t + 1; turbo3: ring slots of tile t + 2
    platform::shared_writes_to_async();
    platform::sync_threads();
  }
  }
  platform::async_wait<0>();

  // ---- epilogue: sink, normalization, un-rotation, store from the fragments -----------------------
  float lane_factor[R];
  TURBO3_UNROLL
  for (int rr = 0; rr < R; ++rr) {
    const tile_row lr = tile_row_of(a, warp * 16 + platform::frag_acc_row(2 * rr), kv_head, head_group, q_tile);
    lane_factor[rr] = prefill_row_factor(a, lr, m_lane[rr], platform::frag_row_sum(l_lane[rr]));
  }
  if (a.unrotate_out) mma_store_out_fragments<D, VL, C>(a, o_acc, lane_factor, kv_head, head_group, q_tile, seq, tid);
  else mma_store_out_plain_fragments<D, VL, C>(a, o_acc, lane_factor, kv_head, head_group, q_tile, seq, tid);
}

template <int D, class KL, class VL, class C>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS_RESIDENT(C::threads, 1) mma_wg_kernel(tile_args a) {
  if constexpr (platform::has_warpgroup_mma) {
    mma_wg_body<D, KL, VL, C>(a);
  } else {
#if TURBO3_DEVICE_PASS
    platform::trap();  // never launched: warpgroup_mma_available routes other devices elsewhere
#endif
  }
}

// ---- host side ------------------------------------------------------------------------------------

// Whether the warpgroup kernel takes these (validated, mma_supported) params on the current device.
inline bool mma_wg_applies(const attention_params& p) {
  int device = 0;
  if (hipGetDevice(&device) != hipSuccess) {
    (void)hipGetLastError();
    return false;
  }
  return platform::warpgroup_mma_available(device) && p.head_dim_k() == 256 && p.k.type == p.v.type;
}

template <int D, class L>
status launch_mma_wg(const attention_params& p, hipStream_t stream) {
  using C = wg_config<D>;
  const tile_args a = make_tile_args(p, C::rows, p.k.type, p.v.type);
  static const bool limit_raised = raise_smem_limit(&mma_wg_kernel<D, L, L, C>, C::smem_bytes);
  return launch_prefill_grid(&mma_wg_kernel<D, L, L, C>, limit_raised, a, C::threads, C::smem_bytes, stream);
}

// Launches the warpgroup kernel for params mma_wg_applies takes.
inline status launch_mma_wg(const attention_params& p, hipStream_t stream) {
  if (p.k.type == data_type::turbo3) return launch_mma_wg<256, kv::turbo3_loader>(p, stream);
  return launch_mma_wg<256, kv::f16_loader>(p, stream);
}

// The MMA route of flash_attention for validated params (no workspace at all): the warpgroup
// kernel where it applies (and warpgroup is allowed), else the fragment kernel.
template <class Allocator>
status run_mma(const attention_params& p, bool warpgroup, Allocator& allocator, hipStream_t stream) {
  status s = mma_supported(p);
  if (s != status::ok) return s;
  s = check_capture(allocator, stream);
  if (s != status::ok) return s;
  if (warpgroup && mma_wg_applies(p)) return launch_mma_wg(p, stream);
  return launch_mma(p, stream);
}

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
