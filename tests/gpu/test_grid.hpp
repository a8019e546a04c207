// The NMSE test grids of the attention kernels, each defined once: a generator of cases (shapes x
// K/V types x mask, causal, GQA and the other options). A kernel family's tests run a grid through
// their own kernel choice (test_mma.cu and test_tile.cu: the prefill grids; test_vec.cu: the
// decode grids and the two shared with prefill), each test case from its own random stream, the
// inputs of each case drawn as it runs, in the grid's order.
#pragma once

#include <initializer_list>
#include <vector>

#include "attention_problem.hpp"

namespace turbo3_test {

// One case of a grid: the problem, the VEC split count it asks for (launch_options::kv_splits; 0:
// the device's choice), and whether it is in the grid's sampled subset, which a family's second,
// slower route runs too (TILE: materialize; VEC's warp grid: the scalar kernel).
struct grid_case {
  attention_case c;
  int kv_splits = 0;
  bool sampled = true;
};
using case_grid = std::vector<grid_case>;

inline constexpr turbo3::data_type kv_types[2] = {turbo3::data_type::f16, turbo3::data_type::turbo3};

// ---- grids of the prefill and decode families ------------------------------------------------------

// D = 128, GQA 1 / 4 / 12 over 4 KV heads, n_kv 113 / 512 / 1024, n_q from `n_qs`. The options
// cycle (none; mask; mask and sinks; mask and ALiBi; mask, sinks and softcap; causal), and so do
// the K/V types, the Q and output types and the output layout, so every combination of GQA, n_kv
// and n_q sees a different mix; `causal_with_mask`: the mask-only cases are causal too. A case
// with an f16 K or V is followed by its twin with turbo3 K and V, the reason this library exists.
// Sampled: every third case, and another third of the twins.
inline case_grid options_grid(std::initializer_list<int> n_qs, bool causal_with_mask) {
  using turbo3::data_type;
  case_grid g;
  int variant = 0;
  for (int gqa : {1, 4, 12})
    for (int n_kv : {113, 512, 1024})
      for (int n_q : n_qs) {
        attention_case c;
        c.head_dim = 128;
        c.n_head_kv = 4;
        c.n_head = 4 * gqa;
        c.n_kv = n_kv;
        c.n_q = n_q;
        const int opt = variant++ % 6;
        c.mask = opt != 0 && opt != 5;
        c.sinks = opt == 2 || opt == 4;
        c.max_bias = opt == 3 ? 8.0f : 0.0f;
        c.softcap = opt == 4 ? 2.0f : 0.0f;
        c.causal = opt == 5 || (causal_with_mask && opt == 1);
        c.k_type = kv_types[(variant / 2) % 2];
        c.v_type = kv_types[variant % 2];
        c.q_type = variant % 3 == 0 ? data_type::f16 : data_type::f32;
        c.out_type = variant % 5 == 0 ? data_type::f16 : data_type::f32;
        c.permuted_out = variant % 2 == 0;
        g.push_back({c, 0, variant % 3 == 0});
        if (c.k_type != data_type::turbo3 || c.v_type != data_type::turbo3) {
          c.k_type = c.v_type = data_type::turbo3;
          g.push_back({c, 0, variant % 3 == 1});
        }
      }
  return g;
}

// Every K/V pair under both codebooks and both rotation modes (the library rotates Q and un-rotates
// the output, or the caller does), at each head dim of `dims`: 8 query heads over 2, n_q queries
// over n_kv keys, a random mask; `causal_when_library_rotates`: causal where the library rotates.
inline case_grid codebook_rotation_grid(std::initializer_list<int> dims, int n_q, int n_kv,
                                        bool causal_when_library_rotates) {
  using turbo3::codebook;
  case_grid g;
  for (int d : dims)
    for (codebook cb : {codebook::lloyd_max, codebook::legacy})
      for (bool library_rotates : {true, false})
        for (turbo3::data_type kt : kv_types)
          for (turbo3::data_type vt : kv_types) {
            attention_case c;
            c.head_dim = d;
            c.n_head = 8;
            c.n_head_kv = 2;
            c.n_q = n_q;
            c.n_kv = n_kv;
            c.cb = cb;
            c.library_rotates = library_rotates;
            c.k_type = kt;
            c.v_type = vt;
            c.mask = true;
            c.causal = causal_when_library_rotates && library_rotates;
            g.push_back({c});
          }
  return g;
}

// ---- prefill grids (MMA, TILE) ----------------------------------------------------------------------

// The seed's twelve cases: D = 256, 16 query heads over 4, a random mask, n_kv 512 / 1024 x n_q
// 3 / 4 / 6 / 64 / 128 / 256.
inline case_grid seed_grid() {
  case_grid g;
  for (int n_kv : {512, 1024})
    for (int n_q : {3, 4, 6, 64, 128, 256}) {
      attention_case c;
      c.head_dim = 256;
      c.n_head = 16;
      c.n_head_kv = 4;
      c.n_kv = n_kv;
      c.n_q = n_q;
      c.mask = true;
      g.push_back({c});
    }
  return g;
}

// Odd lengths: n_q and n_kv each in 3, 9, 27, 81, 129, 257, 1000 at D = 128, 2 query heads over 1;
// causal, mask and the K/V types cycle. Sampled: every fourth case.
inline case_grid prefill_odd_lengths_grid() {
  case_grid g;
  const int lengths[] = {3, 9, 27, 81, 129, 257, 1000};
  int variant = 0;
  for (int n_q : lengths)
    for (int n_kv : lengths) {
      attention_case c;
      c.head_dim = 128;
      c.n_head = 2;
      c.n_head_kv = 1;
      c.n_q = n_q;
      c.n_kv = n_kv;
      c.causal = variant % 2 == 0;
      c.mask = variant % 3 != 0;
      c.k_type = kv_types[(variant / 2) % 2];
      c.v_type = kv_types[(variant / 4) % 2];
      g.push_back({c, 0, variant % 4 == 0});
      ++variant;
    }
  return g;
}

// f16 K and V at D = 64 (turbo3 needs D % 128 == 0): GQA 1 and 16 over 2 KV heads, 70 queries over
// 333 keys, two sequences, mask and sinks.
inline case_grid f16_d64_grid() {
  case_grid g;
  for (int gqa : {1, 16}) {
    attention_case c;
    c.head_dim = 64;
    c.n_head = 2 * gqa;
    c.n_head_kv = 2;
    c.n_q = 70;
    c.n_kv = 333;
    c.n_seq = 2;
    c.k_type = c.v_type = turbo3::data_type::f16;
    c.mask = true;
    c.sinks = true;
    g.push_back({c});
  }
  return g;
}

// GQA 8 and 16 at D = 256 over 2 KV heads, 19 queries over 400 keys, two sequences, causal, sinks,
// f16 queries and output.
inline case_grid gqa_sequences_grid() {
  case_grid g;
  for (int gqa : {8, 16}) {
    attention_case c;
    c.head_dim = 256;
    c.n_head = 2 * gqa;
    c.n_head_kv = 2;
    c.n_q = 19;
    c.n_kv = 400;
    c.n_seq = 2;
    c.sinks = true;
    c.causal = true;
    c.out_type = turbo3::data_type::f16;
    c.q_type = turbo3::data_type::f16;
    g.push_back({c});
  }
  return g;
}

// D = 512 prefill (TILE, also under materialize's dense f16 call: no MMA kernel has this head
// dim): every K/V pair at GQA 1, 4 and 8 over 2 KV heads. n_q 37 and 70 over n_kv 61 and 300
// leave ragged query tiles (32 rows on NVIDIA, 16 on AMD) and key tiles (32 and 8 keys); the
// options cycle (mask; mask and sinks; causal; mask, ALiBi and causal; softcap), and so do the Q
// and output types, the output layout, the rotation mode and the codebook. Then turbo3 under
// ggml's causal mask and a sliding window with hidden rows (visible ends), and two sequences.
// Sampled: every third case of the pairs.
inline case_grid prefill_d512_grid() {
  using turbo3::data_type;
  case_grid g;
  int variant = 0;
  for (data_type kt : kv_types)
    for (data_type vt : kv_types)
      for (int gqa : {1, 4, 8}) {
        attention_case c;
        c.head_dim = 512;
        c.n_head_kv = 2;
        c.n_head = 2 * gqa;
        c.n_q = variant % 2 == 0 ? 37 : 70;
        c.n_kv = variant % 4 < 2 ? 61 : 300;
        const int opt = variant % 5;
        c.mask = opt == 0 || opt == 1 || opt == 3;
        c.sinks = opt == 1;
        c.causal = opt == 2 || opt == 3;
        c.max_bias = opt == 3 ? 8.0f : 0.0f;
        c.softcap = opt == 4 ? 2.0f : 0.0f;
        c.k_type = kt;
        c.v_type = vt;
        c.q_type = variant % 3 == 1 ? data_type::f16 : data_type::f32;
        c.out_type = variant % 4 == 2 ? data_type::f16 : data_type::f32;
        c.permuted_out = variant % 2 == 1;
        c.library_rotates = variant % 4 != 3;
        c.cb = variant % 6 == 5 ? turbo3::codebook::legacy : turbo3::codebook::lloyd_max;
        g.push_back({c, 0, variant % 3 == 0});
        ++variant;
      }
  using kind = attention_case::mask_kind;
  for (const mask_shape& sh : {mask_shape{100, 100, kind::causal, 0, false}, mask_shape{90, 90, kind::window, 20, true}})
    g.push_back({structured_mask_case(512, data_type::turbo3, sh), 0, false});
  attention_case c;
  c.head_dim = 512;
  c.n_head = 8;
  c.n_head_kv = 2;
  c.n_q = 20;
  c.n_kv = 150;
  c.n_seq = 2;
  c.sinks = true;
  c.causal = true;
  g.push_back({c, 0, false});
  return g;
}

// The grids every prefill route runs through its own kernel choice (TILE and MMA), each from its
// own random stream (`salt`).
struct named_grid {
  const char* name;
  uint64_t salt;
  case_grid grid;
};
inline std::vector<named_grid> prefill_route_grids() {
  return {{"the seed's twelve cases (D=256, 16 heads over 4, mask)", 0x7113, seed_grid()},
          {"D=128 grid (GQA 1/4/12, n_kv 113/512/1024, n_q 3/32/75, options)", 0x7128,
           options_grid({3, 32, 75}, /*causal_with_mask=*/true)},
          {"odd lengths (n_q and n_kv in 3..1000), causal and masked", 0x70dd, prefill_odd_lengths_grid()},
          {"every K/V pair, both codebooks and both rotation modes, D=128/256", 0x7cb,
           codebook_rotation_grid({128, 256}, 37, 300, /*causal_when_library_rotates=*/true)},
          {"GQA 16 and GQA 8 at D=256, two sequences, sinks, f16 out", 0x7916, gqa_sequences_grid()}};
}

// run_grid(grid, rng) over prefill_route_grids(), each grid named in the failures it reports.
template <class RunGrid>
void run_prefill_route_grids(RunGrid&& run_grid) {
  for (const named_grid& g : prefill_route_grids()) {
    INFO(g.name);
    std::mt19937_64 rng(run_seed() ^ g.salt);
    run_grid(g.grid, rng);
  }
}

// Masks with structure (what ggml passes: -inf past each query's diagonal; a sliding window; some
// rows hidden entirely; structured_mask_case), each head dim of `dims` x K/V type of `types` (K
// and V alike) x shape of `shapes`.
inline case_grid structured_mask_grid(std::initializer_list<int> dims, std::initializer_list<turbo3::data_type> types,
                                      std::initializer_list<mask_shape> shapes) {
  case_grid g;
  for (int d : dims)
    for (turbo3::data_type t : types)
      for (const mask_shape& sh : shapes) g.push_back({structured_mask_case(d, t, sh)});
  return g;
}

// Small cases for compute-sanitizer (memcheck and racecheck are slow): every K/V pair at each head
// dim of `dims` (D = 64: f16 only), 6 query heads over 2, 27 queries over 81 keys (ragged tiles),
// causal with a mask, sinks.
inline case_grid sanitizer_grid(std::initializer_list<int> dims) {
  using turbo3::data_type;
  case_grid g;
  for (int d : dims)
    for (data_type kt : kv_types)
      for (data_type vt : kv_types) {
        if (d == 64 && (kt != data_type::f16 || vt != data_type::f16)) continue;
        attention_case c;
        c.head_dim = d;
        c.n_head = 6;
        c.n_head_kv = 2;
        c.n_q = 27;
        c.n_kv = 81;
        c.k_type = kt;
        c.v_type = vt;
        c.mask = true;
        c.causal = true;
        c.sinks = true;
        g.push_back({c});
      }
  return g;
}

// causal_tiles_case (several query and key tiles, ragged at both ends) for each K/V type of `types`
// and each of `ggml_masks` (false: the causal flag; true: ggml's causal mask in its place).
inline case_grid causal_tiles_grid(std::initializer_list<turbo3::data_type> types,
                                   std::initializer_list<bool> ggml_masks) {
  case_grid g;
  for (turbo3::data_type t : types)
    for (bool ggml_mask : ggml_masks) g.push_back({causal_tiles_case(t, ggml_mask)});
  return g;
}

// Tiles ragged everywhere: n_q = 45 not a multiple of the queries per work-group, n_kv = 191 not a
// multiple of the key tile, GQA 12 (24 query heads over 2: rows per work-group not a multiple of the
// heads), f16 queries, a mask with ALiBi or softcap, causal or not, permuted output; every K/V pair
// at D = 256.
inline case_grid ragged_grid() {
  case_grid g;
  int variant = 0;
  for (turbo3::data_type kt : kv_types)
    for (turbo3::data_type vt : kv_types) {
      attention_case c;
      c.head_dim = 256;
      c.n_head = 24;
      c.n_head_kv = 2;
      c.n_q = 45;
      c.n_kv = 191;
      c.k_type = kt;
      c.v_type = vt;
      c.mask = true;
      c.max_bias = variant % 2 == 0 ? 8.0f : 0.0f;
      c.softcap = variant % 2 == 1 ? 2.0f : 0.0f;
      c.causal = variant >= 2;
      c.q_type = turbo3::data_type::f16;
      c.permuted_out = true;
      g.push_back({c});
      ++variant;
    }
  return g;
}

// ---- decode grids (VEC) -----------------------------------------------------------------------------

// D = 256, 16 query heads over 4 and 8 KV heads, 1 and 2 queries (2: causal), n_kv from 1 to 4099
// (odd ones masked), every K/V pair.
inline case_grid decode_pairs_grid() {
  case_grid g;
  for (int n_head_kv : {4, 8})
    for (int n_q : {1, 2})
      for (int n_kv : {1, 3, 255, 512, 1024, 4099})
        for (turbo3::data_type kt : kv_types)
          for (turbo3::data_type vt : kv_types) {
            attention_case c;
            c.head_dim = 256;
            c.n_head = 16;
            c.n_head_kv = n_head_kv;
            c.n_q = n_q;
            c.n_kv = n_kv;
            c.k_type = kt;
            c.v_type = vt;
            c.mask = n_kv % 2 == 1;
            c.causal = n_q == 2;
            g.push_back({c});
          }
  return g;
}

// The other head dims: D = 512 over 2048 keys, GQA 1 / 8 / 16 over 2 KV heads (8: sinks), every K/V
// pair; D = 64 (f16), 16 query heads over 2, one and two queries, two sequences, a mask; turbo3 at
// D = 128 with two sequences of two causal queries in 3 splits.
inline case_grid decode_head_dims_grid() {
  using turbo3::data_type;
  case_grid g;
  for (data_type kt : kv_types)
    for (data_type vt : kv_types)
      for (int gqa : {1, 8, 16}) {
        attention_case c;
        c.head_dim = 512;
        c.n_head_kv = 2;
        c.n_head = 2 * gqa;
        c.n_kv = 2048;
        c.k_type = kt;
        c.v_type = vt;
        c.sinks = gqa == 8;
        g.push_back({c});
      }
  for (int n_q : {1, 2}) {
    attention_case c;
    c.head_dim = 64;
    c.n_head = 16;
    c.n_head_kv = 2;
    c.n_kv = 1000;
    c.n_q = n_q;
    c.n_seq = 2;
    c.k_type = c.v_type = data_type::f16;
    c.mask = true;
    g.push_back({c});
  }
  attention_case c;
  c.head_dim = 128;
  c.n_head = 8;
  c.n_head_kv = 2;
  c.n_kv = 3000;
  c.n_seq = 2;
  c.n_q = 2;
  c.causal = true;
  g.push_back({c, 3});
  return g;
}

// The matrix-instruction kernel's row layouts, every K/V pair at D = 128 and 256 over 1500 keys with
// mask and sinks: one query x 16 heads over 8, and two queries x 32 heads over 8 (4 heads a group:
// the kernel's 8 rows).
inline case_grid decode_matrix_grid() {
  case_grid g;
  for (int d : {128, 256})
    for (turbo3::data_type kt : kv_types)
      for (turbo3::data_type vt : kv_types) {
        attention_case c;
        c.head_dim = d;
        c.n_head = 16;
        c.n_head_kv = 8;
        c.n_kv = 1500;
        c.k_type = kt;
        c.v_type = vt;
        c.mask = true;
        c.sinks = true;
        g.push_back({c});
        c.n_q = 2;
        c.n_head = 32;
        g.push_back({c});
      }
  return g;
}

// Odd lengths: n_kv 1 .. 1000 at D = 128, 6 query heads over 2, a mask, sinks on odd lengths.
inline case_grid decode_odd_lengths_grid() {
  case_grid g;
  for (int n_kv : {1, 3, 9, 27, 81, 129, 257, 1000}) {
    attention_case c;
    c.head_dim = 128;
    c.n_head = 6;
    c.n_head_kv = 2;
    c.n_kv = n_kv;
    c.mask = true;
    c.sinks = n_kv % 2 == 1;
    g.push_back({c});
  }
  return g;
}

// The warp kernel's row layouts, shifts, GQA and options, turbo3 K and V. Row strides (token-major,
// rows of 50 * D / 128 bytes per head): D = 128 with 1 or 3 KV heads is copied in 2-byte units,
// with 2 heads in 4-byte units (rows starting 0 or 2 bytes into a word), with 4 heads in 8-byte
// units (rows starting 0, 2, 4 or 6 bytes into a unit), with 8 heads in 16-byte units on even heads
// (rows starting 0, 4, 8 or 12 bytes in) and 8-byte units on odd ones; D = 256 with 1 or 3 heads in
// 4-byte units, with 2 heads in 8-byte units (rows starting 0 or 4 bytes in), with 4 or 8 heads (the
// benchmark's layout) in 16-byte units (0, 4, 8 or 12). Key counts leave partial groups of 16 keys
// and uneven warps; the options, Q type, rotation mode and codebook cycle. Then head-major K/V with
// 1, 3 and 8 heads (sampled: every third), then verify-sized row sets and the wide form (sampled:
// every fourth). Last, unsampled: many splits of one tile each and one split covering everything.
inline case_grid decode_warp_grid() {
  using turbo3::data_type;
  case_grid g;
  int variant = 0;
  // The options variant `opt` of the six takes: none, mask, sinks, ALiBi with a mask, softcap, causal.
  const auto set_options = [](attention_case& c, int opt) {
    c.mask = opt == 1 || opt == 3;
    c.sinks = opt == 2;
    c.max_bias = opt == 3 ? 8.0f : 0.0f;
    c.softcap = opt == 4 ? 2.0f : 0.0f;
    c.causal = opt == 5;
  };
  for (int d : {128, 256})
    for (int n_head_kv : {1, 2, 3, 4, 8})
      for (int gqa : {1, 2, 4, 8})
        for (int n_q : {1, 2}) {
          if (gqa * n_q > 8 || (n_head_kv == 8 && gqa > 2)) continue;
          attention_case c;
          c.head_dim = d;
          c.n_head_kv = n_head_kv;
          c.n_head = n_head_kv * gqa;
          c.n_q = n_q;
          c.n_kv = 37 + 401 * (variant % 5);
          set_options(c, variant++ % 6);
          c.causal = c.causal || n_q == 2;
          c.k_type = c.v_type = data_type::turbo3;
          c.q_type = variant % 3 == 0 ? data_type::f16 : data_type::f32;
          c.library_rotates = variant % 4 != 0;
          c.cb = variant % 7 == 0 ? turbo3::codebook::legacy : turbo3::codebook::lloyd_max;
          g.push_back({c, 0, variant % 3 == 0});
        }
  // Head-major K/V (each head's rows back to back, heads n_kv rows apart, so each head starts at its
  // own offset into a 16-byte unit): span staging at D = 128, 4-byte units at D = 256.
  for (int d : {128, 256})
    for (int n_head_kv : {1, 3, 8})
      for (int n_q : {1, 2}) {
        attention_case c;
        c.head_dim = d;
        c.n_head_kv = n_head_kv;
        c.n_head = 2 * n_head_kv;
        c.n_q = n_q;
        c.n_kv = 15 + 1003 * (variant % 3);
        c.kv_head_major = true;
        c.causal = n_q == 2;
        c.mask = variant % 2 == 0;
        c.k_type = c.v_type = data_type::turbo3;
        c.library_rotates = variant++ % 4 != 0;
        g.push_back({c, 0, variant % 3 == 0});
      }
  // Several queries per work-group (verify batches) and the wide form (9-16 rows: two score
  // fragments, four value column blocks), GQA x n_q from 3 to 32 rows per KV head: past 16, or
  // where the queries do not divide evenly, more than one query tile.
  const int shapes[][2] = {{2, 8}, {16, 1}, {8, 2}, {4, 3}, {2, 5}, {1, 16}, {2, 16}, {4, 4}, {1, 3}, {2, 4}, {16, 2}, {1, 11}};
  for (int d : {128, 256})
    for (const auto& shape : shapes) {
      attention_case c;
      c.head_dim = d;
      c.n_head_kv = variant % 3 == 0 ? 1 : variant % 3 == 1 ? 3 : 8;
      c.n_head = c.n_head_kv * shape[0];
      c.n_q = shape[1];
      c.n_kv = c.n_q + 37 + 613 * (variant % 4);
      const int opt = variant++ % 6;
      set_options(c, opt);
      c.causal = c.causal || opt == 0;
      c.kv_head_major = variant % 5 == 0;
      c.k_type = c.v_type = data_type::turbo3;
      c.q_type = variant % 3 == 0 ? data_type::f16 : data_type::f32;
      c.library_rotates = variant % 4 != 0;
      g.push_back({c, 0, variant % 4 == 0});
    }
  attention_case c;
  c.head_dim = 256;
  c.n_head = 16;
  c.n_head_kv = 8;
  c.n_kv = 4099;
  c.k_type = c.v_type = data_type::turbo3;
  for (int splits : {1, 7, 33}) g.push_back({c, splits, false});
  return g;
}

// The warp kernel's deep-context shape (6 warps at D = 256 from vec_warp_deep_keys = 65536 keys),
// turbo3: 8-byte staging (8 KV heads) and 4-byte staging (3 heads); 2 and 4 rows a work-group (one
// value column block); a partial last group; the options spread over the three cases (each takes
// the host reference about 12 s); few splits (long claims per work-group).
inline case_grid decode_deep_grid() {
  using turbo3::data_type;
  struct deep_case {
    int n_head, n_head_kv, n_q, n_kv, splits;
  };
  const deep_case cases[] = {{16, 8, 1, 65573, 0}, {6, 3, 1, 70001, 0}, {16, 8, 2, 65600, 5}};
  case_grid g;
  int variant = 0;
  for (const deep_case& d : cases) {
    attention_case c;
    c.head_dim = 256;
    c.n_head = d.n_head;
    c.n_head_kv = d.n_head_kv;
    c.n_q = d.n_q;
    c.n_kv = d.n_kv;
    const int opt = variant++;
    c.mask = opt == 2;
    c.max_bias = opt == 2 ? 8.0f : 0.0f;
    c.sinks = opt == 1;
    c.softcap = opt == 1 ? 2.0f : 0.0f;
    c.causal = d.n_q == 2;
    c.k_type = c.v_type = data_type::turbo3;
    c.q_type = opt == 0 ? data_type::f16 : data_type::f32;
    c.library_rotates = opt != 1;
    c.cb = opt == 2 ? turbo3::codebook::legacy : turbo3::codebook::lloyd_max;
    g.push_back({c, d.splits});
  }
  return g;
}

}  // namespace turbo3_test
