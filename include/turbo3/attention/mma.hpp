// MMA: the matrix-core prefill kernel (n_q >= 3). The TILE structure with Q K^T and P V on the
// fragment abstraction of platform/fragment.hpp (16x16x16 f16 multiplies, f32 accumulation).
//
// One work-group serves `rows` = 16 x warps rows, a row being one (query, query head) pair: every
// query head of a GQA group is stacked with a run of queries (prefill_row_of, as in TILE), so one
// dequantized K/V tile feeds all of them. Each warp owns 16 rows for the whole kernel.
//   1. Q is read once, prescaled (scale * log2 e, or scale / softcap), rotated when K is turbo3 and
//      the library rotates (through a float32 staging area: on NVIDIA one whole 128-value group per
//      thread in registers, elsewhere in two passes), and stored as f16 [rows][D + 8] with the
//      dimensions of every 16-value chunk in the K loader's slot order (a dot product does not
//      care about the order of its terms, so K can be stored exactly as its loader decodes it).
//   2. Per tile of `keys` keys, the packed K and V bytes (read one tile ahead into registers where
//      the configuration asks) are dequantized straight into f16 shared-memory tiles laid out for
//      fragment loads: K as [keys][D + 8] (decode_half2: fp16 pairs from byte permutes); V the
//      same way where the fragment back-end has a transposing load (NVIDIA ldmatrix .trans: two
//      16-byte stores per chunk), else transposed as [D][keys + 8] (decode_pairs: the pairs run
//      along keys, sixteen 4-byte stores per two chunks). turbo3 values carry
//      their block norm, multiplied in f16 (one packed multiply per pair; the same single rounding
//      as a dequantized f16 copy would have). No f16 copy of the cache exists anywhere.
//   3. S (16 rows x keys per warp) = Q K^T on fragments, then the online softmax (base 2,
//      float32): softcap, causal window, mask with ALiBi slope, as TILE. Where the accumulator
//      layout is the A operand's (NVIDIA) it runs on the score fragments in registers and P goes
//      straight into P V; elsewhere the warp writes S to its own float32 scratch, its lanes run the
//      softmax over whole rows and P goes through f16 scratch.
//   4. O (16 rows x D per warp, in registers) is rescaled and O += P V on fragments.
// NVIDIA turbo3 K and V: the raw rows of the next two tiles are copied with 16-byte cp.async into
// the (then unused) score scratch while the current tile is decoded from there and multiplied.
// NVIDIA D = 256: two K/V tile buffers; half the warps fill the next tile before their multiplies,
// half after, so unpacking (or loading) and matrix multiplies share each scheduler.
// Q is read in runs of 16 consecutive values per thread (a warp covers whole rows), the
// slot order is a closed form per loader, and the softmax is one of three branch-free variants
// (window; softcap; mask) picked once per tile: together they take about a quarter of the f16
// kernel's time and a sixth of the turbo3 kernel's (docs/performance.md, MMA).
// Causal, or a mask that hides keys (ggml's causal mask: -inf past each query's diagonal): key tiles
// past the work-group's last visible key are never loaded (each mask row's visible end is read
// once up front, mask_row_visible_end); a warp whose rows see none of a tile's keys skips its
// multiplies. The epilogue adds sinks and normalizes; on NVIDIA each warp
// stores its own rows straight from the accumulator fragments, un-rotated there when asked (V
// turbo3 and the library un-rotates: a 16x16 Hadamard multiply per run, additions across runs,
// mma_store_out_fragments) or as they are (mma_store_out_plain_fragments); elsewhere the rows go
// to shared memory in natural dimension order, are un-rotated there when asked, and stored. Tile
// shapes come from a per-architecture-family table.
//
// On sm_90 devices of sm_90a builds, D = 256 with K and V of one type runs on warpgroup multiplies
// instead (attention/mma_wg.hpp, which shares this file's Q load, softmax and output stores).
// Status: tested and timed on NVIDIA GPUs (tests/gpu/test_mma.cu, bench/RESULTS.md); AMD
// back-ends compile without spills (tests/amd/RESOURCES.md) but have not run on AMD hardware.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "turbo3/attention/kernel_args.hpp"
#include "turbo3/attention/params.hpp"
#include "turbo3/attention/prefill_common.hpp"
#include "turbo3/kv/loaders.hpp"
#include "turbo3/platform/arch.hpp"
#include "turbo3/platform/async_copy.hpp"
#include "turbo3/platform/device.hpp"
#include "turbo3/platform/fragment.hpp"
#include "turbo3/platform/limits.hpp"
#include "turbo3/platform/mma.hpp"
#include "turbo3/status.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

// ---- tile shapes ---------------------------------------------------------------------------------

// Set field by field in mma_table (C++17 has no designated initializers), from these zeros.
struct mma_shape {
  int warps = 0;          // warps per work-group; each owns 16 rows
  int keys = 0;           // keys per K/V tile (a multiple of 16)
  int resident = 0;       // work-groups per multiprocessor the register budget aims for (NVIDIA)
  bool prefetch = false;  // read the next tile's packed K/V bytes into registers during this tile's math
  int batch = 0;          // without prefetch: K items (and V items) per thread whose loads are issued together
  bool staged = false;    // turbo3 K and V: copy the raw bytes of the tiles ahead into shared memory with
                          // asynchronous copies (two stages), decode from there; needs the score fragments
                          // in registers (platform::frag_acc_is_a), as the stages use the score scratch
  bool double_buffer = false;  // two K/V tile buffers: each warp decodes (or loads) its share of tile t + 1
                               // before or after (half the warps each) it multiplies tile t, and one barrier
                               // per tile separates them, so one warp's unpack or loads run beside another's
                               // matrix multiplies (needs !prefetch)
  bool v_rows = false;  // V tile stored as key rows [keys][D + 8], like K, read with frag_load_b_rows (a
                        // transposing load on NVIDIA); else as V^T [D][keys + 8], read with frag_load_b
};

// NVIDIA: D = 128 with 64 rows (about 80 KB of shared memory, two work-groups per SM), the next
// tile's bytes read into registers during the math where not staged; D = 256 with 128 rows (about
// 205 KB, one per SM) so each unpacked K/V tile feeds twice the rows, without register prefetch
// (with it, ptxas spills next to the 128 accumulator registers), double buffered in 48-key tiles
// (two 64-key buffers with their scratch would need 250 KB), turbo3 K and V staged (the decode
// then reads shared memory, not the cache). At D = 256, 48-key double-buffered tiles are faster
// than 32-key ones and than 64-key single-buffered ones for both types, f16 only because half the
// warps fill the next tile after their multiplies (mma_body) (docs/performance.md, MMA). AMD:
// <= 64 KB LDS per work-group, so fewer rows and 32-key tiles, no register prefetch, loads in
// rounds of two K and two V items. V as key rows on NVIDIA (faster than V^T for f16 and turbo3
// alike: docs/performance.md, MMA); AMD keeps V^T, whose fragment loads there read contiguous runs.
TURBO3_HD constexpr mma_shape mma_table(platform::arch_family f, int d) {
  mma_shape s;
  if (f == platform::arch_family::nvidia && d == 128) {
    s.warps = 4;
    s.keys = 64;
    s.resident = 2;
    s.prefetch = true;
    s.batch = 4;
    s.staged = true;
    s.double_buffer = false;
    s.v_rows = true;
  } else if (f == platform::arch_family::nvidia) {  // D = 256
    s.warps = 8;
    s.keys = 48;
    s.resident = 1;
    s.prefetch = false;
    s.batch = 4;
    s.staged = true;
    s.double_buffer = true;
    s.v_rows = true;
  } else if (d == 128) {  // AMD
    s.warps = 4;
    s.keys = 32;
    s.resident = 1;
    s.prefetch = false;
    s.batch = 2;
    s.staged = false;
    s.double_buffer = false;
    s.v_rows = false;
  } else {  // AMD, D = 256
    s.warps = 2;
    s.keys = 32;
    s.resident = 1;
    s.prefetch = false;
    s.batch = 1;
    s.staged = false;
    s.double_buffer = false;
    s.v_rows = false;
  }
  return s;
}

TURBO3_HD constexpr int family_wave(platform::arch_family f) { return f == platform::arch_family::cdna3 ? 64 : 32; }
// Not 512: a warp's 16 output rows would take 256 accumulator registers a lane (docs/performance.md,
// MMA); TILE serves D = 512.
TURBO3_HD constexpr bool mma_head_dim(int d) { return d == 128 || d == 256; }

template <int D, int WARPS, int KEYS, int WAVE, int RESIDENT, bool PREFETCH, int BATCH, bool STAGED, bool DOUBLE,
          bool V_ROWS>
struct mma_config {
  static constexpr int head_dim = D, warps = WARPS, keys = KEYS, wave = WAVE, resident = RESIDENT, batch = BATCH;
  static constexpr bool prefetch = PREFETCH, staged = STAGED, double_buffer = DOUBLE, v_rows = V_ROWS;
  static constexpr int buffers = DOUBLE ? 2 : 1;  // K/V tile buffers
  static constexpr int rows = 16 * WARPS;
  static constexpr int threads = WARPS * WAVE;
  static constexpr int ldq = D + 8, ldk = D + 8;  // halves: Q and K rows
  static constexpr int ldv = V_ROWS ? D + 8 : KEYS + 8;  // halves: V rows (one per key) or V^T rows (per dimension)
  static constexpr int lds = KEYS + 4;             // floats: score rows of a warp
  static constexpr int ldp = KEYS + 8;             // halves: probability rows of a warp
  static constexpr int ldo = D + 4;                // floats: Q staging and output rows
  static constexpr int chunks = D / kv::chunk_values;
  // An item: one chunk of one key (K; V rows), or one chunk of two keys (V^T: pairs run along keys).
  static constexpr int k_items = KEYS * chunks, v_items = V_ROWS ? KEYS * chunks : (KEYS / 2) * chunks;
  static constexpr int k_per_thread = (k_items + threads - 1) / threads;
  static constexpr int v_per_thread = (v_items + threads - 1) / threads;
  static constexpr int lanes_per_row = WAVE / 16;            // softmax lanes per row
  static constexpr int keys_per_lane = KEYS / lanes_per_row;           // keys per softmax lane
  static constexpr int n_tiles_d = D / 16, n_tiles_k = KEYS / 16;
  static constexpr size_t q16_bytes = size_t{2} * rows * ldq;
  static constexpr size_t k_bytes = size_t{2} * KEYS * ldk;
  static constexpr size_t v_bytes = size_t{2} * (V_ROWS ? KEYS : D) * ldv;
  static constexpr size_t s_bytes = size_t{4} * WARPS * 16 * lds;
  static constexpr size_t p_bytes = size_t{2} * WARPS * 16 * ldp;
  static constexpr size_t stage_bytes = size_t{4} * rows * ldo;
  // Staged turbo3 tiles: raw rows (D / 128 blocks of 50 bytes) copied in 16-byte segments from the
  // aligned segment that holds a row's first byte, so a row sits 0-14 bytes into its slot; K then
  // V; two stages, in the score scratch (enlarged where they need more).
  static constexpr int raw_row_bytes = D / block_values * static_cast<int>(block_bytes);
  static constexpr int raw_segments = (raw_row_bytes + 14 + 15) / 16;
  static constexpr int raw_pitch = 16 * raw_segments;
  static constexpr int raw_tile_bytes = KEYS * raw_pitch;
  static constexpr size_t raw_stage_bytes = size_t{2} * raw_tile_bytes;
  static constexpr int raw_row_lanes = raw_segments <= 4 ? 4 : raw_segments <= 8 ? 8 : 16;  // a lane per segment
  static_assert(raw_segments <= 16 && WAVE % raw_row_lanes == 0, "several rows per warp");
  static constexpr size_t off_k = q16_bytes, off_v = off_k + buffers * k_bytes, off_s = off_v + buffers * v_bytes,
                          off_p = off_s + s_bytes;
  static_assert(!(DOUBLE && PREFETCH), "double buffering replaces the register prefetch");
  static constexpr size_t max2(size_t a, size_t b) { return a > b ? a : b; }
  // The Q staging area follows the f16 Q tile (both live while Q is converted); the output rows
  // reuse everything from offset 0 once the last tile is done. Row factors live past both.
  static constexpr size_t scratch_bytes = max2(s_bytes + p_bytes, STAGED ? 2 * raw_stage_bytes : 0);
  static constexpr size_t off_row = max2(max2(off_s + scratch_bytes, q16_bytes + stage_bytes), stage_bytes);
  static constexpr size_t smem_bytes = off_row + size_t{4} * rows;
  static_assert(mma_head_dim(D), "MMA covers D = 128 and 256");
  static_assert(KEYS % 16 == 0 && KEYS % (WAVE / 16) == 0, "keys per tile");
  static_assert(WAVE % 16 == 0 && (lanes_per_row & (lanes_per_row - 1)) == 0, "softmax lanes per row");
  static_assert(off_k % 16 == 0 && off_v % 16 == 0 && off_s % 16 == 0 && off_p % 16 == 0 && off_row % 16 == 0,
                "16-byte aligned regions");
  static_assert(ldq % 8 == 0 && ldk % 8 == 0 && ldv % 8 == 0 && ldp % 8 == 0, "fragment rows 16-byte aligned");
};

template <int D, platform::arch_family F>
using mma_config_for = mma_config<D, mma_table(F, D).warps, mma_table(F, D).keys, family_wave(F),
                                  mma_table(F, D).resident, mma_table(F, D).prefetch, mma_table(F, D).batch,
                                  mma_table(F, D).staged, mma_table(F, D).double_buffer, mma_table(F, D).v_rows>;

template <platform::arch_family F>
constexpr bool mma_fits_lds() {
  return mma_config_for<128, F>::smem_bytes <= platform::amd_max_lds_bytes &&
         mma_config_for<256, F>::smem_bytes <= platform::amd_max_lds_bytes;
}
static_assert(mma_fits_lds<platform::arch_family::rdna4>() && mma_fits_lds<platform::arch_family::rdna3>() &&
                  mma_fits_lds<platform::arch_family::cdna3>(),
              "an AMD MMA shape needs more than 64 KB of LDS");
static_assert(mma_config_for<256, platform::arch_family::nvidia>::smem_bytes <= platform::nvidia_max_shared_bytes &&
                  mma_config_for<128, platform::arch_family::nvidia>::smem_bytes <= platform::nvidia_max_shared_bytes,
              "an NVIDIA MMA shape needs more than 227 KB of shared memory");

// ---- device helpers ------------------------------------------------------------------------------

// The packed bytes of one 16-value chunk as loaded (turbo3: 16-bit words kept apart until the
// decode, so the loads stay in flight; zero for keys past the tile, which decode to zeros).
template <class L, bool T3 = L::type == data_type::turbo3>
struct mma_raw {
  typename L::raw_chunk c;
};
template <class L>
struct mma_raw<L, true> {
  uint32_t qs_lo, qs_hi, signs, norm;
};

// `row` is a valid row even where !ok (the tile's first key): the loads are unconditional (no
// branch per item, whose regions would each recompute the shared-memory window of a staged row),
// and a turbo3 item past the tile gets norm 0, so it decodes to zeros.
template <class L>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_load_raw(mma_raw<L>& r, const char* row, int c, bool ok) {
  if constexpr (L::type == data_type::turbo3) {
    // Block layout (docs/format.md §1): norm at half-word 0, qs at 1..16, signs at 17..24.
    const uint16_t* b = reinterpret_cast<const uint16_t*>(row + (c >> 3) * block_bytes);
    const int q = c & 7;
    r.qs_lo = b[1 + 2 * q];
    r.qs_hi = b[2 + 2 * q];
    r.signs = b[17 + q];
    const uint32_t norm = b[0];
    r.norm = ok ? norm : 0u;
  } else {
    r.c = ok ? L::load_raw(row, c) : typename L::raw_chunk{};
  }
}

template <class L>
TURBO3_DEVICE TURBO3_FORCEINLINE typename L::raw_chunk mma_chunk(const mma_raw<L>& r) {
  if constexpr (L::type == data_type::turbo3) return {platform::join_halves(r.qs_lo, r.qs_hi), r.signs};
  else return r.c;
}

// One chunk of one key (16 values) as f16 pairs in slot order, turbo3 values times their norm.
template <class L>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_decode_row_chunk(const mma_raw<L>& r, const turbo3_lut& lut, uint32_t (&w)[8]) {
  L::decode_half2(mma_chunk(r), lut, w);
  if constexpr (L::type == data_type::turbo3) {
    const uint32_t n2 = r.norm | (r.norm << 16);
    TURBO3_UNROLL
    for (int i = 0; i < 8; ++i) w[i] = platform::mul_half2_bits(w[i], n2);
  }
}

// One K chunk (16 values of one key) to its f16 row slice `dst` (16-byte aligned), slot order.
template <class L>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_store_k(const mma_raw<L>& r, const turbo3_lut& lut, uint16_t* dst) {
  uint32_t w[8];
  mma_decode_row_chunk<L>(r, lut, w);
  uint4* d = reinterpret_cast<uint4*>(dst);
  d[0] = make_uint4(w[0], w[1], w[2], w[3]);
  d[1] = make_uint4(w[4], w[5], w[6], w[7]);
}

// One V chunk of two keys (key0, key0 + 1; key0 even) into V^T: row c * 16 + slot, word key0 / 2.
template <class L, int LDV>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_store_v(const mma_raw<L>& ra, const mma_raw<L>& rb, const turbo3_lut& lut,
                                                 uint16_t* vt, int c, int key0) {
  uint32_t w[16];
  L::decode_pairs(mma_chunk(ra), mma_chunk(rb), lut, w);
  if constexpr (L::type == data_type::turbo3) {
    const uint32_t n2 = ra.norm | (rb.norm << 16);
    TURBO3_UNROLL
    for (int s = 0; s < 16; ++s) w[s] = platform::mul_half2_bits(w[s], n2);
  }
  uint16_t* base = vt + c * kv::chunk_values * LDV + key0;
  TURBO3_UNROLL
  for (int s = 0; s < 16; ++s) *reinterpret_cast<uint32_t*>(base + s * LDV) = w[s];
}

// A row item: chunk item % chunks of key item / chunks (K, and V where it is stored as rows).
// `in`: the item exists; one that does not, or whose key is past n_valid, loads the tile's first
// key with norm 0 (zeros). row(i): where key i of the tile starts (the cache, or its staged copy).
template <class L, class C, class Row>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_load_row_item(mma_raw<L>& r, Row row, int item, bool in, int n_valid) {
  const int key = item / C::chunks, c = item % C::chunks;
  const bool ok = in && key < n_valid;
  mma_load_raw<L>(r, row(ok ? key : 0), c, ok);
}
// A row item into its row tile [keys][LD] (f16, slot order).
template <class L, class C, int LD>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_store_row_item(const mma_raw<L>& r, const turbo3_lut& lut, uint16_t* tile,
                                                        int item) {
  mma_store_k<L>(r, lut, tile + (item / C::chunks) * LD + (item % C::chunks) * kv::chunk_values);
}

// Packed K and V bytes of one tile held by one thread.
template <class KL, class VL, class C>
struct mma_tile_raw {
  mma_raw<KL> k[C::k_per_thread];
  mma_raw<VL> v[C::v_per_thread][C::v_rows ? 1 : 2];
};

template <class KL, class VL, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_load_tile(mma_tile_raw<KL, VL, C>& t, const prefill_args& a, const char* k_head,
                                                   const char* v_head, int j0, int n_valid, int tid) {
  auto k_row = [&](int i) { return k_head + static_cast<int64_t>(j0 + i) * a.k_nb1; };
  auto v_row = [&](int i) { return v_head + static_cast<int64_t>(j0 + i) * a.v_nb1; };
  TURBO3_UNROLL
  for (int u = 0; u < C::k_per_thread; ++u) {
    const int item = tid + C::threads * u;
    mma_load_row_item<KL, C>(t.k[u], k_row, item, item < C::k_items, n_valid);
  }
  TURBO3_UNROLL
  for (int u = 0; u < C::v_per_thread; ++u) {
    const int item = tid + C::threads * u;
    if constexpr (C::v_rows) {
      mma_load_row_item<VL, C>(t.v[u][0], v_row, item, item < C::v_items, n_valid);
    } else {
      const int pair = item % (C::keys / 2), c = item / (C::keys / 2);
      const bool in = item < C::v_items;
      const int k0 = 2 * pair;
      const bool ok0 = in && k0 < n_valid, ok1 = in && k0 + 1 < n_valid;
      mma_load_raw<VL>(t.v[u][0], v_row(ok0 ? k0 : 0), c, ok0);
      mma_load_raw<VL>(t.v[u][1], v_row(ok1 ? k0 + 1 : 0), c, ok1);
    }
  }
}

template <class KL, class VL, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_store_tile(const mma_tile_raw<KL, VL, C>& t, const turbo3_lut& lut,
                                                    uint16_t* k16, uint16_t* v16, int tid) {
  TURBO3_UNROLL
  for (int u = 0; u < C::k_per_thread; ++u) {
    const int item = tid + C::threads * u;
    if (item < C::k_items) mma_store_row_item<KL, C, C::ldk>(t.k[u], lut, k16, item);
  }
  TURBO3_UNROLL
  for (int u = 0; u < C::v_per_thread; ++u) {
    const int item = tid + C::threads * u;
    if (item < C::v_items) {
      if constexpr (C::v_rows) {
        mma_store_row_item<VL, C, C::ldv>(t.v[u][0], lut, v16, item);
      } else {
        const int pair = item % (C::keys / 2), c = item / (C::keys / 2);
        mma_store_v<VL, C::ldv>(t.v[u][0], t.v[u][1], lut, v16, c, 2 * pair);
      }
    }
  }
}

// Without register prefetch: in rounds of up to C::batch K items and C::batch V items per thread,
// the loads of a round all issued before any is decoded (so they are in flight together), nothing
// kept across rounds (which bounds the registers the D = 256 kernels need next to their
// accumulators).
// k_row(i) / v_row(i): where key i of the tile starts (the cache itself, or the staged copy).
template <class KL, class VL, class C, class KRow, class VRow>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_load_store_tile(const prefill_args& a, const turbo3_lut& lut, KRow k_row,
                                                         VRow v_row, int n_valid, uint16_t* k16, uint16_t* v16,
                                                         int tid) {
  constexpr int kb = C::batch < C::k_per_thread ? C::batch : C::k_per_thread;
  constexpr int vb = C::batch < C::v_per_thread ? C::batch : C::v_per_thread;
  constexpr int k_rounds = (C::k_per_thread + kb - 1) / kb, v_rounds = (C::v_per_thread + vb - 1) / vb;
  constexpr int rounds = k_rounds > v_rounds ? k_rounds : v_rounds;
  TURBO3_UNROLL
  for (int round = 0; round < rounds; ++round) {
    mma_raw<KL> rk[kb];
    mma_raw<VL> rv[vb][C::v_rows ? 1 : 2];
    TURBO3_UNROLL
    for (int b = 0; b < kb; ++b) {
      const int u = round * kb + b, item = tid + C::threads * u;
      mma_load_row_item<KL, C>(rk[b], k_row, item, u < C::k_per_thread && item < C::k_items, n_valid);
    }
    TURBO3_UNROLL
    for (int b = 0; b < vb; ++b) {
      const int u = round * vb + b, item = tid + C::threads * u;
      const bool in = u < C::v_per_thread && item < C::v_items;
      if constexpr (C::v_rows) {
        mma_load_row_item<VL, C>(rv[b][0], v_row, item, in, n_valid);
      } else {
        const int pair = item % (C::keys / 2), c = item / (C::keys / 2);
        const int k0 = 2 * pair;
        const bool ok0 = in && k0 < n_valid, ok1 = in && k0 + 1 < n_valid;
        mma_load_raw<VL>(rv[b][0], v_row(ok0 ? k0 : 0), c, ok0);
        mma_load_raw<VL>(rv[b][1], v_row(ok1 ? k0 + 1 : 0), c, ok1);
      }
    }
    TURBO3_UNROLL
    for (int b = 0; b < kb; ++b) {
      const int u = round * kb + b, item = tid + C::threads * u;
      if (u < C::k_per_thread && item < C::k_items) mma_store_row_item<KL, C, C::ldk>(rk[b], lut, k16, item);
    }
    TURBO3_UNROLL
    for (int b = 0; b < vb; ++b) {
      const int u = round * vb + b, item = tid + C::threads * u;
      if (u < C::v_per_thread && item < C::v_items) {
        if constexpr (C::v_rows)
          mma_store_row_item<VL, C, C::ldv>(rv[b][0], lut, v16, item);
        else
          mma_store_v<VL, C::ldv>(rv[b][0], rv[b][1], lut, v16, item / (C::keys / 2), 2 * (item % (C::keys / 2)));
      }
    }
  }
}

// Asynchronous copy of the raw K and V rows of keys j0 .. j0 + n_valid - 1 into one stage: row r of
// K at stage + r * raw_pitch + (its address & 15) (V after the K tile), in 16-byte segments from the
// aligned segment holding its first byte. The bytes before a row share its aligned segment, so they
// lie in the same allocation (device allocations are at least 16-byte aligned); nothing past the
// view's end is read. A lane per segment, several rows per warp.
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_stage_copy(platform::async_destination stage, const prefill_args& a,
                                                    const char* k_head, const char* v_head, int j0, int n_valid,
                                                    int tid) {
  constexpr int per_pass = C::threads / C::raw_row_lanes;  // rows in flight per pass
  static_assert(!C::staged || (2 * C::keys) % per_pass == 0, "K and V rows fill whole passes");
  const int seg = tid % C::raw_row_lanes, slot = tid / C::raw_row_lanes;
  TURBO3_UNROLL
  for (int pass = 0; pass < 2 * C::keys / per_pass; ++pass) {
    const int row = slot + pass * per_pass;
    // Whole passes of K rows, then of V rows, where the tile allows; else a pass holds both.
    const bool is_v = C::keys % per_pass == 0 ? pass >= C::keys / per_pass : row >= C::keys;
    const int key = is_v ? row - C::keys : row;
    if (key >= n_valid) continue;
    const char* src = is_v ? v_head + static_cast<int64_t>(j0 + key) * a.v_nb1 : k_head + static_cast<int64_t>(j0 + key) * a.k_nb1;
    const int shift = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
    const int left = C::raw_row_bytes + shift - 16 * seg;  // bytes of the row from this segment on
    const char* from = src - shift + 16 * seg;
    const platform::async_destination to = stage + (is_v ? C::raw_tile_bytes : 0) + key * C::raw_pitch + 16 * seg;
    if (seg < C::raw_segments && left > 0) {
      // A whole segment past the row's end reads the next row's bytes; only near the view's end
      // is the last segment cut at the row's end.
      if (from + 16 <= (is_v ? a.v_end : a.k_end)) platform::async_copy<16>(to, from);
      else platform::async_copy_head_of16(to, from, left);
    }
  }
}


// Whether every output row is aligned for one store of 4 consecutive values (8 bytes f16, 16 f32).
TURBO3_DEVICE TURBO3_FORCEINLINE bool output_rows_aligned4(const prefill_args& a) {
  return ((reinterpret_cast<uintptr_t>(a.out) | static_cast<uintptr_t>(a.out_nb1 | a.out_nb2 | a.out_nb3)) &
          (a.out_f16 ? 7 : 15)) == 0;
}

// Dimensions d .. d + 3 of an output row (w[0] .. w[3]): one store where aligned4, else four.
TURBO3_DEVICE TURBO3_FORCEINLINE void store_output4(const prefill_args& a, char* row, int d, const float (&w)[4], bool aligned4) {
  if (aligned4 && a.out_f16) {
    *reinterpret_cast<uint2*>(row + 2 * d) = make_uint2(platform::pack_half2(w[0], w[1]), platform::pack_half2(w[2], w[3]));
  } else if (aligned4) {
    *reinterpret_cast<float4*>(row + 4 * d) = make_float4(w[0], w[1], w[2], w[3]);
  } else {
    TURBO3_UNROLL
    for (int e = 0; e < 4; ++e) store_output(a, row, d + e, w[e]);
  }
}

// The output rows of this warp from its accumulators, normalized and stored straight to the
// caller's out without un-rotation (f16 V, or the caller un-rotates): no shared memory, no barrier.
// A lane holds rows g and g + 8 and slots 2t, 2t + 1, 2t + 8, 2t + 9 of every chunk: f16 V (slot
// order natural) two pairs of contiguous dimensions, turbo3 V (value_of_slot) dimensions 4t .. 4t + 3.
template <int D, class VL, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_store_out_plain_fragments(const prefill_args& a,
                                                                   const platform::frag_acc (&o_acc)[C::n_tiles_d],
                                                                   const float (&factor)[platform::frag_acc_rows],
                                                                   int kv_head, int head_group, int q_tile, int seq,
                                                                   int tid) {
  using platform::frag_acc;
  constexpr int R = platform::frag_acc_rows;
  const int warp = tid / C::wave;
  const bool vec = output_rows_aligned4(a);
  TURBO3_UNROLL
  for (int rr = 0; rr < R; ++rr) {
    const prefill_row row = prefill_row_of(a, warp * 16 + platform::frag_acc_row(2 * rr), kv_head, head_group, q_tile);
    if (row.query < 0) continue;  // padding row
    char* const dst = output_row(a, row.query, row.head, seq);
    TURBO3_UNROLL
    for (int n = 0; n < C::n_tiles_d; ++n) {
      // Row slot rr holds elements 2rr, 2rr + 1 (slots 2t, 2t + 1) and 2rr + 4, 2rr + 5 (slots 2t + 8, 2t + 9).
      const int e[4] = {2 * rr, 2 * rr + 1, 2 * rr + 4, 2 * rr + 5};
      float w[4];
      int d[4];
      TURBO3_UNROLL
      for (int k = 0; k < 4; ++k) {
        w[k] = o_acc[n].x[e[k]] * factor[rr];
        d[k] = n * kv::chunk_values + VL::value_of_slot(platform::frag_acc_col(e[k]));
      }
      if (vec && VL::type == data_type::turbo3) {  // d = 4t + {0, 2, 1, 3}
        store_output4(a, dst, d[0], {w[0], w[2], w[1], w[3]}, true);
      } else if (vec && VL::type == data_type::f16) {  // d = 2t, 2t + 1, 2t + 8, 2t + 9
        if (a.out_f16) {
          *reinterpret_cast<uint32_t*>(dst + 2 * d[0]) = platform::pack_half2(w[0], w[1]);
          *reinterpret_cast<uint32_t*>(dst + 2 * d[2]) = platform::pack_half2(w[2], w[3]);
        } else {
          *reinterpret_cast<float2*>(dst + 4 * d[0]) = make_float2(w[0], w[1]);
          *reinterpret_cast<float2*>(dst + 4 * d[2]) = make_float2(w[2], w[3]);
        }
      } else {
        TURBO3_UNROLL
        for (int k = 0; k < 4; ++k) store_output(a, dst, d[k], w[k]);
      }
    }
  }
}

// Key split (prefill_args::kv_splits > 1): this warp's rows from its accumulators, unnormalized, to
// their partial rows of split `split` (natural dimension order), with each row's running maximum
// and sum (the row's lanes add their shares). Every lane of the warp calls it.
template <int D, class VL, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_store_partial_fragments(const prefill_args& a,
                                                                 const platform::frag_acc (&o_acc)[C::n_tiles_d],
                                                                 const float (&m_lane)[platform::frag_acc_rows],
                                                                 const float (&l_lane)[platform::frag_acc_rows],
                                                                 int warp, int kv_head, int head_group, int q_tile,
                                                                 int seq, int split) {
  constexpr int R = platform::frag_acc_rows;
  const int lane = platform::lane_id();
  TURBO3_UNROLL
  for (int rr = 0; rr < R; ++rr) {
    const float l = platform::frag_row_sum(l_lane[rr]);
    const prefill_row row = prefill_row_of(a, warp * 16 + platform::frag_acc_row(2 * rr), kv_head, head_group, q_tile);
    if (row.query < 0) continue;  // padding row
    float* const dst = prefill_partial_row(a, D, row, seq, split);
    TURBO3_UNROLL
    for (int n = 0; n < C::n_tiles_d; ++n) {
      // Row slot rr holds elements 2rr, 2rr + 1 and 2rr + 4, 2rr + 5 (mma_store_out_plain_fragments).
      const int e[4] = {2 * rr, 2 * rr + 1, 2 * rr + 4, 2 * rr + 5};
      int d[4];
      TURBO3_UNROLL
      for (int k = 0; k < 4; ++k) d[k] = n * kv::chunk_values + VL::value_of_slot(platform::frag_acc_col(e[k]));
      const platform::frag_acc& o = o_acc[n];
      if constexpr (VL::type == data_type::turbo3) {  // d = 4t + {0, 2, 1, 3}
        *reinterpret_cast<float4*>(dst + d[0]) = make_float4(o.x[e[0]], o.x[e[2]], o.x[e[1]], o.x[e[3]]);
      } else {  // d = 2t, 2t + 1, 2t + 8, 2t + 9
        *reinterpret_cast<float2*>(dst + d[0]) = make_float2(o.x[e[0]], o.x[e[1]]);
        *reinterpret_cast<float2*>(dst + d[2]) = make_float2(o.x[e[2]], o.x[e[3]]);
      }
    }
    if (lane % 4 == 0) {
      dst[D] = m_lane[rr];
      dst[D + 1] = l;
    }
  }
}

// ---- Q prologue and output epilogue ----------------------------------------------------------------

// Where Q row r of a work-group starts in the caller's Q (null for a padding row).
TURBO3_DEVICE TURBO3_FORCEINLINE const char* mma_q_row(const prefill_args& a, int r, int kv_head, int head_group,
                                                      int q_tile, int seq) {
  const prefill_row row = prefill_row_of(a, r, kv_head, head_group, q_tile);
  return row.query < 0 ? nullptr : a.q + row.query * a.q_nb1 + row.head * a.q_nb2 + seq * a.q_nb3;
}
// Whether every Q row is 16-byte aligned (mma_load_q_run's vec).
TURBO3_DEVICE TURBO3_FORCEINLINE bool mma_q_rows_aligned16(const prefill_args& a) {
  return ((reinterpret_cast<uintptr_t>(a.q) | static_cast<uintptr_t>(a.q_nb1 | a.q_nb2 | a.q_nb3)) & 15) == 0;
}

// 16 consecutive Q values of a row from dimension d0, times `prescale` (the softmax's q_prescale,
// or that times rotation_scale for rotate_group_registers_prescaled); zeros for a padding row (null).
// vec: every Q row is 16-byte aligned, so the run is read with 16-byte loads.
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_load_q_run(const prefill_args& a, const char* row, int d0, bool vec,
                                                    float prescale, float (&u)[kv::chunk_values]) {
  if (row == nullptr) {
    TURBO3_UNROLL
    for (int e = 0; e < kv::chunk_values; ++e) u[e] = 0.0f;
    return;
  }
  if (a.q_f16) {
    const platform::half* h = reinterpret_cast<const platform::half*>(row) + d0;
    if (vec) {
      const uint4 w[2] = {reinterpret_cast<const uint4*>(h)[0], reinterpret_cast<const uint4*>(h)[1]};
      const uint32_t x[8] = {w[0].x, w[0].y, w[0].z, w[0].w, w[1].x, w[1].y, w[1].z, w[1].w};
      TURBO3_UNROLL
      for (int i = 0; i < 8; ++i) platform::half2_bits_to_float2(x[i], u[2 * i], u[2 * i + 1]);
    } else {
      TURBO3_UNROLL
      for (int e = 0; e < kv::chunk_values; ++e) u[e] = platform::half_to_float(h[e]);
    }
  } else {
    const float* f = reinterpret_cast<const float*>(row) + d0;
    if (vec) {
      TURBO3_UNROLL
      for (int k = 0; k < 4; ++k) {
        const float4 v = reinterpret_cast<const float4*>(f)[k];
        u[4 * k] = v.x, u[4 * k + 1] = v.y, u[4 * k + 2] = v.z, u[4 * k + 3] = v.w;
      }
    } else {
      TURBO3_UNROLL
      for (int e = 0; e < kv::chunk_values; ++e) u[e] = f[e];
    }
  }
  TURBO3_UNROLL
  for (int e = 0; e < kv::chunk_values; ++e) u[e] *= prescale;
}

// ---- the output un-rotation on fragments (where accumulators are A operands: NVIDIA) -------------
// A 128-value group of a warp's 16 rows is 8 fragment tiles of 16 consecutive dimensions (runs r =
// 0..7). The rotation's butterfly stages h = 1..8 stay inside a run: one multiply of each tile by a
// 16x16 Hadamard matrix (entries +-1, exact in f16) on the matrix cores, with its rows and columns
// in the orders the data comes and goes in. Stages h = 16, 32, 64 combine the same element of
// different tiles: additions of whole f16-pair registers (mma_store_out_fragments). Compared with
// un-rotating in shared memory: no shared memory, no barrier, and the 512
// additions and 256 sign flips of stages h = 1..8 per group become 16 multiplies per warp; the
// output is rounded to f16 once more on the way (as P and V, the operands it comes from, are).
// On fragments the un-rotation costs less than passing the rows through shared memory at all; the
// same for Q (loads straight into the A layout) is slower than whole groups per thread, so Q keeps
// those. Stages h = 16..64 run on the f16 A operand with the signs folded into operands (below),
// which halves their cost against float32 stages after the multiply with per-element signs and
// scale (docs/performance.md, MMA).

// B[k][n] = H16[in(k)][out(n)]: run value in(k) enters at K index k, run value out(n) leaves at column n.
template <class In, class Out>
TURBO3_DEVICE TURBO3_FORCEINLINE platform::frag_b hadamard16_b(In in, Out out) {
  uint16_t h[8];
  TURBO3_UNROLL
  for (int e = 0; e < 8; ++e) {
    uint32_t x = static_cast<uint32_t>(in(platform::frag_b_k(e)) & out(platform::frag_b_n(e)));
    x ^= x >> 2;
    x ^= x >> 1;
    h[e] = (x & 1u) ? 0xBC00u : 0x3C00u;  // -1 or +1: H16[i][j] = (-1)^popcount(i & j)
  }
  platform::frag_b b;
  platform::frag_b_from_halves(b, h);
  return b;
}

// Bit v of sign word `word` (a run-time v: one shift and one mask).
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t sign_bit(uint32_t word, int v) { return (word >> v) & 1u; }

// The output rows of this warp from its accumulators (o_acc: 16 rows x D in V's slot order),
// normalized by the lane's row factors, un-rotated on fragments and stored straight to the
// caller's out: a lane holds dimensions 4t .. 4t + 3 of every run for rows g and g + 8 (16 or 8
// contiguous bytes, 64 or 32 per row and store).
// The un-rotation is s1 * H128 * s2 * scale with H128 = H8 (x) H16 over (run, value): each run tile
// is normalized and scaled (factor * rotation_scale, before the f16 rounding, so that the f16
// operands never hold unnormalized sums), rounded to f16 as the A operand, its input signs (table
// s2) flipped on the f16 pairs, then stages h = 16, 32, 64 run on the f16 pairs of whole A
// registers (runs r and r + h hold the same rows and columns), and the multiply by H16, whose
// columns carry each run's output signs (table s1), leaves the final values in the accumulator: per
// 128-value group 4 words of sign flips, 12 of additions per run, 16 multiplies; no per-element
// sign or scale after the multiply. The butterflies round to f16 three times more than the float32
// stages after the multiply did.
template <int D, class VL, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_store_out_fragments(const prefill_args& a,
                                                             platform::frag_acc (&o_acc)[C::n_tiles_d],
                                                             const float (&factor)[platform::frag_acc_rows],
                                                             int kv_head, int head_group, int q_tile, int seq,
                                                             int tid) {
  using platform::frag_a;
  using platform::frag_acc;
  using platform::frag_b;
  constexpr int R = platform::frag_acc_rows;
  const int lane = platform::lane_id(), warp = tid / C::wave, t = lane % 4, g = lane / 4;
  const bool vec = output_rows_aligned4(a);
  char* rows[R];
  TURBO3_UNROLL
  for (int rr = 0; rr < R; ++rr) {
    const prefill_row row = prefill_row_of(a, warp * 16 + platform::frag_acc_row(2 * rr), kv_head, head_group, q_tile);
    rows[rr] = row.query < 0 ? nullptr : output_row(a, row.query, row.head, seq);
  }
  // Column n of a run tile leaves as run value out_value(n): lane t's columns 2t, 2t + 1, 2t + 8,
  // 2t + 9 are values 4t .. 4t + 3.
  auto out_value = [](int n) { return 4 * ((n & 7) >> 1) + 2 * (n >> 3) + (n & 1); };
  const frag_b hb = hadamard16_b([](int k) { return VL::value_of_slot(k); }, out_value);
  float scaled[R];
  TURBO3_UNROLL
  for (int rr = 0; rr < R; ++rr) scaled[rr] = factor[rr] * rotation_scale;
  // A registers 0, 1 of a run hold slots 2t, 2t + 1 (low, high half), registers 2, 3 slots 2t + 8,
  // 2t + 9; B registers 0, 1 hold column g, registers 2, 3 column g + 8.
  const int in_lo0 = VL::value_of_slot(2 * t), in_lo1 = VL::value_of_slot(2 * t + 1);
  const int in_hi0 = VL::value_of_slot(2 * t + 8), in_hi1 = VL::value_of_slot(2 * t + 9);
  const int out_lo = out_value(g), out_hi = out_value(g + 8);
  TURBO3_UNROLL
  for (int grp = 0; grp < D / block_values; ++grp) {
    frag_a x[rotation_runs];
    TURBO3_UNROLL
    for (int r = 0; r < rotation_runs; ++r) {
      frag_acc& o = o_acc[grp * rotation_runs + r];
      TURBO3_UNROLL
      for (int i = 0; i < frag_acc::elements; ++i) o.x[i] *= scaled[platform::frag_acc_row_slot(i)];
      platform::frag_a_from_acc(x[r], o);
      const uint32_t s2 = rotation_s2_word(r / 2);
      const int at = rotation_run_values * (r % 2);  // run r's bits in its word
      const uint32_t flip_lo = sign_bit(s2, at + in_lo0) << 15 | sign_bit(s2, at + in_lo1) << 31;
      const uint32_t flip_hi = sign_bit(s2, at + in_hi0) << 15 | sign_bit(s2, at + in_hi1) << 31;
      platform::frag_flip_signs(x[r], flip_lo, flip_hi);
    }
    TURBO3_UNROLL
    for (int h = 1; h < rotation_runs; h *= 2)
      TURBO3_UNROLL
      for (int r = 0; r < rotation_runs; ++r)
        if ((r & h) == 0) platform::frag_a_butterfly(x[r], x[r + h]);
    TURBO3_UNROLL
    for (int r = 0; r < rotation_runs; ++r) {
      const uint32_t s1 = rotation_s1_word(r / 2);
      const int at = rotation_run_values * (r % 2);
      const uint32_t flip_lo = sign_bit(s1, at + out_lo) * 0x80008000u, flip_hi = sign_bit(s1, at + out_hi) * 0x80008000u;
      frag_b b = hb;
      platform::frag_flip_signs(b, flip_lo, flip_hi);
      frag_acc y;
      platform::frag_zero(y);
      platform::frag_mma(y, x[r], b);
      const int d = grp * block_values + r * rotation_run_values + 4 * t;
      TURBO3_UNROLL
      for (int rr = 0; rr < R; ++rr) {
        char* row = rows[rr];
        if (row == nullptr) continue;  // padding row
        // Row slot rr holds elements 2rr, 2rr + 1 (values +0, +1) and 2rr + 4, 2rr + 5 (+2, +3).
        store_output4(a, row, d, {y.x[2 * rr], y.x[2 * rr + 1], y.x[2 * rr + 4], y.x[2 * rr + 5]}, vec);
      }
    }
  }
}

// 16 values of a row from dimension d0 (float32, natural order) as f16 pairs in K's slot order.
template <class KL, class Q16At>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_store_q16(Q16At q16_at, int r, int d0, const float* u) {
  uint32_t w[kv::chunk_values / 2];
  TURBO3_UNROLL
  for (int i = 0; i < kv::chunk_values / 2; ++i)
    w[i] = platform::pack_half2(u[KL::value_of_slot(2 * i)], u[KL::value_of_slot(2 * i + 1)]);
  *reinterpret_cast<uint4*>(q16_at(r, d0)) = make_uint4(w[0], w[1], w[2], w[3]);
  *reinterpret_cast<uint4*>(q16_at(r, d0 + 8)) = make_uint4(w[4], w[5], w[6], w[7]);
}

// The first step of mma_load_q on NVIDIA, by threads tid of n_threads: every run of Q, prescaled,
// to q16 (no rotation, or q_stage null) or to the float32 staging rows (rotation: times
// rotation_scale too, which mma_rotate_q_groups / mma_rotate_q16_pairs_in_place then leave out).
template <int D, class KL, class C, class Q16At>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_load_q_runs(const prefill_args& a, Q16At q16_at, float* q_stage, int kv_head,
                                                     int head_group, int q_tile, int seq, int tid, int n_threads) {
  const bool vec = mma_q_rows_aligned16(a);
  const float prescale = a.rotate_q ? a.q_prescale * rotation_scale : a.q_prescale;
  for (int item = tid; item < C::rows * C::chunks; item += n_threads) {
    const int r = item / C::chunks, d0 = (item % C::chunks) * kv::chunk_values;
    float u[kv::chunk_values];
    mma_load_q_run(a, mma_q_row(a, r, kv_head, head_group, q_tile, seq), d0, vec, prescale, u);
    if (a.rotate_q && q_stage) store_consecutive(q_stage + r * C::ldo + d0, u);
    else mma_store_q16<KL>(q16_at, r, d0, u);
  }
}

// Q's groups, each read by load(r, d, u) (prescaled, the scale included), rotated in registers by
// threads tid of n_threads (a whole 128-value group per thread) and written to q16.
template <int D, class KL, class C, class Q16At, class Load>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_rotate_q_groups_to_q16(Q16At q16_at, int tid, int n_threads, Load load) {
  rotate_whole_groups<false, D / block_values, true>(
      C::rows, tid, n_threads, load, [&](int r, int d, const float(&u)[block_values]) {
        TURBO3_UNROLL
        for (int k = 0; k < rotation_runs; ++k)
          mma_store_q16<KL>(q16_at, r, d + k * kv::chunk_values, u + k * kv::chunk_values);
      });
}

// The second step with the rotation, by threads tid of n_threads once the staging rows are
// complete: from the staging rows to q16.
template <int D, class KL, class C, class Q16At>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_rotate_q_groups(Q16At q16_at, const float* q_stage, int tid, int n_threads) {
  mma_rotate_q_groups_to_q16<D, KL, C>(q16_at, tid, n_threads, [&](int r, int d, float(&u)[block_values]) {
    load_consecutive(q_stage + r * C::ldo + d, u);
  });
}

// A 128-value group of q16 as 64 words of f16 pairs: word w holds slots 2 (w % 8) and 2 (w % 8) + 1
// of chunk w / 8. Which values of the group its halves hold, and where a value lies.
template <class KL>
struct q16_group_words {
  static constexpr int words = block_values / 2;
  static constexpr int value(int w, int half) {
    return kv::chunk_values * (w / 8) + KL::value_of_slot(2 * (w % 8) + half);
  }
  static constexpr int word_of(int v) {
    for (int w = 0; w < words; ++w)
      if (value(w, 0) == v || value(w, 1) == v) return w;
    return -1;
  }
  // Butterfly stage h pairs word w either with itself (its halves differ in bit h) or, where its
  // first half has bit h clear, with the word whose halves are its own halves' partners, half for
  // half: then the stage is one add and one subtract of whole words.
  static constexpr bool inner(int w, int h) { return value(w, 1) == (value(w, 0) ^ h); }
  static constexpr bool stages_pair_words() {
    for (int h = 1; h < block_values; h *= 2)
      for (int w = 0; w < words; ++w) {
        if (inner(w, h)) continue;
        const int p = word_of(value(w, 0) ^ h);
        if (value(p, 0) != (value(w, 0) ^ h) || value(p, 1) != (value(w, 1) ^ h)) return false;
      }
    return true;
  }
  // The sign bits of word w for table s1 (S1) or s2.
  template <bool S1>
  static constexpr uint32_t sign_bits(int w) {
    const auto negative = [](int v) { return S1 ? rotation_s1_negative(v) : rotation_s2_negative(v); };
    return (negative(value(w, 0)) ? 0x8000u : 0u) | (negative(value(w, 1)) ? 0x80000000u : 0u);
  }
};

// The second step without staging rows, once every run is in q16: each group rotated in place,
// one whole group per thread, in f16 pair arithmetic: its 64 words stay f16 pairs from their load
// to their store, each butterfly stage one add or subtract per word (against float32 values: half
// the instructions and no conversions), the signs one xor per word. Q is rounded to f16 after every
// stage (seven more roundings: worst MMA NMSE on the test grid about 7e-7, against 4e-7 in
// float32, well inside the 1e-5 limit). Q's runs are prescaled with rotation_scale in them
// (mma_load_q_runs). Needs no shared memory besides q16, so the warpgroup kernel's producers can
// fill the first K/V tiles meanwhile. Faster than the float32 form at every size
// (docs/performance.md, MMA).
template <int D, class KL, class C, class Q16At>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_rotate_q16_pairs_in_place(Q16At q16_at, int tid, int n_threads) {
  using W = q16_group_words<KL>;
  static_assert(W::stages_pair_words(), "every butterfly stage pairs whole words or the halves of one");
  constexpr int G = D / block_values;
  for (int i = tid; i < C::rows * G; i += n_threads) {
    const int r = i % C::rows, d = (i / C::rows) * block_values;
    uint32_t w[W::words];
    TURBO3_UNROLL
    for (int k = 0; k < rotation_runs; ++k) {
      const uint4 lo = *reinterpret_cast<const uint4*>(q16_at(r, d + k * kv::chunk_values));
      const uint4 hi = *reinterpret_cast<const uint4*>(q16_at(r, d + k * kv::chunk_values + 8));
      const uint32_t x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      TURBO3_UNROLL
      for (int j = 0; j < 8; ++j) w[8 * k + j] = x[j] ^ W::template sign_bits<true>(8 * k + j);
    }
    TURBO3_UNROLL
    for (int h = 1; h < block_values; h *= 2)
      TURBO3_UNROLL
      for (int a = 0; a < W::words; ++a) {
        if (W::inner(a, h)) {
          // (x, y) -> (x + y, x - y) with x the half whose value has bit h clear: x times (1, -1)
          // (or (-1, 1) where x is the high half) plus the swapped word.
          const uint32_t ones = (W::value(a, 0) & h) ? 0x3c00bc00u : 0xbc003c00u;
          w[a] = platform::fma_half2_bits(w[a], ones, platform::permute_bytes<2, 3, 0, 1>(w[a], w[a]));
        } else if ((W::value(a, 0) & h) == 0) {
          const int b = W::word_of(W::value(a, 0) ^ h);
          const uint32_t x = w[a], y = w[b];
          w[a] = platform::add_half2_bits(x, y);
          w[b] = platform::sub_half2_bits(x, y);
        }
      }
    TURBO3_UNROLL
    for (int k = 0; k < rotation_runs; ++k) {
      uint32_t x[8];
      TURBO3_UNROLL
      for (int j = 0; j < 8; ++j) x[j] = w[8 * k + j] ^ W::template sign_bits<false>(8 * k + j);
      *reinterpret_cast<uint4*>(q16_at(r, d + k * kv::chunk_values)) = make_uint4(x[0], x[1], x[2], x[3]);
      *reinterpret_cast<uint4*>(q16_at(r, d + k * kv::chunk_values + 8)) = make_uint4(x[4], x[5], x[6], x[7]);
    }
  }
}

// Q as f16 in K's slot order (q16_at(r, d): where value d of row r goes), prescaled and, when asked,
// rotated. Items are runs of 16 consecutive values of a row, in row order, so a warp reads
// contiguous stretches of whole rows (2 KB at D = 256 with float32 Q). Without the rotation each
// thread converts its runs straight into q16. With it the runs go to the float32 staging rows first; then, on NVIDIA, each thread
// rotates a whole 128-value group in registers (rotate_whole_groups) and writes it to q16; on AMD
// (whole_group_rotation_fits) the first pass of the two-pass rotation runs on the runs as they
// arrive and the second writes f16 straight into q16. The caller synchronizes before reading q16.
// The two passes cost each work-group more than twice what whole groups do (docs/performance.md,
// MMA).
// q16_at(r, d): where the f16 value in slot position d of row r goes (pieces of 8 slots from a
// multiple of 8 are contiguous and 16-byte aligned).
template <int D, class KL, class C, class Q16At>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_load_q(const prefill_args& a, Q16At q16_at, float* q_stage, int kv_head,
                                                int head_group, int q_tile, int seq, int tid) {
  if (!a.rotate_q || whole_group_rotation_fits) {
    mma_load_q_runs<D, KL, C>(a, q16_at, q_stage, kv_head, head_group, q_tile, seq, tid, C::threads);
    if (!a.rotate_q) return;
    platform::sync_threads();
    mma_rotate_q_groups<D, KL, C>(q16_at, q_stage, tid, C::threads);
    return;
  }
  const bool vec = mma_q_rows_aligned16(a);
  constexpr int G = D / block_values;
  static_assert(C::rows % 8 == 0, "the rotation takes rows in octets");
  rotate_runs<false, G>(
      C::rows, false, tid, C::threads,
      [&](int r, int d, float(&u)[rotation_run_values]) {
        mma_load_q_run(a, mma_q_row(a, r, kv_head, head_group, q_tile, seq), d, vec, a.q_prescale, u);
      },
      [&](int r, int d, const float(&u)[rotation_run_values]) { store_consecutive(q_stage + r * C::ldo + d, u); });
  platform::sync_threads();
  rotate_columns<false, G>(
      C::rows, true, tid, C::threads,
      [&](int r, int d, float(&u)[rotation_column_values]) { load_column(q_stage + r * C::ldo + d, u); },
      [&](int r, int d, const float(&u)[rotation_column_values]) {
        // Value c + 16k of the group (c = d % 16) is element c of its chunk k: slot KL::slot(c).
        const int d_slot = (d - d % rotation_columns) + KL::slot(d % rotation_columns);
        TURBO3_UNROLL
        for (int k = 0; k < rotation_column_values; ++k)
          *q16_at(r, d_slot + kv::chunk_values * k) = platform::float_to_half_bits(u[k]);
      });
}

// Output rows from out_s [rows][ldo] (float32, normalized, natural order) to the caller's out,
// un-rotated when asked (on AMD; NVIDIA un-rotates on fragments: mma_store_out_fragments): the
// rotation's second pass stores its columns straight to global memory (whole_group_rotation_fits).
template <int D, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_store_out(const prefill_args& a, float* out_s, int kv_head, int head_group,
                                                   int q_tile, int seq, int tid) {
  if (!a.unrotate_out) {
    prefill_store_out<D, C::rows, C::threads>(a, out_s, C::ldo, kv_head, head_group, q_tile, seq, tid);
    return;
  }
  constexpr int G = D / block_values;
  rotate_runs_shared<true, G>(out_s, C::rows, C::ldo, tid, C::threads);
  rotate_columns<true, G>(
      C::rows, true, tid, C::threads,
      [&](int r, int d, float(&u)[rotation_column_values]) { load_column(out_s + r * C::ldo + d, u); },
      [&](int r, int d, const float(&u)[rotation_column_values]) {
        const prefill_row row = prefill_row_of(a, r, kv_head, head_group, q_tile);
        if (row.query < 0) return;  // padding row
        char* dst = output_row(a, row.query, row.head, seq);
        TURBO3_UNROLL
        for (int k = 0; k < rotation_column_values; ++k) store_output(a, dst, d + rotation_columns * k, u[k]);
      });
}

// ---- the online softmax on score fragments (where accumulators are A operands: NVIDIA) -----------

// The softmax state of one of the rows a lane's fragments hold.
struct mma_lane_row {
  int end;                     // keys [0, end) may be visible
  const platform::half* mask;  // the row's mask row (a padding row: the mask's first row, never used)
  float slope;                 // ALiBi slope times log2 e
};

// The rows of this lane's fragments in warp `warp`'s 16 rows, and their running maxima and sums.
// row_window_end(row, r): the keys row r (prefill_row row) may see.
template <class RowWindowEnd>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_init_lane_rows(const prefill_args& a, int warp, int kv_head, int head_group,
                                                        int q_tile, int seq, RowWindowEnd row_window_end,
                                                        mma_lane_row (&rows)[platform::frag_acc_rows],
                                                        float (&m_lane)[platform::frag_acc_rows],
                                                        float (&l_lane)[platform::frag_acc_rows]) {
  TURBO3_UNROLL
  for (int rr = 0; rr < platform::frag_acc_rows; ++rr) {
    const int r = warp * 16 + platform::frag_acc_row(2 * rr);
    const prefill_row lr = prefill_row_of(a, r, kv_head, head_group, q_tile);
    rows[rr] = {0, reinterpret_cast<const platform::half*>(a.mask), 0.0f};
    if (lr.query >= 0) {
      rows[rr].end = row_window_end(lr, r);
      if (a.mask) {
        rows[rr].mask = mask_row_of(a, lr, seq);
        rows[rr].slope = platform::exp2_fast(alibi_slope_log2(a.max_bias, lr.head, a.n_head)) * log2e;
      }
    }
    m_lane[rr] = -INFINITY;
    l_lane[rr] = 0.0f;
  }
}

// One tile's mask values for this lane's score fragments, read before the tile's scores are: the
// loads then run beside the barrier wait and the multiplies instead of after them. As f16 pairs of
// adjacent keys of a row (the two columns of a fragment element pair): pair p of fragment n holds
// keys j0 + 16 n + frag_acc_col(2 p) and the next, of row slot frag_acc_row_slot(2 p).
template <int NK>
struct mma_mask_pairs {
  uint32_t h2[NK][4];
};

// Whether every mask row starts 4-byte aligned (so a pair of adjacent even-indexed keys is one
// 4-byte load).
TURBO3_DEVICE TURBO3_FORCEINLINE bool mma_mask_rows_paired(const prefill_args& a) {
  return ((reinterpret_cast<uintptr_t>(a.mask) | static_cast<uint64_t>(a.mask_nb1) | static_cast<uint64_t>(a.mask_nb2) |
           static_cast<uint64_t>(a.mask_nb3)) & 3u) == 0;
}

// Pairs of the tile at key j0, all of whose keys are below n_kv (padding rows read the mask's first
// row, which the window hides).
template <int NK>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_load_mask_pairs(const mma_lane_row (&lane_rows)[platform::frag_acc_rows], int j0,
                                                         mma_mask_pairs<NK>& m) {
  TURBO3_UNROLL
  for (int n = 0; n < NK; ++n)
    TURBO3_UNROLL
    for (int p = 0; p < 4; ++p)
      m.h2[n][p] = *reinterpret_cast<const uint32_t*>(lane_rows[platform::frag_acc_row_slot(2 * p)].mask + j0 + 16 * n +
                                                      platform::frag_acc_col(2 * p));
}

// A running maximum (base 2) stays while a tile's scores exceed it by at most this much
// (mma_fragment_softmax with LAZY): probabilities up to 2^8, well inside f16, and O is rescaled
// only when a row's maximum jumps by more.
inline constexpr float lazy_rescale_log2 = 8.0f;

// The online softmax of one tile's scores s_acc (16 rows x 16 NK keys from key j0) on the
// fragments: softcap, window and mask, the new running maxima, P (as A operands of P V) and the
// lane's share of the running sums; rows whose maximum moved rescale O (o_acc).
// LAZY: scores are tested against the window only in tiles that some row of the warp does not
// see whole, and a row keeps its running maximum while the tile stays within lazy_rescale_log2 of
// it (the output is the same: the sums and O share the maximum they were taken with).
// Everything but the rescale of O: returns whether some row of the warp must rescale O by its
// alpha (warp-uniform).
template <bool LAZY, int NK>
TURBO3_DEVICE TURBO3_FORCEINLINE bool mma_fragment_probabilities(const prefill_args& a, platform::frag_acc (&s_acc)[NK],
                                                                const mma_lane_row (&lane_rows)[platform::frag_acc_rows],
                                                                float (&m_lane)[platform::frag_acc_rows],
                                                                float (&l_lane)[platform::frag_acc_rows],
                                                                platform::frag_a (&pa)[NK], int j0,
                                                                float (&alpha)[platform::frag_acc_rows],
                                                                const mma_mask_pairs<NK>& mask_pairs = {},
                                                                bool mask_prefetched = false) {
  using platform::frag_acc;
  constexpr int R = platform::frag_acc_rows;
  const int last_key = a.n_kv - 1;
  float mx[R];
  TURBO3_UNROLL
  for (int rr = 0; rr < R; ++rr) mx[rr] = -INFINITY;
  // Softcap, window and mask per score, in branch-free variants chosen once per tile (warp-
  // uniform): with or without the softcap; with the mask (whose loads are unconditional: padding
  // rows read the mask's first row and keys past n_kv its last column, and the window hides both),
  // else with the window, or with nothing where every row of the warp sees every key of the tile
  // (then no score is -inf, and the probabilities need no test either).
  bool windowed = true;
  if constexpr (LAZY) {
    windowed = false;
    TURBO3_UNROLL
    for (int rr = 0; rr < R; ++rr) windowed = windowed || j0 + 16 * NK > lane_rows[rr].end;
    windowed = platform::any_in_warp(windowed);
  }
  auto scores = [&](auto masked, auto capped, auto window) {
    TURBO3_UNROLL
    for (int n = 0; n < NK; ++n)
      TURBO3_UNROLL
      for (int i = 0; i < frag_acc::elements; ++i) {
        const int rr = platform::frag_acc_row_slot(i);
        const int j = j0 + n * 16 + platform::frag_acc_col(i);
        float v = s_acc[n].x[i];
        if constexpr (decltype(capped)::value) v = a.softcap_post * platform::tanh_fast(v);
        if constexpr (decltype(masked)::value || decltype(window)::value) {
          bool visible = j < lane_rows[rr].end;
          if constexpr (decltype(masked)::value) {
            float mv;
            if constexpr (decltype(masked)::value == 2) {
              const uint32_t h2 = mask_pairs.h2[n][i / 2];
              mv = platform::half_bits_to_float(static_cast<uint16_t>(i % 2 ? h2 >> 16 : h2));
            } else {
              mv = platform::half_to_float(lane_rows[rr].mask[min(j, last_key)]);
            }
            visible = visible && mv != -INFINITY;
            v += lane_rows[rr].slope * mv;
          }
          v = visible ? v : -INFINITY;
        }
        s_acc[n].x[i] = v;
        mx[rr] = fmaxf(mx[rr], v);
      }
  };
  using yes = std::true_type;
  using no = std::false_type;
  using paired = std::integral_constant<int, 2>;
  if (a.mask && mask_prefetched) {
    if (a.softcap_post != 0.0f) scores(paired{}, yes{}, yes{});
    else scores(paired{}, no{}, yes{});
  } else if (a.mask) {
    if (a.softcap_post != 0.0f) scores(yes{}, yes{}, yes{});
    else scores(yes{}, no{}, yes{});
  } else if (a.softcap_post != 0.0f) {
    if (!LAZY || windowed) scores(no{}, yes{}, yes{});
    else scores(no{}, yes{}, no{});
  } else if (!LAZY || windowed) {
    scores(no{}, no{}, yes{});
  } else {
    scores(no{}, no{}, no{});
  }
  TURBO3_UNROLL
  for (int rr = 0; rr < R; ++rr) {
    float m_new = fmaxf(m_lane[rr], platform::frag_row_max(mx[rr]));
    if constexpr (LAZY) m_new = m_new <= m_lane[rr] + lazy_rescale_log2 ? m_lane[rr] : m_new;
    alpha[rr] = m_new == -INFINITY ? 1.0f : platform::exp2_fast(m_lane[rr] - m_new);
    m_lane[rr] = m_new;
    l_lane[rr] *= alpha[rr];
  }
  auto probabilities = [&](auto finite) {
    TURBO3_UNROLL
    for (int n = 0; n < NK; ++n) {
      TURBO3_UNROLL
      for (int i = 0; i < frag_acc::elements; ++i) {
        const int rr = platform::frag_acc_row_slot(i);
        const float v = s_acc[n].x[i];
        const float p = (decltype(finite)::value || v != -INFINITY) ? platform::exp2_fast(v - m_lane[rr]) : 0.0f;
        s_acc[n].x[i] = p;
        l_lane[rr] += p;  // this lane's share; the lanes of a row add theirs in the epilogue
      }
      platform::frag_a_from_acc(pa[n], s_acc[n]);
    }
  };
  if (!LAZY || a.mask || windowed) probabilities(no{});
  else probabilities(yes{});
  bool rescale = false;  // rare once the maxima settle: skip the pass over O when no row's moved
  TURBO3_UNROLL
  for (int rr = 0; rr < R; ++rr) rescale = rescale || alpha[rr] != 1.0f;
  return platform::any_in_warp(rescale);
}

template <int ND>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_rescale_rows(platform::frag_acc (&o_acc)[ND],
                                                      const float (&alpha)[platform::frag_acc_rows]) {
  TURBO3_UNROLL
  for (int n = 0; n < ND; ++n)
    TURBO3_UNROLL
    for (int i = 0; i < platform::frag_acc::elements; ++i) o_acc[n].x[i] *= alpha[platform::frag_acc_row_slot(i)];
}

template <bool LAZY, int NK, int ND>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_fragment_softmax(const prefill_args& a, platform::frag_acc (&s_acc)[NK],
                                                          const mma_lane_row (&lane_rows)[platform::frag_acc_rows],
                                                          float (&m_lane)[platform::frag_acc_rows],
                                                          float (&l_lane)[platform::frag_acc_rows],
                                                          platform::frag_a (&pa)[NK], platform::frag_acc (&o_acc)[ND],
                                                          int j0, const mma_mask_pairs<NK>& mask_pairs = {},
                                                          bool mask_prefetched = false) {
  float alpha[platform::frag_acc_rows];
  if (mma_fragment_probabilities<LAZY>(a, s_acc, lane_rows, m_lane, l_lane, pa, j0, alpha, mask_pairs, mask_prefetched))
    mma_rescale_rows(o_acc, alpha);
}

// ---- the steps of a key tile (one warp's 16 rows) ------------------------------------------------

// The B operand of P V for dimensions 16 n.. and keys 16 ks.. of a V tile (key rows or V^T).
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_load_v(platform::frag_b& vb, const uint16_t* v_tile, int n, int ks) {
  if constexpr (C::v_rows) platform::frag_load_b_rows(vb, v_tile + ks * 16 * C::ldv + n * 16, C::ldv);
  else platform::frag_load_b(vb, v_tile + n * 16 * C::ldv + ks * 16, C::ldv);
}

// Scores of the warp's 16 rows (Q at q_w) against the tile's keys: S = Q K^T.
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_tile_scores(platform::frag_acc (&s_acc)[C::n_tiles_k], const uint16_t* q_w,
                                                     const uint16_t* k_tile) {
  TURBO3_UNROLL
  for (int n = 0; n < C::n_tiles_k; ++n) platform::frag_zero(s_acc[n]);
#pragma unroll 2
  for (int ks = 0; ks < C::n_tiles_d; ++ks) {
    platform::frag_a qa;
    platform::frag_load_a(qa, q_w + ks * 16, C::ldq);
    TURBO3_UNROLL
    for (int n = 0; n < C::n_tiles_k; ++n) {
      platform::frag_b kb;
      platform::frag_load_b(kb, k_tile + n * 16 * C::ldk + ks * 16, C::ldk);
      platform::frag_mma(s_acc[n], qa, kb);
    }
  }
}

// O += P V with P in registers (the A operands the fragment softmax left).
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_accumulate_values(platform::frag_acc (&o_acc)[C::n_tiles_d],
                                                           const platform::frag_a (&pa)[C::n_tiles_k],
                                                           const uint16_t* v_tile) {
  TURBO3_UNROLL
  for (int n = 0; n < C::n_tiles_d; ++n)
    TURBO3_UNROLL
    for (int ks = 0; ks < C::n_tiles_k; ++ks) {
      platform::frag_b vb;
      mma_load_v<C>(vb, v_tile, n, ks);
      platform::frag_mma(o_acc[n], pa[ks], vb);
    }
}

// ---- the online softmax in the warp's scratch (where accumulators are not A operands: AMD) -------

// One row's online softmax (base 2), kept alike by the lanes_per_row lanes of a warp that serve the
// row: a lane takes keys first_key, first_key + lanes_per_row, ... of every tile. Every kernel
// takes key_end from it (the keys a warp may see); the rest serves the scratch softmax.
struct mma_softmax_row {
  int row;                     // the row in its warp's 16 rows
  int first_key;
  int group_row;               // the row in the work-group's rows
  prefill_row info;            // the row's query and head (query < 0: a padding row)
  int key_end;                 // keys [0, key_end) may be visible to the row
  const platform::half* mask;  // the row's mask row, null without a mask
  float slope;                 // the mask's ALiBi slope, times log2 e
  float running_max, running_sum;
};

// The softmax row that lane `lane` of warp `warp` serves. row_window_end(row, r): the keys row r
// (prefill_row row) may see.
template <class C, class RowWindowEnd>
TURBO3_DEVICE TURBO3_FORCEINLINE mma_softmax_row mma_softmax_row_of(const prefill_args& a, int warp, int lane,
                                                                    int kv_head, int head_group, int q_tile, int seq,
                                                                    RowWindowEnd row_window_end) {
  mma_softmax_row r;
  r.row = lane / C::lanes_per_row;
  r.first_key = lane % C::lanes_per_row;
  r.group_row = warp * 16 + r.row;
  r.info = prefill_row_of(a, r.group_row, kv_head, head_group, q_tile);
  r.key_end = 0;
  r.mask = nullptr;
  r.slope = 0.0f;
  if (r.info.query >= 0) {
    r.key_end = row_window_end(r.info, r.group_row);
    if (a.mask) {
      r.mask = mask_row_of(a, r.info, seq);
      r.slope = platform::exp2_fast(alibi_slope_log2(a.max_bias, r.info.head, a.n_head)) * log2e;
    }
  }
  r.running_max = -INFINITY;
  r.running_sum = 0.0f;
  return r;
}

// A warp's share of the shared memory the scratch softmax runs through. The steps take it by value:
// through a reference, the D = 256 kernels spill VGPRs on RDNA.
struct mma_scratch {
  float* scores;            // [16][lds]: the warp's scores
  uint16_t* probabilities;  // [16][ldp]: the warp's f16 probabilities
  float* row_factors;       // [rows]: the work-group's rescale factors of O
  int warp;
};

// The online softmax of one tile's scores s_acc (the warp's 16 rows x keys from key j0) through the
// warp's scratch: S goes to the score rows, each row's lanes run softcap, window and mask and write
// P as f16, and the row's rescale factor of O goes to row_factors.
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_scratch_softmax(mma_softmax_row& r, const prefill_args& a,
                                                          const platform::frag_acc (&s_acc)[C::n_tiles_k],
                                                          mma_scratch scratch, int j0) {
  using platform::frag_acc;
  TURBO3_UNROLL
  for (int n = 0; n < C::n_tiles_k; ++n)
    TURBO3_UNROLL
    for (int i = 0; i < frag_acc::elements; ++i)
      scratch.scores[platform::frag_acc_row(i) * C::lds + n * 16 + platform::frag_acc_col(i)] = s_acc[n].x[i];
  platform::sync_warp();
  // Two passes over the lane's own scores in the scratch (no register array: the output
  // accumulators keep the registers): first softcap, window, mask and the maximum, written back;
  // then the probabilities.
  float* const s_row = scratch.scores + r.row * C::lds;
  // The mask from a per-tile base: the keys' offsets fold into the loads (per-key pointers hoisted
  // out of the loop would hold 2 registers each across it).
  const platform::half* const mask_tile = r.mask ? r.mask + j0 + r.first_key : nullptr;
  float tile_max = -INFINITY;
  TURBO3_UNROLL
  for (int k = 0; k < C::keys_per_lane; ++k) {
    const int jj = r.first_key + k * C::lanes_per_row, j = j0 + jj;
    float v = s_row[jj];
    if (a.softcap_post != 0.0f) v = a.softcap_post * platform::tanh_fast(v);
    bool visible = j < r.key_end;
    if (visible && mask_tile) {
      const float mv = platform::half_to_float(mask_tile[k * C::lanes_per_row]);
      if (mv == -INFINITY) visible = false;
      else v += r.slope * mv;
    }
    v = visible ? v : -INFINITY;
    s_row[jj] = v;
    tile_max = fmaxf(tile_max, v);
  }
  tile_max = prefill_group_max(tile_max, C::lanes_per_row);
  const float m_new = fmaxf(r.running_max, tile_max);
  const float alpha = m_new == -INFINITY ? 1.0f : platform::exp2_fast(r.running_max - m_new);
  float sum = 0.0f;
  TURBO3_UNROLL
  for (int k = 0; k < C::keys_per_lane; ++k) {
    const int jj = r.first_key + k * C::lanes_per_row;
    const float v = s_row[jj];
    const float p = v == -INFINITY ? 0.0f : platform::exp2_fast(v - m_new);
    scratch.probabilities[r.row * C::ldp + jj] = platform::float_to_half_bits(p);
    sum += p;
  }
  sum = prefill_group_sum(sum, C::lanes_per_row);
  r.running_sum = r.running_sum * alpha + sum;
  r.running_max = m_new;
  if (r.first_key == 0) scratch.row_factors[r.group_row] = alpha;
  platform::sync_warp();
}

// O = O * alpha + P V with alpha from the row factors and P from the warp's scratch.
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_scratch_accumulate_values(platform::frag_acc (&o_acc)[C::n_tiles_d],
                                                                    mma_scratch scratch, const uint16_t* v_tile) {
  using platform::frag_acc;
  float alpha[frag_acc::elements];
  TURBO3_UNROLL
  for (int i = 0; i < frag_acc::elements; ++i)
    alpha[i] = scratch.row_factors[scratch.warp * 16 + platform::frag_acc_row(i)];
  TURBO3_UNROLL
  for (int n = 0; n < C::n_tiles_d; ++n)
    TURBO3_UNROLL
    for (int i = 0; i < frag_acc::elements; ++i) o_acc[n].x[i] *= alpha[i];
  // P fragments loaded once (keys / 16 of them), then every 16-dimension slice of O.
  platform::frag_a pa[C::n_tiles_k];
  TURBO3_UNROLL
  for (int ks = 0; ks < C::n_tiles_k; ++ks) platform::frag_load_a(pa[ks], scratch.probabilities + ks * 16, C::ldp);
  TURBO3_UNROLL
  for (int n = 0; n < C::n_tiles_d; ++n) {
    TURBO3_UNROLL
    for (int ks = 0; ks < C::n_tiles_k; ++ks) {
      platform::frag_b vb;
      mma_load_v<C>(vb, v_tile, n, ks);
      platform::frag_mma(o_acc[n], pa[ks], vb);
    }
    platform::schedule_barrier();  // AMD: one slice's loads at a time (else they all hoist and spill)
  }
}

// ---- the K/V tiles of a work-group ----------------------------------------------------------------

// How the work-group's key tiles [begin, end) reach the f16 K/V buffers, and the barriers around
// each: staged turbo3 tiles (mma_stage_copy: the raw bytes of the tiles ahead are in flight while
// the current one is decoded and multiplied, so the decode reads shared memory, not the cache; any
// row alignment works, each row sitting (its address & 15) bytes into its slot), the next tile's
// bytes prefetched into registers, or each tile loaded and decoded from the cache when it opens.
// Double buffered, warps fill the next tile's buffer around their multiplies of the current one.
template <class KL, class VL, class C>
struct mma_kv_tiles {
  static constexpr bool staged = C::staged && KL::type == data_type::turbo3 && VL::type == data_type::turbo3;
  static_assert(!staged || platform::frag_acc_is_a, "the stages live in the score scratch");
  const prefill_args& a;
  const turbo3_lut& lut;
  const char* k_head;
  const char* v_head;
  int kv_end, begin, end;
  const int& tid;          // the kernel's (as a copy, gfx942 spills two SGPRs at D = 256)
  uint16_t* k16;           // [buffers][keys][ldk]
  uint16_t* v16;           // [buffers] V [keys][ldv] or V^T [D][ldv]
  unsigned char* stages;   // staged: two stages of raw K and V rows, in the score scratch
  // Where a row of the tile starting at key j0 begins in its stage slot (mma_stage_copy): the low
  // four bits of its address in the cache.
  uint32_t k_low, v_low, k_step, v_step;
  bool fill_late;  // double buffered: this warp fills the next buffer after its multiplies

  // Warp `warp`'s view of the key tiles `tiles` in the buffers at k16 and v16 (staged: through the
  // stages).
  TURBO3_DEVICE TURBO3_FORCEINLINE mma_kv_tiles(const prefill_args& a, const turbo3_lut& lut, const char* k_head,
                                                const char* v_head, int kv_end, key_tile_range tiles, uint16_t* k16,
                                                uint16_t* v16, unsigned char* stages, int warp, const int& tid)
      : a(a),
        lut(lut),
        k_head(k_head),
        v_head(v_head),
        kv_end(kv_end),
        begin(tiles.begin),
        end(tiles.end),
        tid(tid),
        k16(k16),
        v16(v16),
        stages(stages),
        k_low(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(k_head))),
        v_low(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(v_head))),
        k_step(static_cast<uint32_t>(a.k_nb1)),
        v_step(static_cast<uint32_t>(a.v_nb1)),
        fill_late(C::double_buffer && warp >= C::warps / 2) {}  // warps w and w + warps / 2 share a scheduler

  // Buffer b of the K and V tiles (one buffer without double buffering).
  TURBO3_DEVICE TURBO3_FORCEINLINE uint16_t* k_tile(int b) const { return k16 + b * (C::keys * C::ldk); }
  TURBO3_DEVICE TURBO3_FORCEINLINE uint16_t* v_tile(int b) const { return v16 + b * (C::v_bytes / 2); }

  // The raw rows of tile t into its stage: one commit group per tile, empty past the last.
  TURBO3_DEVICE TURBO3_FORCEINLINE void issue_stage(int t) const {
    if (t < end)
      mma_stage_copy<C>(platform::async_destination_of(stages + (t % 2) * C::raw_stage_bytes), a, k_head, v_head,
                        t * C::keys, min(C::keys, kv_end - t * C::keys), tid);
    platform::async_commit();
  }

  // Tile t into buffer b: decoded from its stage, or loaded (and decoded) from the cache.
  TURBO3_DEVICE TURBO3_FORCEINLINE void fill(int t, int b) const {
    const int j0 = t * C::keys;
    const int n_valid = min(C::keys, kv_end - j0);
    if (staged) {
      const char* const st = reinterpret_cast<const char*>(stages + (t % 2) * C::raw_stage_bytes);
      const uint32_t k0 = k_low + static_cast<uint32_t>(j0) * k_step, v0 = v_low + static_cast<uint32_t>(j0) * v_step;
      mma_load_store_tile<KL, VL, C>(
          a, lut, [&](int i) { return st + i * C::raw_pitch + ((k0 + static_cast<uint32_t>(i) * k_step) & 15u); },
          [&](int i) { return st + C::raw_tile_bytes + i * C::raw_pitch + ((v0 + static_cast<uint32_t>(i) * v_step) & 15u); },
          n_valid, k_tile(b), v_tile(b), tid);
    } else {
      mma_load_store_tile<KL, VL, C>(
          a, lut, [&](int i) { return k_head + static_cast<int64_t>(j0 + i) * a.k_nb1; },
          [&](int i) { return v_head + static_cast<int64_t>(j0 + i) * a.v_nb1; }, n_valid, k_tile(b), v_tile(b), tid);
    }
  }

  // Before the first tile. Double buffered: tile `begin` into its buffer; staged: its stage and the
  // next in flight (double buffered: and the one after, once the first stage is decoded); register
  // prefetch: the first tile's bytes in flight.
  TURBO3_DEVICE TURBO3_FORCEINLINE void start(mma_tile_raw<KL, VL, C>& raw) const {
    if constexpr (C::double_buffer) {
      if (staged) {
        issue_stage(begin);
        issue_stage(begin + 1);
        platform::async_wait<1>();
      }
      platform::sync_threads();
      if (begin < end) fill(begin, begin & 1);
      if (staged) platform::async_wait<0>();
      platform::sync_threads();
      if (staged) issue_stage(begin + 2);
    } else if (staged) {
      issue_stage(begin);
      issue_stage(begin + 1);
    } else if constexpr (C::prefetch) {
      if (begin < end)
        mma_load_tile<KL, VL, C>(raw, a, k_head, v_head, begin * C::keys, min(C::keys, kv_end - begin * C::keys), tid);
    }
  }

  // Makes tile t readable by every warp; returns its buffer.
  TURBO3_DEVICE TURBO3_FORCEINLINE int open(int t, mma_tile_raw<KL, VL, C>& raw) const {
    if constexpr (C::double_buffer) {
      const int buf = t & 1;
      // The buffer every warp finished with last tile. Half the warps fill it before their
      // multiplies, half after (fill_late), so each scheduler has a warp unpacking beside one
      // multiplying instead of all warps unpacking at once after the barrier.
      if (!fill_late && t + 1 < end) fill(t + 1, buf ^ 1);
      return buf;
    } else if (staged) {
      platform::async_wait<1>();  // this thread's copies of tile t are done (t + 1 may be in flight)
      platform::sync_threads();   // everyone's; and every warp is done with tile t - 1
      fill(t, 0);
      platform::sync_threads();  // the tile is decoded and its stage free
      issue_stage(t + 2);
    } else {
      if constexpr (C::prefetch) {
        const int j0 = t * C::keys;
        mma_store_tile<KL, VL, C>(raw, lut, k16, v16, tid);
        if (t + 1 < end)
          mma_load_tile<KL, VL, C>(raw, a, k_head, v_head, j0 + C::keys, min(C::keys, kv_end - j0 - C::keys), tid);
      } else {
        fill(t, 0);
      }
      platform::sync_threads();
    }
    return 0;
  }

  // After this warp's multiplies of tile t (in buffer buf). The K/V tiles and the warps' scratch
  // are rewritten by the next tile (staged: after the barrier that opens it). Double buffered: the
  // next tile's buffer is complete and this one free after this barrier, and so is the stage of
  // the tile just decoded, which takes the tile after next.
  TURBO3_DEVICE TURBO3_FORCEINLINE void close(int t) const {
    if constexpr (C::double_buffer) {
      if (staged) platform::async_wait<0>();  // tile t + 2, issued a tile ago
      platform::sync_threads();
      if (staged) issue_stage(t + 3);
    } else if (!staged) {
      platform::sync_threads();
    }
  }
};

// ---- the epilogue --------------------------------------------------------------------------------

// Where accumulators are A operands: the final factor (sink, normalization) of each row of this
// lane's fragments in warp `warp`.
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_lane_factors(const prefill_args& a,
                                                       const float (&m_lane)[platform::frag_acc_rows],
                                                       const float (&l_lane)[platform::frag_acc_rows], int warp,
                                                       int kv_head, int head_group, int q_tile,
                                                       float (&lane_factor)[platform::frag_acc_rows]) {
  TURBO3_UNROLL
  for (int rr = 0; rr < platform::frag_acc_rows; ++rr) {
    const prefill_row lr = prefill_row_of(a, warp * 16 + platform::frag_acc_row(2 * rr), kv_head, head_group, q_tile);
    lane_factor[rr] = prefill_row_factor(a, lr, m_lane[rr], platform::frag_row_sum(l_lane[rr]));
  }
}

// Where they are not: the rows go through out_s [rows][ldo] (float32, natural dimension order),
// each times its final factor (with a key split: unnormalized, the row's maximum and sum beside its
// partial row), and are stored from there, un-rotated when asked.
template <int D, class VL, class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void mma_store_out_through_shared(const prefill_args& a, const mma_softmax_row& r,
                                                                   const platform::frag_acc (&o_acc)[C::n_tiles_d],
                                                                   float* out_s, float* row_factors, int warp,
                                                                   int kv_head, int head_group, int q_tile, int seq,
                                                                   int split, int tid) {
  using platform::frag_acc;
  if (a.kv_splits > 1) {
    if (r.first_key == 0) {
      row_factors[r.group_row] = 1.0f;
      if (r.info.query >= 0) {
        float* const tail = prefill_partial_row(a, D, r.info, seq, split) + D;
        tail[0] = r.running_max;
        tail[1] = r.running_sum;
      }
    }
  } else {
    if (r.first_key == 0) row_factors[r.group_row] = prefill_row_factor(a, r.info, r.running_max, r.running_sum);
  }
  platform::sync_threads();  // also: every warp is past its last read of the tiles out_s overlaps
  float f[frag_acc::elements];
  int rows[frag_acc::elements];
  TURBO3_UNROLL
  for (int i = 0; i < frag_acc::elements; ++i) {
    rows[i] = warp * 16 + platform::frag_acc_row(i);
    f[i] = row_factors[rows[i]];
  }
  TURBO3_UNROLL
  for (int n = 0; n < C::n_tiles_d; ++n)
    TURBO3_UNROLL
    for (int i = 0; i < frag_acc::elements; ++i) {
      const int p = n * 16 + platform::frag_acc_col(i);  // V column (V^T row): chunk p / 16, slot p % 16
      const int d = (p & ~15) + VL::value_of_slot(p & 15);
      out_s[rows[i] * C::ldo + d] = o_acc[n].x[i] * f[i];
    }
  platform::sync_threads();
  if (a.kv_splits > 1)
    prefill_store_partial_rows<D, C::rows, C::threads>(a, out_s, C::ldo, kv_head, head_group, q_tile, seq, split, tid);
  else mma_store_out<D, C>(a, out_s, kv_head, head_group, q_tile, seq, tid);
}

// ---- the kernel ----------------------------------------------------------------------------------

template <int D, class KL, class VL, class C>
TURBO3_DEVICE void mma_body(const prefill_args& a) {
  using platform::frag_acc;
  extern __shared__ float4 mma_smem4[];
  unsigned char* const smem = reinterpret_cast<unsigned char*>(mma_smem4);
  uint16_t* const q16 = reinterpret_cast<uint16_t*>(smem);                // [rows][ldq] f16, K slot order
  uint16_t* const k16 = reinterpret_cast<uint16_t*>(smem + C::off_k);     // [keys][ldk] f16, slot order
  uint16_t* const v16 = reinterpret_cast<uint16_t*>(smem + C::off_v);    // V [keys][ldv] or V^T [D][ldv], slot order
  float* const s_all = reinterpret_cast<float*>(smem + C::off_s);         // [warps][16][lds] scores
  uint16_t* const p_all = reinterpret_cast<uint16_t*>(smem + C::off_p);   // [warps][16][ldp] f16 probabilities
  float* const q_stage = reinterpret_cast<float*>(smem + C::q16_bytes);   // [rows][ldo] float32 Q (prologue)
  float* const out_s = reinterpret_cast<float*>(smem);                    // [rows][ldo] float32 O (epilogue)
  float* const row_s = reinterpret_cast<float*>(smem + C::off_row);       // [rows] rescale / final factors

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / C::wave, lane = tid % C::wave;
  const prefill_block blk = prefill_block_of(a);
  const turbo3_lut lut = lut_for<KL, VL>(a.lut);
  const prefill_work_group work = prefill_work_group_of(a, blk);
  const int q_tile = work.q_tile, kv_head = work.kv_head, head_group = work.head_group, seq = work.seq;
  int kv_end = work.kv_end;  // with a mask, its largest visible end (below)

  // ---- Q: prescaled, rotated when asked, to f16 in K's slot order --------------------------------
  mma_load_q<D, KL, C>(a, [&](int r, int d) { return q16 + r * C::ldq + d; }, q_stage, kv_head, head_group, q_tile, seq,
                       tid);
  platform::sync_threads();  // the staging area is reused by the K/V tiles

  // ---- keys the mask hides from every row of a tile are never loaded (mask_row_visible_end) ------
  auto window_end = [&](const prefill_row& row) { return prefill_window_end(a, row, kv_end); };
  int* const mask_end_s = reinterpret_cast<int*>(row_s);  // [rows], free until the first tile
  if (a.mask) kv_end = mask_visible_ends<C::rows, C::threads>(a, kv_head, head_group, q_tile, seq, tid, mask_end_s, window_end);
  auto row_window_end = [&](const prefill_row& row, int r) {
    return prefill_row_window_end(a, row, r, kv_end, mask_end_s);
  };

  // ---- softmax state: per row in the scratch; per fragment row where accumulators are A operands --
  mma_softmax_row softmax = mma_softmax_row_of<C>(a, warp, lane, kv_head, head_group, q_tile, seq, row_window_end);
  const int warp_end = warp_max_int(softmax.key_end);  // keys any row of this warp may see
  // Where accumulators are A operands the softmax runs on the score fragments: a lane keeps the state
  // of the R rows its fragments hold (running maximum; its share of the running sum).
  constexpr int R = platform::frag_acc_rows;
  mma_lane_row lane_rows[R];
  float m_lane[R], l_lane[R];
  mma_init_lane_rows(a, warp, kv_head, head_group, q_tile, seq, row_window_end, lane_rows, m_lane, l_lane);

  const mma_scratch scratch{s_all + warp * 16 * C::lds, p_all + warp * 16 * C::ldp, row_s, warp};
  const uint16_t* const q_w = q16 + warp * 16 * C::ldq;
  frag_acc o_acc[C::n_tiles_d];
  TURBO3_UNROLL
  for (int n = 0; n < C::n_tiles_d; ++n) platform::frag_zero(o_acc[n]);

  // ---- the key tiles: this work-group's (all of them, or its split's run) --------------------------
  const key_tile_range tiles = prefill_key_tiles(a, kv_end, C::keys, work.split);
  mma_kv_tiles<KL, VL, C> kv(a, lut, work.k_head, work.v_head, kv_end, tiles, k16, v16, smem + C::off_s, warp, tid);
  [[maybe_unused]] mma_tile_raw<KL, VL, C> raw;  // register prefetch (as a member of kv, the code changes)
  kv.start(raw);
  for (int t = tiles.begin; t < tiles.end; ++t) {
    const int j0 = t * C::keys;
    const int buf = kv.open(t, raw);
    // Before the branch: inside it, the compiler computes the buffer's offset again.
    const uint16_t* const k_tile = kv.k_tile(buf);
    const uint16_t* const v_tile = kv.v_tile(buf);
    if (j0 < warp_end) {  // warp-uniform: some row of this warp sees a key of this tile
      frag_acc s_acc[C::n_tiles_k];
      mma_tile_scores<C>(s_acc, q_w, k_tile);
      if constexpr (platform::frag_acc_is_a) {
        // P becomes the A operand of P V in registers.
        platform::frag_a pa[C::n_tiles_k];
        mma_fragment_softmax<false>(a, s_acc, lane_rows, m_lane, l_lane, pa, o_acc, j0);
        mma_accumulate_values<C>(o_acc, pa, v_tile);
      } else {
        mma_scratch_softmax<C>(softmax, a, s_acc, scratch, j0);
        mma_scratch_accumulate_values<C>(o_acc, scratch, v_tile);
      }
    }
    // The late half of the warps fills the next buffer (open: the early half). Here, not in close,
    // where the compiler branches on the two tests separately.
    if constexpr (C::double_buffer) {
      if (kv.fill_late && t + 1 < kv.end) kv.fill(t + 1, buf ^ 1);
    }
    kv.close(t);
  }
  platform::async_wait<0>();  // nothing may land in shared memory the epilogue reuses

  // ---- epilogue: sink, normalization, natural order, un-rotation, store ---------------------------
  if constexpr (platform::frag_acc_is_a) {
    // Each warp stores its own rows: no shared memory, no barrier. The stores stay in the body:
    // behind one more function, the Q load's registers come out in another order.
    if (a.kv_splits > 1) {
      mma_store_partial_fragments<D, VL, C>(a, o_acc, m_lane, l_lane, warp, kv_head, head_group, q_tile, seq,
                                            work.split);
      return;
    }
    float lane_factor[R];
    mma_lane_factors(a, m_lane, l_lane, warp, kv_head, head_group, q_tile, lane_factor);
    if (a.unrotate_out) mma_store_out_fragments<D, VL, C>(a, o_acc, lane_factor, kv_head, head_group, q_tile, seq, tid);
    else mma_store_out_plain_fragments<D, VL, C>(a, o_acc, lane_factor, kv_head, head_group, q_tile, seq, tid);
  } else {
    mma_store_out_through_shared<D, VL, C>(a, softmax, o_acc, out_s, row_s, warp, kv_head, head_group, q_tile, seq,
                                           work.split, tid);
  }
}

// Instantiated for every family's configuration in every device pass; only the configuration of
// the architecture being compiled (matching wave size, a fragment back-end) has a body.
template <int D, class KL, class VL, class C>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS_RESIDENT(C::threads, C::resident) mma_kernel(prefill_args a) {
  static_assert(C::head_dim == D, "config for another head dim");
  static_assert(KL::type != data_type::turbo3 || D % block_values == 0, "turbo3 K needs D % 128 == 0");
  static_assert(VL::type != data_type::turbo3 || D % block_values == 0, "turbo3 V needs D % 128 == 0");
  if constexpr (platform::has_fragment_mma && C::wave == platform::warp_size) {
    mma_body<D, KL, VL, C>(a);
  } else {
#if TURBO3_DEVICE_PASS
    platform::trap();  // never launched: the host picks the configuration of the device's family
#endif
  }
}

// ---- host side: support, dispatch ------------------------------------------------------------------

// Whether the MMA kernel takes these (validated) params: D_k == D_v in {128, 256}, f16 K/V rows
// 16-byte aligned, grid dimensions within the hardware limits.
inline status mma_supported(const attention_params& p) {
  if (!has_tile_loader(p.k.type) || !has_tile_loader(p.v.type)) return status::unsupported;
  const int64_t d = p.head_dim_k();
  if (d != p.head_dim_v() || !mma_head_dim(static_cast<int>(d))) return status::unsupported;
  if (p.k.type == data_type::f16 && !rows_aligned16(p.k)) return status::unsupported;
  if (p.v.type == data_type::f16 && !rows_aligned16(p.v)) return status::unsupported;
  if (p.n_seq() > 65535 || p.n_head() > 65535 || !prefill_grid_fits(p)) return status::unsupported;
  return status::ok;
}

template <int D, class KL, class VL, class C>
status launch_mma_config(const prefill_args& a, int device, hipStream_t stream) {
  return launch_prefill_grid<&mma_kernel<D, KL, VL, C>>(a, C::threads, C::smem_bytes, device, stream);
}

template <int D, class KL, class VL>
status launch_mma_family(const prefill_args& a, platform::arch_family f, int device, hipStream_t stream) {
#if defined(TURBO3_PLATFORM_CUDA)
  (void)f;
  return launch_mma_config<D, KL, VL, mma_config_for<D, platform::arch_family::nvidia>>(a, device, stream);
#else
  switch (f) {
    case platform::arch_family::cdna3:
      return launch_mma_config<D, KL, VL, mma_config_for<D, platform::arch_family::cdna3>>(a, device, stream);
    case platform::arch_family::rdna3:
      return launch_mma_config<D, KL, VL, mma_config_for<D, platform::arch_family::rdna3>>(a, device, stream);
    default:
      return launch_mma_config<D, KL, VL, mma_config_for<D, platform::arch_family::rdna4>>(a, device, stream);
  }
#endif
}

inline int mma_rows(platform::arch_family f, int d) { return 16 * mma_table(f, d).warps; }

// Launches MMA for validated, mma_supported params on `device` (the stream's), its keys split
// kv_splits ways (partial: the partial rows' workspace, prefill_partial_bytes) and then merged.
// k_was / v_was as for make_prefill_args.
inline status launch_mma(const attention_params& p, data_type k_was, data_type v_was, int kv_splits, float* partial,
                         int device, hipStream_t stream) {
  const platform::arch_family f = platform::device_family(device);
  const int d = static_cast<int>(p.head_dim_k());
  prefill_args a = make_prefill_args(p, mma_rows(f, d), k_was, v_was);
  a.kv_splits = kv_splits;
  a.partial = partial;
  using T3 = kv::turbo3_loader;
  using F16 = kv::f16_loader;
  const bool kt = p.k.type == data_type::turbo3, vt = p.v.type == data_type::turbo3;
  status s = status::unsupported;
  switch (d) {
    case 128:
      if (kt && vt) s = launch_mma_family<128, T3, T3>(a, f, device, stream);
      else if (kt) s = launch_mma_family<128, T3, F16>(a, f, device, stream);
      else if (vt) s = launch_mma_family<128, F16, T3>(a, f, device, stream);
      else s = launch_mma_family<128, F16, F16>(a, f, device, stream);
      break;
    case 256:
      if (kt && vt) s = launch_mma_family<256, T3, T3>(a, f, device, stream);
      else if (kt) s = launch_mma_family<256, T3, F16>(a, f, device, stream);
      else if (vt) s = launch_mma_family<256, F16, T3>(a, f, device, stream);
      else s = launch_mma_family<256, F16, F16>(a, f, device, stream);
      break;
    default:
      break;
  }
  if (s != status::ok || kv_splits <= 1) return s;
  return launch_prefill_merge(a, d, stream);
}

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
