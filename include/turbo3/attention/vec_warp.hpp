// VEC for turbo K and V on matrix instructions, with warps that own their keys end to end.
//
// The block-synchronous VEC kernels stall on their loads: every tile passes three work-group
// barriers, so no warp runs ahead and the loads of one tile never overlap the math of another.
// Here each warp takes chunks of 16-key groups of its row set (the first fixed, the rest claimed
// from a counter that every work-group of the row set shares, so the work ends evenly) and does
// everything for a group alone: it stages the group's raw K and V bytes into its own shared-memory
// ring with asynchronous copies (stages - 1 groups ahead), computes the 16 x 8 score fragment
// (keys x query rows) with m16n8k16 multiply-adds on fp16 levels produced by byte permutes (in
// the deep-context form, m16n8k32 ones on the levels and Q as 14-bit integers), runs
// the online softmax in registers, and accumulates O (rows x dims) with a second set of
// multiply-adds. Warps synchronize with each other only at the start (Q) and at the end, where
// their partial results merge into the split's one partial row per query row; the work-group that
// stores the last split of its rows merges the splits into the output (merge_splits_if_last). The window and
// mask cost one comparison (and, masked, one load) per score, with no branch.
//
// Fragment layouts follow platform/mma.hpp (lane g = l / 4, t = l % 4). Scores: lane (g, t) holds
// keys g and g + 8 and, per 128-value block b, chunks 8b+t and 8b+t+4, whose slots map to the
// fragment's K index (a free permutation of a dot product, shared by the Q fragment). Values: a
// key's chunk decoded row-major (fp16 pairs of adjacent slots, as for K) is the A operand of
// O'^T = A B, where A[m][2j + e] = V[key j][pair m][e] and B[2j + e][(r, e')] = p[r][j] * norm
// when e = e' (0 otherwise), so that O'^T[m][(r, e')] = O[r][pair m][e']: the 8 columns hold 4
// query rows, a column block per 4 rows (COL_BLOCKS). Lane (g, t) decodes chunk g of every block for
// keys 2t, 2t + 1, 2t + 8, 2t + 9 (value_key); m-tile (b, kk) rows g and g + 8 are pairs kk and
// kk + 4 of chunk g of block b. Transposing V instead (pairs across two keys, as the values' K
// index runs along keys) takes a fifth more byte permutes and twice the accumulators, and is
// slower at every depth (docs/performance.md, decode).
// Up to 8 query rows (heads of a GQA group x queries), or 16 in the wide form (two score fragments
// of 8 rows sharing each unpacked key, four value column blocks: a verify batch of 8 queries over
// GQA 2 in one pass over the keys); D = 128, 256 or 512. K and V are each read
// through the "side" of their storage type (vec_warp_sides.hpp; the pairs: vec_warp_types): the
// staged row layout, the fragments' slot order and the decode come from the side, the rest is
// common.
#pragma once

#include <type_traits>

#include "turbo3/attention/vec.hpp"
#include "turbo3/attention/vec_warp_sides.hpp"
#include "turbo3/platform/async_copy.hpp"
#include "turbo3/platform/fragment.hpp"
#include "turbo3/platform/mma.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace detail {

inline constexpr int vec_warp_rows = 8;  // the score fragment's N
// Rows of a work-group with COL_BLOCKS value column blocks of 4 rows: one score fragment up to 2
// column blocks, two (the wide form) with 4.
TURBO3_HD constexpr int vec_warp_rows_of(int col_blocks) { return col_blocks > 2 ? 2 * vec_warp_rows : vec_warp_rows; }
// The wide form (4 value column blocks, 16 rows) takes 8 warps, one work-group per SM (226 / 246
// registers at D = 128 / 256 without a mask): half the splits of two 4-warp work-groups, and twice
// the warps for the last work-group's split merge, so a quarter of its round trips (2 / 4 at D =
// 128 / 256 over 8 KV heads, against 8 / 16), which the merge pays with the rest of the GPU idle
// (docs/performance.md, decode).
inline constexpr int vec_warp_wide_warps = 8;
// Work-groups per multiprocessor the kernel is compiled for (the split planner asks the runtime how
// many fit: launch.hpp, vec_resident_blocks): a cap for more (4: 128 registers) makes the compiler
// reload the lookup tables and shorten its independent chains, which is slower
// (docs/performance.md, decode). 198-220 / 224-247 registers at D = 256 with 1 / 2 value column
// blocks (2 fit), 166-168 with 6 warps (2 fit).
inline constexpr int vec_warp_min_blocks = 2;
// At D = 128, up to 8 rows, every pair is compiled for 3 (at most 168 registers, 149-165 with no
// spills): compiled for 2 a turbo4 side takes 173-188 (its decode's sign and magnitude lookups), a
// q8_0 K side up to 173, masked turbo3 with two column blocks 176, and 3 no longer fit. 16 rows in 4
// warps (where a device refuses the 8-warp form's shared memory) spill 350-490 bytes at 168
// registers: 2. The wide form's 8 warps (vec_warp_wide_warps) fill a multiprocessor's registers
// alone: 1.
template <int D, int WARPS, class KS, class VS, int COL_BLOCKS>
inline constexpr int vec_warp_min_blocks_of =
    WARPS == vec_warp_wide_warps ? 1
    : D == 128 && COL_BLOCKS <= 2 ? 3
                                  : vec_warp_min_blocks;
// Keys per unit of a split (one 16-key group per warp): finer than vec_tile, so short contexts
// still spread over a full wave of work-groups. The split count sets how many work-groups share a
// row set; which keys each takes is decided at run time (warp_key_chunks), in chunks of two 16-key
// groups, and in single groups for the last vec_warp_tail_groups groups per warp of the row set:
// the warps' loop ends then spread over about one group instead of two.
TURBO3_HD constexpr int vec_warp_split_keys(int warps) { return 16 * warps; }
inline constexpr int vec_warp_tail_groups = 2;
// How far (log2 units) a score may exceed its row's running maximum before the maximum moves and O
// is rescaled: the softmax weights p stay at most 2^4 = 16. The value multiplies take p times each
// key's V norm (or scale) in fp16, which holds the product for norms up to 65504 / 16: a group
// with a V norm above 2048 (vec_warp_slack_norm_bits, fp16 bits, half that bound so that a p
// rounded past 16 stays finite; NaN and negative bits compare above) takes the exact update,
// p <= 1, and no product overflows (docs/format.md, section 7).
inline constexpr float vec_warp_max_slack = 4.0f;
inline constexpr uint32_t vec_warp_slack_norm_bits = 0x6800u;  // 2048
// Warps per work-group: 4; 8 in the wide form (vec_warp_wide_warps); 6 at D = 256 with one value
// column block, at least vec_warp_deep_keys keys and turbo3 or turbo2 sides (vec_warp_i8_type: a
// turbo4 K has no integer scores, and a turbo4 V's decode spills at 168 registers): two
// work-groups per SM at 168 registers, 3 warps per scheduler instead of 2, without the early V
// decode. 6 warps pay off only in long contexts: a warp's last chunk takes longer at 3 per
// scheduler, and short contexts leave warps idle (docs/performance.md, decode).
inline constexpr int vec_warp_deep_warps = 6;
inline constexpr int64_t vec_warp_deep_keys = 65536;
TURBO3_HD constexpr bool vec_warp_deep_types(data_type k, data_type v) {
  return vec_warp_i8_type(k) && vec_warp_i8_type(v);
}
TURBO3_HD constexpr int vec_warp_warps(int d, int col_blocks, int64_t n_kv, data_type k_type = data_type::turbo3,
                                       data_type v_type = data_type::turbo3) {
  return col_blocks > 2 ? vec_warp_wide_warps
         : d == 256 && col_blocks == 1 && n_kv >= vec_warp_deep_keys && vec_warp_deep_types(k_type, v_type)
             ? vec_warp_deep_warps
             : 4;
}

TURBO3_HD constexpr bool vec_warp_head_dim(int d) { return d == 128 || d == 256 || d == 512; }
// K and V head dims of the V-in-K form (vec_warp_config::v_in_k): MLA's cache (params.hpp).
TURBO3_HD constexpr bool vec_warp_v_in_k_dims(int dk, int dv) { return dk == mla_head_dim_k && dv == mla_head_dim_v; }

// The K/V type pairs the kernel reads: turbo3, turbo2 or turbo4 on both sides, one type or turbo3
// with another, and q8_0 K with turbo3 V (q8_0 is a K side only: q8_0_warp_side). Other pairs take
// the scalar kernel: turbo2 with turbo4 and q8_0 K with turbo2 or turbo4 V would be two more
// kernels per shape to compile for pairs no engine writes.
TURBO3_HD constexpr bool vec_warp_types(data_type k, data_type v) {
  if (k == data_type::q8_0 || v == data_type::q8_0) return k == data_type::q8_0 && v == data_type::turbo3;
  return vec_warp_side_type(k) && vec_warp_side_type(v) && (k == v || k == data_type::turbo3 || v == data_type::turbo3);
}

// The wide (16-row) form at D = 128 and 256: one type on both sides (turbo3, turbo2, turbo4), and
// q8_0 K with turbo3 V, at D = 256 without a mask only (masked, its 8-warp kernel spills 52 bytes
// at 255 registers; unmasked it takes 255 with no spills).
// nvcc 13.0, sm_90a, registers at D = 128 / 256 without / with a mask: turbo3 226-234 / 246-254,
// turbo2 216-225 / 241-248, turbo4 234-239 / 249-255, q8_0-K 239-240 / 255 (unmasked).
// Mixed turbo pairs take their rows in work-groups of 8 (two more kernels per pair and shape).
TURBO3_HD constexpr bool vec_warp_wide(int d, data_type k, data_type v, bool masked) {
  const bool one_turbo = k == v && (k == data_type::turbo3 || k == data_type::turbo2 || k == data_type::turbo4);
  const bool q8_0_keys = k == data_type::q8_0 && v == data_type::turbo3;
  return (d == 128 || d == 256) && (one_turbo || (q8_0_keys && (d == 128 || !masked)));
}
// Value column blocks of 4 query rows a work-group may take: 4 in the wide form, 2 elsewhere, and
// at D = 512 one (246-255 registers without spills; two spill 360-490 bytes at 255), so a GQA group
// there splits into work-groups of at most 4 rows (vec_rows_of).
TURBO3_HD constexpr int vec_warp_max_col_blocks(int d, data_type k, data_type v, bool masked) {
  return d == 512 ? 1 : vec_warp_wide(d, k, v, masked) ? 4 : 2;
}
// The most query rows a work-group of the warp kernel takes.
TURBO3_HD constexpr int vec_warp_max_rows(int d, data_type k, data_type v, bool masked) {
  return 4 * vec_warp_max_col_blocks(d, k, v, masked);
}
// The V-in-K form (K 640, V 512) takes 2 column blocks: its Q fragments sit in shared memory
// (vec_warp_config::q_in_smem), so turbo3 and turbo2 fit 8 rows in 239-240 registers without
// spills (turbo4 248 / 252 registers without / with a mask), and each unpacked key serves twice
// the rows.
inline constexpr int vec_warp_v_in_k_col_blocks = 2;

// Staging copy size for K/V row strides in bytes: 8 or 4 where both strides are multiples of it,
// else 2 (rows copied with ordinary loads).
TURBO3_HD constexpr int vec_row_unit(int64_t k_nb1, int64_t v_nb1) {
  return k_nb1 % 8 == 0 && v_nb1 % 8 == 0 ? 8 : k_nb1 % 4 == 0 && v_nb1 % 4 == 0 ? 4 : 2;
}
// The rows of a group staged as one contiguous run (vec_head_row_unit), not row by row.
inline constexpr int vec_row_span = 1;
// The same for the heads at k_head and v_head: 16 where both strides are multiples of 16 and both
// heads' rows start 4-byte aligned (so a row starts at most 12 bytes into its first 16-byte unit),
// as in an engine's cache of whole-token rows (H heads of 50-byte blocks: a stride of 100 H bytes
// at D = 256); vec_row_span where the rows of each head lie back to back (row_bytes apart, a
// head-major cache) and vec_row_unit would copy 2 bytes at a time (50-byte rows at D = 128):
// a group's 16 rows are then one run of 16 * row_bytes bytes, copied in 16-byte units; else
// vec_row_unit.
// k_row_bytes / v_row_bytes: a K / V row's bytes (they differ where K and V types do).
TURBO3_HD inline int vec_head_row_unit(int64_t k_nb1, int64_t v_nb1, const void* k_head, const void* v_head,
                                       int64_t k_row_bytes, int64_t v_row_bytes) {
  const bool aligned4 = ((reinterpret_cast<uintptr_t>(k_head) | reinterpret_cast<uintptr_t>(v_head)) & 3u) == 0;
  if (k_nb1 % 16 == 0 && v_nb1 % 16 == 0 && aligned4) return 16;
  const int unit = vec_row_unit(k_nb1, v_nb1);
  return unit == 2 && k_nb1 == k_row_bytes && v_nb1 == v_row_bytes ? vec_row_span : unit;
}
TURBO3_HD inline int vec_head_row_unit(int64_t k_nb1, int64_t v_nb1, const void* k_head, const void* v_head,
                                       int64_t row_bytes) {
  return vec_head_row_unit(k_nb1, v_nb1, k_head, v_head, row_bytes, row_bytes);
}

// The staged rows of one side (K or V) of storage side S (vec_warp_sides.hpp) at head dim D.
template <int D, class S>
struct vec_warp_side_layout {
  static constexpr int group = 16;
  static constexpr int row_bytes = D / block_values * S::group_bytes;
  // Copies of `unit` bytes (8 or 4), 16 / unit lanes per row: lane q of a row copies its units q,
  // q + lanes, ..., at constant offsets from one source address, as many as cover a row from any
  // start (up to 6 bytes into its first unit) and all inside the row's slot; all whole but the
  // last, which holds the row's end, or part of it, or nothing (then it is zero-filled and nothing
  // is read).
  TURBO3_HD static constexpr int copy_lanes_per_row(int unit) { return 16 / unit; }
  TURBO3_HD static constexpr int copy_rows_per_pass(int unit) { return 32 / copy_lanes_per_row(unit); }
  static constexpr int units_per_lane = (row_bytes + 6 + 15) / 16;
  TURBO3_HD static constexpr int min_row_units(int unit) { return (row_bytes + unit - 1) / unit; }
  // Whether every unit but a lane's last is whole from every start (start 0 is the tightest): its
  // highest is below row_bytes / unit (a 272-byte q8_0 row at D = 256: 8-byte unit 33 of 34).
  TURBO3_HD static constexpr bool only_last_unit_partial(int unit) {
    return copy_lanes_per_row(unit) - 1 + copy_lanes_per_row(unit) * (units_per_lane - 2) < row_bytes / unit;
  }
  // 16-byte copies: one lane per row (K rows in lanes 0-15, V rows in 16-31), each copying the
  // row_units_16 units that cover a row starting up to 12 bytes into its first.
  static constexpr int row_units_16 = (row_bytes + 12 + 15) / 16;
  // Whether a row takes row_units_16 units from every start (turbo3, turbo2; not turbo4 at D = 256,
  // whose 136-byte rows take 9 units from starts 0 and 4): then a lane's last unit is a constant.
  static constexpr bool row_units_16_fixed = (row_bytes + 15) / 16 == row_units_16;
  // A staged row starts as many bytes into its first copy unit as it does in the cache (0 or 2
  // with 4-byte copies, 0-6 with 8-byte ones, 0-12 with 16-byte ones), so shared and global units
  // line up: a slot holds the row from any such start, and its 16-byte units. The pitch, in 4-byte
  // words, is 4 mod 8: the score loads (8 rows x 4 adjacent words) and the value loads (rows 0, 2,
  // 4, 6 x 8 adjacent words) then fall on 32 distinct banks. A tight pitch (26 words for turbo3 at
  // D = 256) makes a third of the shared-load wavefronts bank conflicts.
  static constexpr int pitch_words_min =
      (row_bytes + 6 + 3) / 4 > 4 * row_units_16 ? (row_bytes + 6 + 3) / 4 : 4 * row_units_16;
  static constexpr int pitch = 4 * (pitch_words_min + (12 - pitch_words_min % 8) % 8);
  static_assert(pitch % 32 == 16 && pitch / 4 >= pitch_words_min, "conflict-free pitch");
  static_assert(only_last_unit_partial(8) && only_last_unit_partial(4), "a lane's earlier units are whole");
  static_assert(16 * units_per_lane <= pitch, "a row's units stay inside its slot");
  static_assert(16 * row_units_16 <= pitch, "a row's 16-byte units stay inside its slot");
  // Span staging (vec_row_span): a group's rows as one run from the 16-byte unit holding its first
  // byte (up to 15 bytes in), rows row_bytes apart in the slot.
  static constexpr int span_units = (16 * row_bytes + 15 + 15) / 16;
  static_assert(16 * span_units <= group * pitch, "a group's run stays inside its tile");
  TURBO3_HD static constexpr int max_row_units(int unit) { return (row_bytes + unit - 2 + unit - 1) / unit; }
  // 2-byte copies (ordinary loads): lanes_per_row_2 lanes per row (as many as its 4-byte units,
  // rounded up to a power of two, at most 32), each copying every lanes_per_row_2-th half word of
  // it; rows_per_pass_2 rows per pass.
  static constexpr int lanes_per_row_2 = max_row_units(4) > 16 ? 32 : max_row_units(4) > 8 ? 16 : 8;
  static constexpr int rows_per_pass_2 = 32 / lanes_per_row_2;
  static constexpr int tile_bytes = group * pitch;  // one group of rows
  static_assert(group % copy_rows_per_pass(8) == 0 && group % copy_rows_per_pass(4) == 0, "whole passes per group");
};

// D: V's head dim (the output's); DK: K's (and Q's), D but in the V-in-K form (vec_warp_v_in_k).
// KS, VS: the K and V sides (vec_warp_sides.hpp).
// ROWS_: 8, or 16 in the wide form (two score fragments). MASKED_: the call has a mask.
template <int D, int WARPS = 4, class KS = turbo3_warp_side, class VS = turbo3_warp_side, int ROWS_ = vec_warp_rows,
          int DK = D, bool MASKED_ = false>
struct vec_warp_config {
  using k_side = KS;
  using v_side = VS;
  using k_layout = vec_warp_side_layout<DK, KS>;
  using v_layout = vec_warp_side_layout<D, VS>;
  static constexpr int ROWS = ROWS_;
  static constexpr bool masked = MASKED_;
  static constexpr int score_sets = ROWS / vec_warp_rows;  // score fragments of 8 rows
  static_assert(ROWS == vec_warp_rows || ROWS == 2 * vec_warp_rows, "8 or 16 rows");
  static constexpr int blocks = D / block_values;     // V's 128-value groups
  static constexpr int k_blocks = DK / block_values;  // K's (and Q's)
  // V's rows are the first D values of K's (MLA's cache: ggml's V is a view of K): only K is
  // staged, and V's chunks are read from K's tile.
  static constexpr bool v_in_k = DK != D;
  static_assert(!v_in_k || (DK > D && KS::type == VS::type), "V in K: V's rows are the leading groups of K's");
  static constexpr int group = 16;   // keys per warp step: the score fragment's M, the value fragment's K
  static constexpr int stages = 3;   // shared-memory ring per warp: stages - 1 groups in flight
  static constexpr int n_warps = WARPS;
  static constexpr int threads = 32 * n_warps;
  static constexpr int k_tile_bytes = k_layout::tile_bytes;  // one group of K rows, then one of V
  static constexpr int v_tile_bytes = v_layout::tile_bytes;
  // After its last group a warp writes its rows (D values, then the maximum and the sum) into its
  // own ring slots, merge_rows_per_slot rows of merge_pitch floats (16-byte aligned) per slot: a
  // slot is K's and V's tiles, or as many bytes as the merge needs where they are smaller (turbo2).
  static constexpr int merge_pitch = D + 4;
  static constexpr int merge_min_rows_per_slot = (ROWS + stages - 1) / stages;
  static constexpr int max2(int x, int y) { return x > y ? x : y; }
  // Each slot keeps the first key of the group staged in it after its tiles (warp_stager::stage),
  // then, masked, the mask's values of its rows at the group's keys: mask_pitch bytes a row (16
  // keys, then 16 bytes of padding, so the score rows 2t and 2t + 1 of the four t fall on distinct
  // banks). Unmasked slots keep no room for them.
  static constexpr int slot_start_offset = k_tile_bytes + (v_in_k ? 0 : v_tile_bytes);
  static constexpr int slot_mask_offset = slot_start_offset + 16;
  static constexpr int mask_pitch = 48;
  static constexpr int slot_mask_bytes = masked ? ROWS * mask_pitch : 0;
  static constexpr int stage_bytes =
      max2(slot_mask_offset + slot_mask_bytes, merge_min_rows_per_slot * merge_pitch * 4);
  static_assert(stage_bytes % 16 == 0, "16-byte aligned slots");
  // The ring is [stage][warp]: every warp's first slot comes first, so the Q rows can sit in the
  // later slots while the first groups land.
  static constexpr int ring_stride = n_warps * stage_bytes;  // from a warp's slot to its next
  static constexpr int staging_bytes = stages * ring_stride;
  // Q rows in fp32 while they are rotated, q_pitch floats apart (4 mod 32 words: the fragment
  // loads of rows g and g + 1 fall on different banks).
  static constexpr int q_pitch = DK + 4;
  // ... and after them each (row, 128-value group)'s largest magnitude, for the integer Q operand.
  static constexpr int query_bytes = (ROWS * q_pitch + ROWS * k_blocks) * 4;
  static_assert(query_bytes <= (stages - 1) * ring_stride, "Q fits in the ring's later slots");
  static constexpr int merge_rows_per_slot = stage_bytes / (merge_pitch * 4);
  static_assert(merge_rows_per_slot * stages >= ROWS, "a warp's rows (4 per value column block) fit its ring");
  // 128-value groups of a row the final split merge folds at once (merge_splits_if_last): 2 in the
  // wide form at D = 256 (its merge 6.5 us against 8.5, docs/performance.md, decode); one at
  // D = 128, where a warp's two items are two rows and folding them together gains nothing.
  static constexpr int merge_groups_at_once = score_sets > 1 && blocks % 2 == 0 ? 2 : 1;
  // The running maxima's slack (vec_warp_max_slack): none at D = 512, whose kernels have no
  // registers for the norm check (masked q8_0-K spills 8 bytes with it).
  static constexpr float max_slack = blocks > 2 ? 0.0f : vec_warp_max_slack;
  // Q fragments (fp16 form) in registers, or, in the wide form at D = 256 (their 64 registers beside
  // 128 accumulators spill) and past 4 K groups (80 registers beside D = 512's 64 accumulators),
  // in shared memory after the ring, [score set][fragment][lane] (one 8-byte load per multiply,
  // conflict free), written once, the warps taking turns.
  static constexpr bool q_in_smem = (score_sets > 1 && k_blocks > 1) || k_blocks > 4;
  static constexpr int q_smem_offset = staging_bytes;
  static constexpr int q_smem_bytes = q_in_smem ? score_sets * k_blocks * 2 * 4 * 32 * 8 : 0;
  static constexpr int smem_bytes = max2(staging_bytes + q_smem_bytes, query_bytes);
  // The scores on integer multiplies (m16n8k32, signed bytes) in the deep-context (6-warp) form,
  // on fp16 ones (m16n8k16) in the others: the integer form wins in long contexts and loses in
  // short ones, where the rounding of Q and a longer score chain are not amortized
  // (docs/performance.md, decode). A K side without an integer decode (turbo4) has no 6-warp form.
  static constexpr bool integer_scores = n_warps == vec_warp_deep_warps;
  static_assert(!integer_scores || KS::i8_scores, "the 6-warp form needs a K side with integer scores");
  static_assert(!integer_scores || score_sets == 1, "the 6-warp form has one value column block");
  static_assert(VS::finite_decode, "a V side's stale keys are cancelled by a zero weight: finite decodes only");
  // Q fragments per lane and score set (and byte plane, integer): [block][half][k-step]
  static constexpr int q_frags = k_blocks * 2 * (integer_scores ? 2 : 4);
  // V blocks whose value operand is decoded before the softmax, so that their byte permutes fill
  // the softmax's dependency waits: the first of two at D = 256 (214-220 registers, still 2
  // work-groups per SM; both blocks early gain less); none at D = 128, where its one block early
  // is slower (docs/performance.md, decode).
  // The wide form has no registers to spare for them.
  static constexpr int early_v_blocks = blocks == 2 && n_warps == 4 && score_sets == 1 ? 1 : 0;
  static_assert(vec_warp_head_dim(D), "VEC on matrix instructions covers D = 128, 256 and 512");
  static_assert(DK == D || vec_warp_v_in_k_dims(DK, D), "K's head dim differs from V's only in the V-in-K form");
  static_assert(vec_warp_split_keys(n_warps) == group * n_warps, "a split unit is one group per warp");
};
// The configuration of vec_warp_kernel<D, MASKED, COL_BLOCKS, WARPS, KS, VS>: its launch takes the
// work-group size and shared memory from here.
template <int D, int COL_BLOCKS, int WARPS, class KS, class VS, int DK = D, bool MASKED = false>
using vec_warp_kernel_config = vec_warp_config<D, WARPS, KS, VS, vec_warp_rows_of(COL_BLOCKS), DK, MASKED>;

// turbo3's staged rows as the kernel has always laid them out (80 / 112-byte pitch at D = 128 /
// 256): the side layout changes no turbo3 code.
static_assert(vec_warp_side_layout<128, turbo3_warp_side>::pitch == 80 &&
                  vec_warp_side_layout<256, turbo3_warp_side>::pitch == 112,
              "turbo3 pitch");
static_assert(vec_warp_config<128>::slot_start_offset == 2 * 16 * 80 &&
                  vec_warp_config<256, 6>::slot_start_offset == 2 * 16 * 112,
              "turbo3 slots");

// The work-group's Q rows, prescaled and rotated where K stores rotated values (a.rotate_q: every
// turbo side, not q8_0; the output's rotation back, a.unrotate_out, follows V alone), into q_nat [ROWS][q_pitch] in natural order, padding rows zero: a warp per 128-value group, 4
// values per lane. load() issues the global loads (the kernel calls it first, so they are not
// queued behind its first copies); store() rotates in registers and shuffles
// (rotate_group_warp32), writes the rows to shared memory once and synchronizes. The fragments then pick their slots' values. Loads behind the
// first copies and a rotation in the work-group's two shared-memory passes make Q ready about
// 1 us later (docs/performance.md, decode).
template <class C>
struct warp_queries {
  static constexpr int items = C::ROWS * C::k_blocks;
  static constexpr int per_warp = (items + C::n_warps - 1) / C::n_warps;  // groups per warp
  uint32_t raw[per_warp][4];  // as loaded: fp16 or fp32 bits
  bool on[per_warp];

  // Every load is issued before any value is used, from an address that is valid for every item
  // (a padding item reads row 0 and is zeroed in store()), with no branch between them; the values
  // are converted only in store(), after the first copies are out. Converted as they load (one
  // value at a time behind a branch), a warp's loads would run one round trip after another
  // before the kernel's first copies are issued (docs/performance.md, decode).
  TURBO3_DEVICE TURBO3_FORCEINLINE void load(const attention_args& a, const vec_context& x, int warp, int lane) {
    const bool f16 = a.q_f16;
    TURBO3_UNROLL
    for (int k = 0; k < per_warp; ++k) {
      const int item = warp + k * C::n_warps, r = item / C::k_blocks, b = item % C::k_blocks;
      const vec_row row = vec_row_of(a, r, x.kv_head, x.head_split, x.q_tile, x.heads_per_block);
      on[k] = item < items && r < x.active_rows && row.query >= 0;
      const char* src = a.q + static_cast<int64_t>(on[k] ? row.query : 0) * a.q_nb1 +
                        static_cast<int64_t>(on[k] ? row.head : 0) * a.q_nb2 + static_cast<int64_t>(x.seq) * a.q_nb3;
      const int d0 = b * block_values + 4 * lane;
      TURBO3_UNROLL
      for (int m = 0; m < 4; ++m)
        raw[k][m] = f16 ? reinterpret_cast<const uint16_t*>(src)[d0 + m] : reinterpret_cast<const uint32_t*>(src)[d0 + m];
    }
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE void store(const attention_args& a, float* q_nat, int warp, int lane) {
    const bool f16 = a.q_f16;
    TURBO3_UNROLL
    for (int k = 0; k < per_warp; ++k) {
      const int item = warp + k * C::n_warps, r = item / C::k_blocks, b = item % C::k_blocks;
      float u[4];
      TURBO3_UNROLL
      for (int m = 0; m < 4; ++m) {
        const float v = f16 ? platform::half_bits_to_float(static_cast<uint16_t>(raw[k][m])) : platform::bits_to_float(raw[k][m]);
        u[m] = on[k] ? v * a.q_prescale : 0.0f;
      }
      if (a.rotate_q && on[k]) rotate_group_warp32<false>(u, lane);  // warp-uniform
      if (item < items)
        reinterpret_cast<float4*>(q_nat + r * C::q_pitch + b * block_values)[lane] = make_float4(u[0], u[1], u[2], u[3]);
      if constexpr (C::integer_scores) {
        float m = fmaxf(fmaxf(fabsf(u[0]), fabsf(u[1])), fmaxf(fabsf(u[2]), fabsf(u[3])));
        TURBO3_UNROLL
        for (int o = 1; o < 32; o *= 2) m = fmaxf(m, platform::shfl_xor(m, o));
        if (item < items && lane == 0) q_nat[C::ROWS * C::q_pitch + item] = m;  // item = r * blocks + b
      }
    }
    platform::sync_threads();
  }
};

// ---- the steps of the kernel -------------------------------------------------------------------

// The key of the value operand's K-index pair k (a0 / a2 / the next multiply's a0 / a2) in lane
// (g, t): 2t + (k & 1) + 8 (k >> 1). A load of a key's chunk g then takes rows 2t + c for the four
// t, pitch / 4 = 4 mod 8 words x 2 apart: their 8-word runs fall on 32 distinct banks (keys t + 4k,
// four adjacent rows, overlap: a quarter of the kernel's shared-load wavefronts would be
// conflicts).
TURBO3_DEVICE TURBO3_FORCEINLINE int vec_warp_value_key(int k, int t) { return 2 * t + (k & 1) + 8 * (k >> 1); }

// The rows this lane's score and value fragments touch in the score set of rows row0 .. row0 + 7:
// row0 + 2t and row0 + 2t + 1. Keys j < key_limit[e] may be visible to row row0 + 2t + e (the keys'
// end and the causal diagonal; none for a padding row), so the window is one comparison per score.
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_row_windows(int (&key_limit)[2], float (&row_slope)[2],
                                                          const attention_args& a, const vec_context& x, int t,
                                                          int row0) {
  TURBO3_UNROLL
  for (int e = 0; e < 2; ++e) {
    const vec_row_info info = vec_row_info_at(a, x, row0 + 2 * t + e);
    const int diagonal = info.query + a.n_kv - a.n_q + 1;  // key j is visible to query i iff j < i + n_kv - n_q + 1
    key_limit[e] = info.query < 0 ? 0 : a.causal ? min(x.kv_end, diagonal) : x.kv_end;
    row_slope[e] = info.slope;
  }
}

// The mask row of the work-group's row r (a padding row takes the mask's first row: its window is
// empty, and its staging reads valid bytes).
TURBO3_DEVICE TURBO3_FORCEINLINE const platform::half* vec_warp_mask_row(const attention_args& a, const vec_context& x,
                                                                        int r) {
  const vec_row_info info = vec_row_info_at(a, x, r);
  return info.mask ? info.mask : reinterpret_cast<const platform::half*>(a.mask);
}

// The B operand of the scores: Q fragments in registers (the kernel is compiled for 2 work-groups
// per SM, so the 32 registers they take at D = 256 are free; in shared memory they cost 16 loads
// per group). fp16: row g, chunk 8b+t+4h, k-step k. Integer (C::integer_scores): each row of Q is
// scaled so that its largest magnitude is i8_pair_max and rounded to an integer q = 128 * hi + lo,
// the levels likewise (the K side's decode_i8), and a score is 128 * (K_hi . Q_hi) + K_hi . Q_lo +
// K_lo . Q_hi (K_lo . Q_lo, under 2^-14 of the rest, left out): the K operand is two byte permutes
// per four values where fp16 takes four. Lane (g, t), block b, half h, k-step k: row g, slots 8k + 0..3 (.x) and 8k + 4..7 (.y) of
// chunk 8b + t + 4h. q_frag holds the fp16 form ([score set][q_frags]: set n holds rows 8n + g), q_hi
// and q_lo the integer one, whose score rows 2t + e have the unit score_unit[e].
template <class C>
using vec_warp_q_frags = uint2[C::integer_scores || C::q_in_smem ? 1 : C::score_sets * C::q_frags];
template <class C>
using vec_warp_q_bytes_of = uint2[C::integer_scores ? C::q_frags : 1];

// hi = rint(x / 128) and lo = rint(x) - 128 hi (|lo| <= 64) of x = v * q_scale for slots
// slot0 .. slot0 + 3, as bytes, rounded by adding 1.5 * 2^23 (the sum's low mantissa byte is the
// integer's two's-complement byte). Slots in the K side KS's order.
template <class KS>
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_q_bytes(const float* v, int slot0, float q_scale, uint32_t& hi, uint32_t& lo) {
  using L = KS;
  constexpr float round_bias = 12582912.0f;
  uint32_t hb[4], lb[4];
  TURBO3_UNROLL
  for (int e = 0; e < 4; ++e) {
    const float x = v[L::value_of_slot(slot0 + e)] * q_scale;
    const float h = fmaf(x, 1.0f / 128.0f, round_bias);
    const float l = fmaf(h - round_bias, -128.0f, x) + round_bias;
    hb[e] = platform::float_to_bits(h);
    lb[e] = platform::float_to_bits(l);
  }
  hi = platform::permute_bytes<0, 1, 4, 5>(platform::permute_bytes<0, 4, 0, 4>(hb[0], hb[1]),
                                           platform::permute_bytes<0, 4, 0, 4>(hb[2], hb[3]));
  lo = platform::permute_bytes<0, 1, 4, 5>(platform::permute_bytes<0, 4, 0, 4>(lb[0], lb[1]),
                                           platform::permute_bytes<0, 4, 0, 4>(lb[2], lb[3]));
}

// Q into the ring's later slots (not yet staged), then this lane's fragments from there; ends with
// a barrier, as the ring's later slots are staged next.
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_load_q(vec_warp_q_frags<C>& q_frag, vec_warp_q_bytes_of<C>& q_hi,
                                                      vec_warp_q_bytes_of<C>& q_lo, float (&score_unit)[2], warp_queries<C>& queries,
                                                      const attention_args& a, unsigned char* smem, const turbo3_lut& lut,
                                                      int warp, int lane, int g, int t) {
  using L = typename C::k_side;
  constexpr bool integer_scores = C::integer_scores;
  float* q_nat = reinterpret_cast<float*>(smem + C::ring_stride);
  queries.store(a, q_nat, warp, lane);
  const float* q_absmax = q_nat + C::ROWS * C::q_pitch;  // [row][K block] (integer)
  auto row_max = [&](int r) {
    float m = 0.0f;
    TURBO3_UNROLL
    for (int b = 0; b < C::k_blocks; ++b) m = fmaxf(m, q_absmax[r * C::k_blocks + b]);
    return m;
  };
  const float g_max = integer_scores ? row_max(g) : 0.0f;
  const float q_scale = g_max > 0.0f ? i8_pair_max / g_max : 0.0f;  // a zero row stays zero
  TURBO3_UNROLL
  for (int sbh = 0; sbh < C::score_sets * C::k_blocks * 2; ++sbh) {  // chunk 8b + t + 4h of row 8 set + g
    const int set = sbh / (C::k_blocks * 2), bh = sbh % (C::k_blocks * 2), b = bh / 2, h = bh % 2;
    const int row = 8 * set + g;
    const float4* q4 = reinterpret_cast<const float4*>(q_nat + row * C::q_pitch + (8 * b + t + 4 * h) * kv::chunk_values);
    float v[kv::chunk_values];
    TURBO3_UNROLL
    for (int i = 0; i < kv::chunk_values / 4; ++i) {
      const float4 w = q4[i];
      v[4 * i] = w.x, v[4 * i + 1] = w.y, v[4 * i + 2] = w.z, v[4 * i + 3] = w.w;
    }
    if constexpr (integer_scores) {
      TURBO3_UNROLL
      for (int k = 0; k < 2; ++k) {
        vec_warp_q_bytes<L>(v, 8 * k, q_scale, q_hi[bh * 2 + k].x, q_lo[bh * 2 + k].x);
        vec_warp_q_bytes<L>(v, 8 * k + 4, q_scale, q_hi[bh * 2 + k].y, q_lo[bh * 2 + k].y);
      }
    } else {
      TURBO3_UNROLL
      for (int k = 0; k < 4; ++k) {
        const uint2 f = make_uint2(platform::pack_half2(v[L::value_of_slot(4 * k)], v[L::value_of_slot(4 * k + 1)]),
                                   platform::pack_half2(v[L::value_of_slot(4 * k + 2)], v[L::value_of_slot(4 * k + 3)]));
        if constexpr (C::q_in_smem) {
          if (sbh % C::n_warps == warp) reinterpret_cast<uint2*>(smem + C::q_smem_offset)[(sbh * 4 + k) * 32 + lane] = f;
        } else {
          q_frag[sbh * 4 + k] = f;
        }
      }
    }
  }
  if constexpr (integer_scores) {
    TURBO3_UNROLL
    for (int e = 0; e < 2; ++e) score_unit[e] = 128.0f * L::i8_unit(lut) * row_max(2 * t + e) / i8_pair_max;
  }
  platform::sync_threads();  // the ring's later slots are staged next
}

// Softcap, window and mask on the group's scores at key j0: a hidden score becomes -inf, with one
// comparison (and, masked, one shared load) per score and no branch. mask_rows: the staged mask
// values of score rows 2t and 2t + 1 of this set (warp_stager::stage_mask), mask_pitch / 2 apart.
template <bool MASKED, int MASK_PITCH>
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_mask_scores(float (&s)[4], const attention_args& a,
                                                           const int (&key_limit)[2], const platform::half* mask_rows,
                                                           const float (&row_slope)[2], int j0, int g) {
  if (a.softcap_post != 0.0f) {  // uniform: one branch per group
    TURBO3_UNROLL
    for (int e = 0; e < 4; ++e) s[e] = a.softcap_post * platform::tanh_fast(s[e]);
  }
  TURBO3_UNROLL
  for (int e = 0; e < 4; ++e) {
    const int j = j0 + (e < 2 ? g : g + 8);
    float v = s[e];
    bool visible = j < key_limit[e & 1];
    if constexpr (MASKED) {
      const float mv = platform::half_to_float(mask_rows[(e & 1) * (MASK_PITCH / 2) + (e < 2 ? g : g + 8)]);
      visible = visible && mv != -INFINITY;
      v += row_slope[e & 1] * mv;
    }
    s[e] = visible ? v : -INFINITY;
  }
}

// A chunk's packed bits from a staged row of side S. Rows staged in 16-byte units start 4-byte
// aligned (their shift is 0, 4, 8 or 12), so the side may read its aligned words whole (turbo3 and
// turbo2: the qs words of odd blocks; turbo4: all): one 32-bit load instead of two 16-bit loads
// and a multiply-add to join them.
template <class S, int UNIT>
TURBO3_DEVICE TURBO3_FORCEINLINE typename S::raw_chunk vec_warp_load_chunk(const char* row, int b, int q) {
  return S::template load<UNIT>(row, b, q);
}

// The scores S (16 keys x 8 rows per score set n), added to s[n]: (key g, row 8n + 2t), (g, 8n + 2t+1),
// (g+8, 8n + 2t), (g+8, 8n + 2t+1), from the staged rows of keys g (row_a) and g + 8 (row_b), copied
// in UNIT-byte units; each unpacked key serves every set. Rows past the group's keys hold stale
// bytes (vec_warp_mask_scores hides them). t is taken by reference: by value the scores compile to
// other code. q_smem: this lane's first Q fragment in shared memory (C::q_in_smem).
template <class C, int UNIT>
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_scores(float (&s)[C::score_sets][4], const char* row_a, const char* row_b,
                                                      const vec_warp_q_frags<C>& q_frag, const uint2* q_smem,
                                                      const vec_warp_q_bytes_of<C>& q_hi,
                                                      const vec_warp_q_bytes_of<C>& q_lo, const float (&score_unit)[2],
                                                      const turbo3_lut& lut, const int& t) {
  using L = typename C::k_side;
  constexpr bool integer_scores = C::integer_scores;
  TURBO3_UNROLL
  for (int b = 0; b < C::k_blocks; ++b) {
    const float norm_a = L::scale(row_a, b), norm_b = L::scale(row_b, b);
    if constexpr (integer_scores) {
      int hh[4] = {}, hl[4] = {}, lh[4] = {};  // K_hi Q_hi, K_hi Q_lo, K_lo Q_hi: three independent chains
      TURBO3_UNROLL
      for (int h = 0; h < 2; ++h) {
        uint32_t ha[4], la[4], hb[4], lb[4];
        L::decode_i8(vec_warp_load_chunk<L, UNIT>(row_a, b, t + 4 * h), lut, ha, la);
        L::decode_i8(vec_warp_load_chunk<L, UNIT>(row_b, b, t + 4 * h), lut, hb, lb);
        TURBO3_UNROLL
        for (int k = 0; k < 2; ++k) {
          const uint32_t k_hi[4] = {ha[2 * k], hb[2 * k], ha[2 * k + 1], hb[2 * k + 1]};
          const uint32_t k_lo[4] = {la[2 * k], lb[2 * k], la[2 * k + 1], lb[2 * k + 1]};
          const int f = (b * 2 + h) * 2 + k;
          const uint32_t qh[2] = {q_hi[f].x, q_hi[f].y}, ql[2] = {q_lo[f].x, q_lo[f].y};
          platform::mma_m16n8k32_s8(hh, k_hi, qh);
          platform::mma_m16n8k32_s8(hl, k_hi, ql);
          platform::mma_m16n8k32_s8(lh, k_lo, qh);
        }
      }
      TURBO3_UNROLL
      for (int e = 0; e < 4; ++e)  // |128 hh + hl + lh| < 2^29 over a block: exact in int32
        s[0][e] += (e < 2 ? norm_a : norm_b) * static_cast<float>(128 * hh[e] + hl[e] + lh[e]);
    } else {
      float part[C::score_sets][2][4] = {};  // one accumulator per set and chunk half: independent mma chains
      TURBO3_UNROLL
      for (int h = 0; h < 2; ++h) {
        uint32_t ha[8], hb[8];
        L::decode_half2(vec_warp_load_chunk<L, UNIT>(row_a, b, t + 4 * h), lut, ha);
        L::decode_half2(vec_warp_load_chunk<L, UNIT>(row_b, b, t + 4 * h), lut, hb);
        TURBO3_UNROLL
        for (int k = 0; k < 4; ++k) {
          const uint32_t frag[4] = {ha[2 * k], hb[2 * k], ha[2 * k + 1], hb[2 * k + 1]};
          TURBO3_UNROLL
          for (int set = 0; set < C::score_sets; ++set) {
            const int f = set * C::q_frags + (b * 2 + h) * 4 + k;
            const uint2 qf = C::q_in_smem ? q_smem[f * 32] : q_frag[f];
            const uint32_t qb[2] = {qf.x, qf.y};
            platform::mma_m16n8k16(part[set][h], frag, qb);
          }
        }
      }
      TURBO3_UNROLL
      for (int set = 0; set < C::score_sets; ++set) {
        s[set][0] += norm_a * (part[set][0][0] + part[set][1][0]);
        s[set][1] += norm_a * (part[set][0][1] + part[set][1][1]);
        s[set][2] += norm_b * (part[set][0][2] + part[set][1][2]);
        s[set][3] += norm_b * (part[set][0][3] + part[set][1][3]);
      }
    }
  }
  if constexpr (integer_scores) {
    TURBO3_UNROLL
    for (int e = 0; e < 4; ++e) s[0][e] *= score_unit[e & 1];
  }
}

// The score set and the lane t of a score fragment that hold row 4 cb + r of value column block cb
// (r < 4): rows 8n + 2t and 8n + 2t + 1 sit in lane t of set n.
TURBO3_DEVICE TURBO3_FORCEINLINE int vec_warp_set_of(int cb) { return cb >> 1; }
TURBO3_DEVICE TURBO3_FORCEINLINE int vec_warp_score_lane_of(int cb, int r) { return 2 * (cb & 1) + (r >> 1); }

// O'^T *= alpha where a maximum grew (rare once the maxima settle): row 4 cb + t's alpha comes
// from a lane whose score rows hold it.
template <class C, int COL_BLOCKS>
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_rescale(float (&acc)[COL_BLOCKS][C::blocks * 4][4],
                                                       const float (&alpha)[C::score_sets][2], bool update, int t) {
  bool grew = false;
  TURBO3_UNROLL
  for (int set = 0; set < C::score_sets; ++set) grew = grew || alpha[set][0] != 1.0f || alpha[set][1] != 1.0f;
  if (update && platform::any_in_warp(grew)) {
    TURBO3_UNROLL
    for (int cb = 0; cb < COL_BLOCKS; ++cb) {
      const int src = vec_warp_score_lane_of(cb, t), set = vec_warp_set_of(cb);
      const float a0 = platform::shfl(alpha[set][0], src), a1 = platform::shfl(alpha[set][1], src);
      const float f = (t & 1) ? a1 : a0;
      TURBO3_UNROLL
      for (int m = 0; m < C::blocks * 4; ++m)
        TURBO3_UNROLL
        for (int i = 0; i < 4; ++i) acc[cb][m][i] *= f;
    }
  }
}

// How far a score may pass a running maximum m before the maximum moves: m + C::max_slack, or m
// itself without a slack (m + 0 is not m for m = -0, so the compiler would keep the addition).
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE float vec_warp_max_cap(float m) {
  if constexpr (C::max_slack > 0.0f) return m + C::max_slack;
  else return m;
}

// The value operand (A) of the first early_v_blocks V blocks, decoded before the softmax, so that
// their byte permutes fill its dependency waits.
template <class C>
using vec_warp_early_values = uint32_t[C::early_v_blocks > 0 ? C::early_v_blocks : 1][4][8];
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_decode_early(vec_warp_early_values<C>& v_early,
                                                            const typename C::v_side::raw_chunk (&v_raw)[C::blocks][4],
                                                            const turbo3_lut& lut) {
  TURBO3_UNROLL
  for (int b = 0; b < C::early_v_blocks; ++b)
    TURBO3_UNROLL
    for (int k = 0; k < 4; ++k) C::v_side::decode_half2(v_raw[b][k], lut, v_early[b][k]);
}

// O'^T += A B per column block over the group staged at v_tile, rows ROW_PITCH bytes apart (n keys;
// stale keys carry norm 0).
// B: p of row 4 cb + g / 2 at keys t + 4k (from the score lanes that hold them, as fp16 row
// pairs), placed in half g % 2 by the byte permute place_sel, times the key's norm of block b.
template <int ROW_PITCH, class C, int COL_BLOCKS>
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_accumulate_values(float (&acc)[COL_BLOCKS][C::blocks * 4][4],
                                                                 const float (&p)[C::score_sets][4],
                                                                 const typename C::v_side::raw_chunk (&v_raw)[C::blocks][4],
                                                                 const vec_warp_early_values<C>& v_early, const char* v_tile,
                                                                 int n, const turbo3_lut& lut, uint32_t place_sel, int g, int t) {
  using L = typename C::v_side;
  constexpr int early_blocks = C::early_v_blocks;
  uint32_t p_pair[C::score_sets][2];  // keys g, g + 8
  TURBO3_UNROLL
  for (int set = 0; set < C::score_sets; ++set)
    p_pair[set][0] = platform::pack_half2(p[set][0], p[set][1]), p_pair[set][1] = platform::pack_half2(p[set][2], p[set][3]);
  uint32_t norm2[C::blocks][4];
  TURBO3_UNROLL
  for (int b = 0; b < C::blocks; ++b)
    TURBO3_UNROLL
    for (int k = 0; k < 4; ++k) {
      const uint32_t bits = vec_warp_value_key(k, t) < n ? L::scale_bits(v_tile + vec_warp_value_key(k, t) * ROW_PITCH, b) : 0u;
      norm2[b][k] = bits * 0x10001u;  // (norm, norm) as fp16
    }
  // p of each column block's rows at this lane's value keys, placed in its half: one shuffle and
  // one byte permute per (column block, key pair) serve every V block.
  uint32_t p_placed[COL_BLOCKS][4];
  TURBO3_UNROLL
  for (int cb = 0; cb < COL_BLOCKS; ++cb) {
    const int src_t = vec_warp_score_lane_of(cb, g >> 1), set = vec_warp_set_of(cb);
    TURBO3_UNROLL
    for (int k = 0; k < 4; ++k)
      p_placed[cb][k] = platform::lookup_bytes4(
          platform::shfl(p_pair[set][k >> 1], 4 * (vec_warp_value_key(k, t) & 7) + src_t), 0u, place_sel);
  }
  TURBO3_UNROLL
  for (int b = 0; b < C::blocks; ++b) {
    uint32_t dh[4][8];
    TURBO3_UNROLL
    for (int k = 0; k < 4; ++k) {
      if (b < early_blocks) {
        TURBO3_UNROLL
        for (int i = 0; i < 8; ++i) dh[k][i] = v_early[b < early_blocks ? b : 0][k][i];
      } else {
        L::decode_half2(v_raw[b][k], lut, dh[k]);
      }
    }
    TURBO3_UNROLL
    for (int cb = 0; cb < COL_BLOCKS; ++cb) {
      uint32_t bq[4];
      TURBO3_UNROLL
      for (int k = 0; k < 4; ++k) bq[k] = platform::mul_half2_bits(p_placed[cb][k], norm2[b][k]);
      TURBO3_UNROLL
      for (int kb = 0; kb < 2; ++kb)
        TURBO3_UNROLL
        for (int kk = 0; kk < 4; ++kk) {
          const uint32_t frag[4] = {dh[2 * kb][kk], dh[2 * kb][kk + 4], dh[2 * kb + 1][kk], dh[2 * kb + 1][kk + 4]};
          const uint32_t bb[2] = {bq[2 * kb], bq[2 * kb + 1]};
          platform::mma_m16n8k16(acc[cb][b * 4 + kk], frag, bb);
        }
    }
  }
}

// ---- a warp's keys ------------------------------------------------------------------------------

// The chunks of 16-key groups a warp takes. Every warp of every split of these rows takes chunks of
// the keys [0, kv_end) until none is left, so a warp that runs slower (the other work-group of its
// multiprocessor issues first) takes fewer instead of holding up the end. Chunk ids below
// pair_ids are pairs of groups (chunk c: groups 2c and 2c + 1), the rest single groups (c: group
// pair_ids + c), the last vec_warp_tail_groups per warp of the row set: a warp claims once per two
// groups while much is left, and the warps' loops end within about one group of each other. The
// first two chunks of warp w of split s are chunks s * n_warps + w (so group 0 is staged before the
// Q work) and n_splits * n_warps plus that, both pairs; later ones are 2 * n_splits * n_warps plus a
// counter per row set (the first claim comes just before the group loop). Lane 0 claims the next
// chunk as the current one's first group is staged, so the atomic's latency hides behind a chunk's
// math. A warp's groups only grow: once a group starts at or past kv_end, every later one does.
// With make_vec_context's KV blocks first in launch order, every row set has as many first as
// second work-groups of a multiprocessor. Run-time claims narrow the spread of the work-groups'
// loop ends about fourfold against a fixed key range per split (docs/performance.md, decode).
// Claims by row set in head-major launch order gain nothing: the second work-groups of the SMs
// then all serve the same heads.
// A type of its own because the staging takes the chunks (take_group) and claims.
template <class C>
struct warp_key_chunks {
  unsigned* work_counter;  // the row set's, shared by all its work-groups
  unsigned claimed;        // lane 0: the counter's value for the warp's next claimed chunk
  int first_claimed;       // the id of the counter's value 0
  int pair_ids;            // ids below it are pairs of groups, the rest single groups
  int next_group;          // the group after the one staged last
  int lane;

  // Set in the body, in this order: as member initializers (lane before the chunk ids) they compile
  // to other code.
  TURBO3_DEVICE TURBO3_FORCEINLINE warp_key_chunks(const attention_args& a, const vec_context& x, int head_splits,
                                                   int warp, int lane_) {
    work_counter = a.work_counters + vec_counter_offset(a, x, head_splits);
    claimed = 0;
    const int warps_in_all = a.n_splits * C::n_warps;
    first_claimed = 2 * warps_in_all;
    const int groups = (x.kv_end + C::group - 1) / C::group;
    pair_ids = max(first_claimed, (groups - vec_warp_tail_groups * warps_in_all + 1) / 2);  // the fixed ones pairs
    next_group = 2 * (x.split * C::n_warps + warp);
    lane = lane_;
  }
  // Lane 0 claims the warp's next chunk.
  TURBO3_DEVICE TURBO3_FORCEINLINE void claim() {
    if (lane == 0) claimed = platform::atomic_add(work_counter, 1u);
  }
  // At the staging of the warp's group i: its first key. Where a chunk ends, the next is the warp's
  // second fixed one (group 2) or the claimed one, which claims the next.
  TURBO3_DEVICE TURBO3_FORCEINLINE int take_group(int i) {
    const bool second_of_pair = (next_group & 1) && next_group < 2 * pair_ids;
    if (i > 0 && !second_of_pair) {
      int id;
      if (i == 2) {  // next_group is 2 (s * n_warps + w) + 2
        id = first_claimed / 2 + next_group / 2 - 1;
      } else {
        id = first_claimed + static_cast<int>(platform::shfl(claimed, 0));
        claim();
      }
      next_group = id < pair_ids ? 2 * id : pair_ids + id;
    }
    return (next_group++) * C::group;
  }
};

// ---- staging: a warp's groups into its ring -----------------------------------------------------

// Rows are staged in units of `row_unit` bytes (vec_head_row_unit: 16 where both row strides are
// multiples of 16 and the heads' rows start 4-byte aligned, else the largest of 8 and 4 that divides
// both strides, so every row of a head has the same alignment to it), with asynchronous copies of
// that size, 16 / unit lanes per row (one lane per row and tensor with 16-byte units; a row of
// 50-byte blocks may start inside a unit: the copy then begins at the unit's start, and a last
// partial unit is read alone and zero-filled); vec_row_span: a group's rows as one run of 16-byte
// units; 2: rows are copied in 2-byte units with ordinary loads (correct for any layout, but not
// overlapped).

// f(std::integral_constant<int, unit>{}) for the kernel's row_unit: one copy of f per staging form.
// row_unit is taken by reference: by value, the kernel's unit mask compiles to other code (selects
// for a branch).
template <class F>
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_with_row_unit(const int& row_unit, F f) {
  if (row_unit == 16) f(std::integral_constant<int, 16>{});
  else if (row_unit == 8) f(std::integral_constant<int, 8>{});
  else if (row_unit == 4) f(std::integral_constant<int, 4>{});
  else if (row_unit == vec_row_span) f(std::integral_constant<int, vec_row_span>{});
  else f(std::integral_constant<int, 2>{});
}

// What lane q of a row copies of it (8- and 4-byte copies), fixed for the whole kernel. Rows
// j0 .. j0+n-1 go to row r * pitch + shift.
struct vec_warp_copy_plan {
  int lane_offset;  // of the lane's first unit from the row's start: unit * q - shift
  int last_offset;  // of the source of its last unit from its first (0 where that unit reads nothing)
  int last_bytes;   // of that unit, read from the cache (the rest is zero-filled)
};
// 16-byte copies: lane l copies row l % 16 of K (l < 16) or of V, all of its units from one source
// address (a 64-bit multiply-add per group where 8-byte units take one per pass and tensor), so a
// group is 7 copies per lane at D = 256 instead of 14. They allocate in L1 (async_copy_sized<16>):
// a lane's next unit is the second half of the sector its last one fetched. Copies that bypass L1
// (cp.async.cg) are much slower: each then reads its sector from L2 on its own (docs/performance.md,
// decode).
struct vec_warp_copy16_plan {
  const char* first;  // the lane's tensor's head, moved back to the start of its rows' first unit
  int64_t nb1;
  int dst_offset;     // of the lane's row in a ring slot
  int last_bytes;     // of the last unit, read from the cache (the rest zero-filled)
  int last_unit;      // the index of that unit (a constant where warp_stager::like_rows_16)
};

// A warp's staging in copies of UNIT bytes (16, 8, 4, vec_row_span or 2). A type of its own so that
// what every copy of a group needs (the ring, the lane, the heads and their row strides, the shifts,
// the lane's copy plans) is set up once, in one place, and the copy unit is a template constant:
// each copy of the group loop then holds only its own staging code (one loop holding all the forms
// spreads its hot code far enough for instruction fetches to stall the warps: docs/performance.md,
// decode). The ring pointer, the arguments (row strides) and the context (heads, kv_end) are
// references to the kernel's own: held as values they compile to other code (the strides loaded
// elsewhere, other address arithmetic).
template <class C, int UNIT>
struct warp_stager {
  using KL = typename C::k_layout;
  using VL = typename C::v_layout;
  // K and V rows of one count of 16-byte units from every start: the lanes' copies are alike.
  static constexpr bool like_rows_16 = C::v_in_k ? KL::row_units_16_fixed
                                                : KL::row_units_16 == VL::row_units_16 && KL::row_units_16_fixed &&
                                                      VL::row_units_16_fixed;
  warp_key_chunks<C>& chunks;  // stage() takes each group's first key from it
  unsigned char* const& ring;  // the warp's slot 0; slot k at k * ring_stride
  int lane;
  const attention_args& a;
  const vec_context& x;
  int k_shift, v_shift;               // where the heads' rows start inside their first copy unit
  const platform::half* mask_row;     // masked: the mask row of row lane / 2 (vec_warp_mask_row)
  bool mask_copies;                   // masked: every lane's mask row 16-byte aligned (stage_mask)
  vec_warp_copy_plan k_plan, v_plan;  // 8- and 4-byte copies
  vec_warp_copy16_plan plan_16;       // 16-byte copies

  TURBO3_DEVICE TURBO3_FORCEINLINE warp_stager(warp_key_chunks<C>& chunks_, unsigned char* const& ring_, int lane_,
                                               const attention_args& a_, const vec_context& x_, int k_shift_,
                                               int v_shift_)
      : chunks(chunks_), ring(ring_), lane(lane_), a(a_), x(x_), k_shift(k_shift_), v_shift(v_shift_) {
    if constexpr (C::masked) {
      mask_row = vec_warp_mask_row(a, x, min(lane / 2, C::ROWS - 1));
      mask_copies = !platform::any_in_warp((reinterpret_cast<uintptr_t>(mask_row) & 15u) != 0);
    }
    if constexpr (UNIT == 16) {
      const bool is_v = lane >= 16;
      const int shift = is_v ? v_shift : k_shift;
      // K's value where K and V rows agree (every turbo3 pair), else this lane's side's
      auto side = [&](int k, int v) { return k == v ? k : is_v ? v : k; };
      const int row_bytes = side(KL::row_bytes, VL::row_bytes);
      // the unit that holds the row's last byte: the last to copy (no unit past the row is read)
      const int last_unit = like_rows_16 ? KL::row_units_16 - 1 : (row_bytes + shift - 1) / 16;
      plan_16 = vec_warp_copy16_plan{(is_v ? x.v_head : x.k_head) - shift, is_v ? a.v_nb1 : a.k_nb1,
                                     (is_v ? C::k_tile_bytes : 0) + (lane % 16) * side(KL::pitch, VL::pitch),
                                     row_bytes + shift - 16 * last_unit, last_unit};
    } else if constexpr (UNIT != vec_row_span) {  // a run starts where its group does
      k_plan = plan_of<KL>(k_shift);
      v_plan = plan_of<VL>(v_shift);
    }
  }
  // This lane's plan for rows of layout Lay that start `shift` bytes into their first unit (2: unused).
  template <class Lay>
  TURBO3_DEVICE TURBO3_FORCEINLINE vec_warp_copy_plan plan_of(int shift) const {
    constexpr int unit = UNIT == 2 ? 4 : UNIT, lanes = Lay::copy_lanes_per_row(unit);
    const int q = lane % lanes;
    const int span = Lay::row_bytes + shift;  // bytes from the first unit's start to the row's end
    const int last_bytes = min(max(span - unit * (q + lanes * (Lay::units_per_lane - 1)), 0), unit);
    return vec_warp_copy_plan{unit * q - shift, last_bytes > 0 ? 16 * (Lay::units_per_lane - 1) : 0, last_bytes};
  }

  // The ring offset of the slot after the one at `slot`.
  TURBO3_DEVICE TURBO3_FORCEINLINE static int next_slot(int slot) {
    return slot + C::ring_stride == C::staging_bytes ? 0 : slot + C::ring_stride;
  }

  // The first key of the group in the ring slot at byte offset `slot`, as stage() left it.
  TURBO3_DEVICE TURBO3_FORCEINLINE int group_start(int slot) const {
    return *reinterpret_cast<const int*>(ring + slot + C::slot_start_offset);
  }
  // This warp's group i into the ring slot at byte offset `slot` (that of slot i % stages). Every lane
  // stores the group's first key (one word, one value) and reads it back: no barrier between.
  TURBO3_DEVICE TURBO3_FORCEINLINE void stage(int i, int slot) {
    const int j0 = chunks.take_group(i);
    *reinterpret_cast<int*>(ring + slot + C::slot_start_offset) = j0;
    if (j0 < x.kv_end) {
      if constexpr (C::masked) stage_mask(slot, j0);
      const int n = min(C::group, x.kv_end - j0);
      if constexpr (UNIT == 16) {
        copy_rows_16(slot, j0, n);
      } else if constexpr (UNIT == vec_row_span) {
        copy_span<KL>(slot, x.k_head, k_shift, j0, n);
        if constexpr (!C::v_in_k) copy_span<VL>(slot + C::k_tile_bytes, x.v_head, v_shift, j0, n);
      } else {
        copy_rows<KL>(slot, x.k_head, a.k_nb1, k_plan, j0, n);
        if constexpr (!C::v_in_k) copy_rows<VL>(slot + C::k_tile_bytes, x.v_head, a.v_nb1, v_plan, j0, n);
      }
    }
    platform::async_commit();  // one group per step, empty or not, so the wait count stays exact
  }

  // The mask's values of the group's keys j0 .. j0 + 15 for every row into the slot, mask_pitch
  // bytes a row: lane l takes row l / 2, keys 8 (l % 2) .. + 7, as one 16-byte copy where every
  // row is 16-byte aligned (an engine's mask: rows of a multiple of 256 keys) and nothing past the
  // keys is read (zero-filled), else in ordinary 2-byte loads. Staged with the group, the values
  // are in shared memory before the scores need them: loaded from global memory after the scores,
  // they held up the softmax.
  TURBO3_DEVICE TURBO3_FORCEINLINE void stage_mask(int slot, int j0) {
    if (lane >= 2 * C::ROWS) return;
    const int first = j0 + 8 * (lane % 2);
    const int bytes = 2 * max(0, min(8, a.n_kv - first));
    unsigned char* dst = ring + slot + C::slot_mask_offset + (lane / 2) * C::mask_pitch + 16 * (lane % 2);
    if (mask_copies) {
      platform::async_copy_sized<16>(platform::async_destination_of(dst), mask_row + (bytes > 0 ? first : 0), bytes);
    } else {
      uint16_t* d = reinterpret_cast<uint16_t*>(dst);
      const uint16_t* src = reinterpret_cast<const uint16_t*>(mask_row) + first;
      TURBO3_UNROLL
      for (int k = 0; k < 8; ++k) d[k] = 2 * k < bytes ? src[k] : uint16_t{0};
    }
  }

  // 8- and 4-byte copies: per pass, one source address per lane and its copies at constant offsets
  // from it; a full group (warp-uniform) takes one branch-free path, a partial one (a split's last)
  // another. One lane per unit, or four lanes per row with a branch per pass, take about 140
  // instructions per 16-key group for K's and V's staging (docs/performance.md, decode).
  template <class Lay>
  TURBO3_DEVICE TURBO3_FORCEINLINE void copy_pass(platform::async_destination d, const char* head, int64_t nb1,
                                                  const vec_warp_copy_plan& plan, int j0, int row, int pass) {
    constexpr int rows_per_pass = Lay::copy_rows_per_pass(UNIT), per_lane = Lay::units_per_lane;
    const char* src = head + static_cast<int64_t>(j0 + row + pass * rows_per_pass) * nb1 + plan.lane_offset;
    const platform::async_destination dp = d + pass * rows_per_pass * Lay::pitch;
    TURBO3_UNROLL
    for (int u = 0; u + 1 < per_lane; ++u) platform::async_copy<UNIT>(dp + 16 * u, src + 16 * u);
    platform::async_copy_sized<UNIT>(dp + 16 * (per_lane - 1), src + plan.last_offset, plan.last_bytes);
  }
  template <class Lay>
  TURBO3_DEVICE TURBO3_FORCEINLINE void copy_units(int dst_offset, const char* head, int64_t nb1,
                                                   const vec_warp_copy_plan& plan, int j0, int n) {
    constexpr int lanes = Lay::copy_lanes_per_row(UNIT), rows_per_pass = Lay::copy_rows_per_pass(UNIT);
    const int row = lane / lanes;
    const platform::async_destination d =
        platform::async_destination_of(ring) + dst_offset + row * Lay::pitch + UNIT * (lane % lanes);
    if (n == C::group) {
      TURBO3_UNROLL
      for (int pass = 0; pass < C::group / rows_per_pass; ++pass) copy_pass<Lay>(d, head, nb1, plan, j0, row, pass);
    } else {
      TURBO3_UNROLL
      for (int pass = 0; pass < C::group / rows_per_pass; ++pass)
        if (row + pass * rows_per_pass < n) copy_pass<Lay>(d, head, nb1, plan, j0, row, pass);
    }
  }
  // Rows j0 .. j0 + n - 1 of a head (rows of layout Lay): 8- or 4-byte copies, or (2) ordinary
  // 2-byte loads.
  template <class Lay>
  TURBO3_DEVICE TURBO3_FORCEINLINE void copy_rows(int dst_offset, const char* head, int64_t nb1,
                                                  const vec_warp_copy_plan& plan, int j0, int n) {
    if constexpr (UNIT == 8 || UNIT == 4) {
      copy_units<Lay>(dst_offset, head, nb1, plan, j0, n);
    } else {
      unsigned char* dst = ring + dst_offset;
      for (int r = lane / Lay::lanes_per_row_2; r < n; r += Lay::rows_per_pass_2) {
        const uint16_t* src = reinterpret_cast<const uint16_t*>(head + static_cast<int64_t>(j0 + r) * nb1);
        uint16_t* d = reinterpret_cast<uint16_t*>(dst + r * Lay::pitch);
        for (int c = lane % Lay::lanes_per_row_2; c < Lay::row_bytes / 2; c += Lay::lanes_per_row_2) d[c] = src[c];
      }
    }
  }
  // 16-byte copies (vec_warp_copy16_plan): this lane's row of K or V (V in K: lanes 0-15 copy K's).
  TURBO3_DEVICE TURBO3_FORCEINLINE void copy_rows_16(int slot, int j0, int n) {
    const int row = lane % 16;
    if (row < n && (!C::v_in_k || lane < 16)) {
      const char* src = plan_16.first + static_cast<int64_t>(j0 + row) * plan_16.nb1;
      const platform::async_destination d = platform::async_destination_of(ring) + slot + plan_16.dst_offset;
      if constexpr (like_rows_16) {
        TURBO3_UNROLL
        for (int u = 0; u + 1 < KL::row_units_16; ++u) platform::async_copy_sized<16>(d + 16 * u, src + 16 * u, 16);
        platform::async_copy_sized<16>(d + 16 * (KL::row_units_16 - 1), src + 16 * (KL::row_units_16 - 1),
                                       plan_16.last_bytes);
      } else {  // each lane copies its row's units: the whole ones, then the last
        constexpr int most_units = KL::row_units_16 > VL::row_units_16 ? KL::row_units_16 : VL::row_units_16;
        TURBO3_UNROLL
        for (int u = 0; u + 1 < most_units; ++u)
          if (u < plan_16.last_unit) platform::async_copy_sized<16>(d + 16 * u, src + 16 * u, 16);
        platform::async_copy_sized<16>(d + 16 * plan_16.last_unit, src + 16 * plan_16.last_unit, plan_16.last_bytes);
      }
    }
  }
  // Span staging: rows j0 .. j0 + n - 1 of a head whose rows lie back to back, from the 16-byte
  // unit holding the first byte (`shift` bytes before it), in 16-byte units over the warp's lanes;
  // the last unit in copies that end with the span (the span may end the allocation: a 16-byte
  // copy of a shorter source is a 16-byte read to the memory checker).
  template <class Lay>
  TURBO3_DEVICE TURBO3_FORCEINLINE void copy_span(int slot, const char* head, int shift, int j0, int n) {
    const char* first = head + static_cast<int64_t>(j0) * Lay::row_bytes - shift;
    const int bytes = n * Lay::row_bytes + shift;
    const platform::async_destination d = platform::async_destination_of(ring) + slot;
    TURBO3_UNROLL
    for (int u0 = 0; u0 < Lay::span_units; u0 += 32) {
      const int u = u0 + lane;
      if (u < Lay::span_units && 16 * u < bytes) {
        const int left = bytes - 16 * u;
        if (left >= 16) {
          platform::async_copy_sized<16>(d + 16 * u, first + 16 * u, 16);
        } else {
          // 16-, 8- and 4-byte copies, then a last half word with an ordinary load: even a
          // 4-byte copy of a 2-byte source reads 4 bytes to the memory checker
          const int words = left & ~3;
          platform::async_copy_head_of16(d + 16 * u, first + 16 * u, words);
          if (left & 2)
            *reinterpret_cast<uint16_t*>(ring + slot + 16 * u + words) =
                *reinterpret_cast<const uint16_t*>(first + 16 * u + words);
        }
      }
    }
  }
};

// ---- merge the warps ----------------------------------------------------------------------------

// Each warp writes its rows into its own ring slots as soon as its loop ends (the other warps may
// still be running theirs), so after the barrier only the combine is left: a thread per 4 values of
// a row, one 16-byte load per warp and one 16-byte store of the partial row. Rows written after the
// barrier would store with a 4-way bank conflict, every warp at once (docs/performance.md, decode).

// Row r of warp w in the ring: D values, then the maximum and the sum.
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE float* vec_warp_merge_row(unsigned char* smem, int w, int r) {
  return reinterpret_cast<float*>(smem + w * C::stage_bytes + (r / C::merge_rows_per_slot) * C::ring_stride +
                                  (r % C::merge_rows_per_slot) * C::merge_pitch * 4);
}

// This warp's rows: row 4 cb + t of O'^T's column block cb, and the maxima and sums of score rows
// 8n + 2t and 8n + 2t + 1 of each score set n (the sums first reduced over the key lanes).
template <class C, int COL_BLOCKS>
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_write_rows(unsigned char* smem,
                                                          const float (&acc)[COL_BLOCKS][C::blocks * 4][4],
                                                          const float (&m_run)[C::score_sets][2],
                                                          float (&l_run)[C::score_sets][2], const vec_context& x,
                                                          int warp, int g, int t) {
  using L = typename C::v_side;
  constexpr int D = C::blocks * block_values, v_tiles = C::blocks * 4;
  TURBO3_UNROLL
  for (int set = 0; set < C::score_sets; ++set)
    TURBO3_UNROLL
    for (int e = 0; e < 2; ++e)
      TURBO3_UNROLL
      for (int o = 4; o < 32; o *= 2) l_run[set][e] += platform::shfl_xor(l_run[set][e], o);
  TURBO3_UNROLL
  for (int cb = 0; cb < COL_BLOCKS; ++cb) {
    if (4 * cb + t < x.active_rows) {
      float* row = vec_warp_merge_row<C>(smem, warp, 4 * cb + t);
      TURBO3_UNROLL
      for (int m = 0; m < v_tiles; ++m) {
        const int c = 8 * (m / 4) + g, kk = m % 4;
        float* chunk = row + c * kv::chunk_values;
        chunk[L::value_of_slot(2 * kk)] = acc[cb][m][0];
        chunk[L::value_of_slot(2 * kk + 1)] = acc[cb][m][1];
        chunk[L::value_of_slot(2 * kk + 8)] = acc[cb][m][2];
        chunk[L::value_of_slot(2 * kk + 9)] = acc[cb][m][3];
      }
    }
  }
  if (g == 0) {
    TURBO3_UNROLL
    for (int set = 0; set < C::score_sets; ++set)
      TURBO3_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int r = 8 * set + 2 * t + e;
        if (r < x.active_rows) {
          float* row = vec_warp_merge_row<C>(smem, warp, r);
          row[D] = m_run[set][e];
          row[D + 1] = l_run[set][e];
        }
      }
  }
}

// After the barrier: the split's partial rows, the warps' rows combined. The sums v are an array:
// as a float4 they compile to the same instructions on other registers.
template <class C>
TURBO3_DEVICE TURBO3_FORCEINLINE void vec_warp_combine_warps(const attention_args& a, const vec_context& x,
                                                             unsigned char* smem, int blocks_per_seq, int tid) {
  constexpr int D = C::blocks * block_values, quads = D / 4;
  for (int idx = tid; idx < x.active_rows * quads; idx += C::threads) {
    const int r = idx / quads, d = 4 * (idx % quads);
    float m_w[C::n_warps], m_all = -INFINITY;
    TURBO3_UNROLL
    for (int w = 0; w < C::n_warps; ++w) {
      m_w[w] = vec_warp_merge_row<C>(smem, w, r)[D];
      m_all = fmaxf(m_all, m_w[w]);
    }
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f}, l = 0.0f;
    TURBO3_UNROLL
    for (int w = 0; w < C::n_warps; ++w) {
      if (m_w[w] == -INFINITY) continue;  // no visible key in that warp's groups
      const float s = platform::exp2_fast(m_w[w] - m_all);
      const float* row = vec_warp_merge_row<C>(smem, w, r);
      const float4 u = *reinterpret_cast<const float4*>(row + d);
      v[0] += s * u.x, v[1] += s * u.y, v[2] += s * u.z, v[3] += s * u.w;
      l += s * row[D + 1];
    }
    float* dst = a.partial + vec_partial_row(a, x.seq, x.kv_block, x.q_tile, x.split, blocks_per_seq, C::ROWS, r, D);
    *reinterpret_cast<float4*>(dst + d) = make_float4(v[0], v[1], v[2], v[3]);
    if (d == 0) dst[D] = m_all, dst[D + 1] = l;
  }
}

// MASKED: the call has a mask (a separate instantiation keeps the common unmasked softmax free of
// mask loads and their branches). COL_BLOCKS: the value side's column blocks of 4 query rows, 1 where the
// work-group has at most 4 rows (half the accumulators and value multiplies of 2). WARPS: 4 or 6
// (vec_warp_warps). KS, VS: the K and V sides (vec_warp_sides.hpp). DK: K's head dim where it is not
// V's D (the V-in-K form, vec_warp_v_in_k_dims). Shared memory is dynamic, C::smem_bytes (64.5 KB
// for turbo3 with 6 warps at D = 256).
template <int D, bool MASKED, int COL_BLOCKS, int WARPS, class KS, class VS, int DK = D>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS_RESIDENT(32 * WARPS, (vec_warp_min_blocks_of<D, WARPS, KS, VS, COL_BLOCKS>))
    vec_warp_kernel(attention_args a, int head_splits) {
  using C = vec_warp_kernel_config<D, COL_BLOCKS, WARPS, KS, VS, DK, MASKED>;
  constexpr int S = C::score_sets;
  using KL = typename C::k_layout;
  using VL = typename C::v_layout;
  constexpr int ROWS = C::ROWS;
  constexpr int G = C::group;
  extern __shared__ __align__(16) unsigned char smem[];

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const vec_context x = make_vec_context(a, head_splits, true);
  warp_queries<C> queries;
  queries.load(a, x, warp, lane);
  // V in K: V's view has K's rows, strides and head (vec_supported), so the run test sees K's rows.
  const int row_unit =
      vec_head_row_unit(a.k_nb1, a.v_nb1, x.k_head, x.v_head, KL::row_bytes, C::v_in_k ? KL::row_bytes : VL::row_bytes);
  // turbo3's lookup tables stay kernel arguments (turbo2's and turbo4's are constants): kept in
  // registers (lut_in_registers) the kernel issues 3% fewer instructions and is no faster
  // (docs/performance.md, decode).
  const turbo3_lut& lut = a.lut;

  const int blocks_per_seq = a.n_head_kv * head_splits;
  warp_key_chunks<C> chunks(a, x, head_splits, warp, lane);  // this warp's keys
  unsigned char* ring = smem + warp * C::stage_bytes;         // this warp's slot 0; slot k at k * ring_stride
  // Where a row starts inside its first copy unit (the same for every row of a head; with span
  // staging, where each group's run starts: a group is 16 rows, a multiple of 16 bytes).
  const int unit_mask = row_unit == 16 ? 12 : row_unit == 8 ? 6 : row_unit == 4 ? 2 : row_unit == vec_row_span ? 15 : 0;
  const int k_shift = static_cast<int>(reinterpret_cast<uintptr_t>(x.k_head) & unit_mask);
  const int v_shift = static_cast<int>(reinterpret_cast<uintptr_t>(x.v_head) & unit_mask);
  // The windows of score rows 8n + 2t and 8n + 2t + 1 of each score set n (vec_warp_row_windows).
  int key_limit[S][2];
  float row_slope[S][2];
  TURBO3_UNROLL
  for (int set = 0; set < S; ++set) vec_warp_row_windows(key_limit[set], row_slope[set], a, x, t, 8 * set);

  float m_run[S][2], l_run[S][2];
  TURBO3_UNROLL
  for (int set = 0; set < S; ++set) m_run[set][0] = m_run[set][1] = -INFINITY, l_run[set][0] = l_run[set][1] = 0.0f;
  // O'^T per value column block cb (the file's head): acc[cb][b * 4 + kk] holds row 4 cb + t, pairs
  // kk (elements 0, 1) and kk + 4 (2, 3) of chunk g of block b.
  constexpr int v_tiles = C::blocks * 4;
  float acc[COL_BLOCKS][v_tiles][4];
  TURBO3_UNROLL
  for (int cb = 0; cb < COL_BLOCKS; ++cb)
    TURBO3_UNROLL
    for (int m = 0; m < v_tiles; ++m)
      TURBO3_UNROLL
      for (int i = 0; i < 4; ++i) acc[cb][m][i] = 0.0f;
  // The byte permute that moves half (g / 2) % 2 of a (row 2u, row 2u + 1) pair into half g % 2 and
  // zeroes the other (bytes 4-7 of the permute's pair are a zero word).
  const uint32_t half_lo = 2u * ((g >> 1) & 1), half_hi = half_lo + 1u;  // the pair's bytes of row 4 cb + g / 2
  const uint32_t place_sel = (g & 1) ? 0x0044u | half_lo << 8 | half_hi << 12 : half_lo | half_hi << 4 | 0x4400u;

  // Group 0 goes out before the Q work, so its copies land while Q loads and rotates.
  vec_warp_with_row_unit(row_unit, [&](auto unit_c) {
    warp_stager<C, decltype(unit_c)::value>(chunks, ring, lane, a, x, k_shift, v_shift).stage(0, 0);
  });
  // ---- Q fragments (B operand of the scores), in registers (vec_warp_load_q) -------------------
  vec_warp_q_frags<C> q_frag;
  vec_warp_q_bytes_of<C> q_hi, q_lo;
  float score_unit[2] = {1.0f, 1.0f};
  vec_warp_load_q(q_frag, q_hi, q_lo, score_unit, queries, a, smem, lut, warp, lane, g, t);
  const uint2* q_smem = reinterpret_cast<const uint2*>(smem + C::q_smem_offset) + lane;

  // ---- the group loop, one copy per staging form (vec_warp_with_row_unit) -----------------------
  vec_warp_with_row_unit(row_unit, [&](auto unit_c) {
    constexpr int unit = decltype(unit_c)::value;
    warp_stager<C, unit> stager(chunks, ring, lane, a, x, k_shift, v_shift);
    // Staged rows lie row_bytes apart in a run, a slot's pitch apart otherwise.
    constexpr int k_row_pitch = unit == vec_row_span ? KL::row_bytes : KL::pitch;
    constexpr int v_row_pitch = C::v_in_k ? k_row_pitch : unit == vec_row_span ? VL::row_bytes : VL::pitch;
    TURBO3_UNROLL
    for (int i = 1; i < C::stages - 1; ++i) stager.stage(i, i * C::ring_stride);
    // The first claim, only now: it is first taken by the staging of group 4, two groups later.
    // Issued at the kernel's start, its atomic queues ahead of the Q work and the first copies
    // (docs/performance.md, decode).
    chunks.claim();

    int use_slot = 0, fill_slot = (C::stages - 1) * C::ring_stride;  // ring offsets of groups i and i + stages - 1
    for (int i = 0;; ++i) {
      const int j0 = stager.group_start(use_slot);
      if (j0 >= x.kv_end) break;  // warp-uniform
      stager.stage(i + C::stages - 1, fill_slot);
      fill_slot = stager.next_slot(fill_slot);
      platform::async_wait<C::stages - 1>();
      platform::sync_warp();
      const char* k_tile = reinterpret_cast<const char*>(ring + use_slot) + k_shift;
      const char* v_tile = C::v_in_k ? k_tile : reinterpret_cast<const char*>(ring + use_slot) + C::k_tile_bytes + v_shift;
      // masked: score rows 2t and 2t + 1 of the first set in the slot's staged mask values
      const platform::half* mask_rows =
          reinterpret_cast<const platform::half*>(ring + use_slot + C::slot_mask_offset + 2 * t * C::mask_pitch);
      use_slot = stager.next_slot(use_slot);
      const int n = min(G, x.kv_end - j0);

      // The value phase's packed bits, read now so their latency hides behind the scores.
      typename VS::raw_chunk v_raw[C::blocks][4];
      TURBO3_UNROLL
      for (int b = 0; b < C::blocks; ++b) {
        TURBO3_UNROLL
        for (int k = 0; k < 4; ++k)
          v_raw[b][k] = vec_warp_load_chunk<VS, unit>(v_tile + vec_warp_value_key(k, t) * v_row_pitch, b, g);
      }

      // ---- scores (16 keys x 8 rows per set); rows past n hold stale bytes and are masked below --
      // The rows of keys g and g + 8, here: computed in vec_warp_scores, they take other address
      // arithmetic.
      const char* row_a = k_tile + g * k_row_pitch;
      const char* row_b = row_a + 8 * k_row_pitch;
      float s[S][4] = {};  // per set n: (key g, row 8n + 2t), (g, 8n + 2t+1), (g+8, 8n + 2t), (g+8, 8n + 2t+1)
      vec_warp_scores<C, unit>(s, row_a, row_b, q_frag, q_smem, q_hi, q_lo, score_unit, lut, t);

      vec_warp_early_values<C> v_early;
      vec_warp_decode_early<C>(v_early, v_raw, lut);

      // ---- online softmax, in registers: row max over the 16 keys is a reduction over g ---------
      TURBO3_UNROLL
      for (int set = 0; set < S; ++set)
        vec_warp_mask_scores<MASKED, C::mask_pitch>(s[set], a, key_limit[set],
                                                    mask_rows + set * 8 * (C::mask_pitch / 2), row_slope[set], j0, g);
      // The running maxima are reference points, not exact maxima: where no score of the group
      // exceeds its row's by more than C::max_slack (one vote), they stay, alpha is 1, and the
      // reduction over the key lanes and the rescale of O are skipped; p then reaches at most
      // 2^C::max_slack, at fp16's full precision. Over 16 rows some exact maximum
      // grows in most groups, so the exact form rescaled 128 accumulators a lane in most groups
      // (docs/performance.md, decode). This update stays in the kernel: as a function it compiles
      // to other code (the vote's condition without the branch where it short-circuits, other
      // register moves).
      float p[S][4], alpha[S][2];
      bool grows = false;
      // lane l checks the V norm of key l % 16 in blocks l / 16, l / 16 + 2, ... (rows past n hold
      // stale bytes: at worst an exact update more)
      if constexpr (C::max_slack > 0.0f) {
        TURBO3_UNROLL
        for (int b = lane / 16; b < C::blocks; b += 2)
          grows = grows || C::v_side::scale_bits(v_tile + (lane % 16) * v_row_pitch, b) > vec_warp_slack_norm_bits;
      }
      TURBO3_UNROLL
      for (int set = 0; set < S; ++set)
        if (!grows) {
          const float cap0 = vec_warp_max_cap<C>(m_run[set][0]), cap1 = vec_warp_max_cap<C>(m_run[set][1]);
          grows = s[set][0] > cap0 || s[set][2] > cap0 || s[set][1] > cap1 || s[set][3] > cap1;
        }
      const bool update = platform::any_in_warp(grows);
      TURBO3_UNROLL
      for (int set = 0; set < S; ++set)
        TURBO3_UNROLL
        for (int e = 0; e < 2; ++e) {
          float m_new = m_run[set][e];
          alpha[set][e] = 1.0f;
          if (update) {  // warp-uniform
            float mx = fmaxf(s[set][e], s[set][e + 2]);
            TURBO3_UNROLL
            for (int o = 4; o < 32; o *= 2) mx = fmaxf(mx, platform::shfl_xor(mx, o));
            m_new = fmaxf(m_run[set][e], mx);
            alpha[set][e] = m_new == -INFINITY ? 1.0f : platform::exp2_fast(m_run[set][e] - m_new);
          }
          const float m_ref = m_new == -INFINITY ? 0.0f : m_new;  // no visible key yet: exp2(-inf) = 0
          p[set][e] = platform::exp2_fast(s[set][e] - m_ref);
          p[set][e + 2] = platform::exp2_fast(s[set][e + 2] - m_ref);
          l_run[set][e] = l_run[set][e] * alpha[set][e] + p[set][e] + p[set][e + 2];
          m_run[set][e] = m_new;
        }

      vec_warp_rescale<C>(acc, alpha, update, t);
      vec_warp_accumulate_values<v_row_pitch, C>(acc, p, v_raw, v_early, v_tile, n, lut, place_sel, g, t);
      platform::sync_warp();  // the ring slot is rewritten by a later step
    }
  });
  platform::async_wait<0>();
  platform::sync_warp();  // the warp's copies have landed and every lane is past its last reads

  // ---- merge the warps (vec_warp_write_rows, then vec_warp_combine_warps) ------------------------
  vec_warp_write_rows<C>(smem, acc, m_run, l_run, x, warp, g, t);
  platform::sync_threads();
  vec_warp_combine_warps<C>(a, x, smem, blocks_per_seq, tid);
  merge_splits_if_last<D, ROWS, C::threads, C::merge_groups_at_once>(a, x, head_splits, tid);
}

}  // namespace detail
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
