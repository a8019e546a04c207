// Every K/V pair of the five storage types (f16, turbo3, turbo4, turbo2, q8_0) at D = 128, 256 and
// 512 through flash_attention's automatic route, against ref::attention on identical bytes (NMSE
// limit 1e-5, output poisoned first). Pairs with a turbo4, turbo2 or q8_0 side go to the VEC family
// (decode, verify batches and prefill at D = 512: the warp kernel for the pairs of vec_warp_types,
// the turbo pairs and q8_0 K with turbo3 V, on NVIDIA, the scalar kernel otherwise) and to
// materialize (prefill at D = 128 and 256: dense f16 copies, then MMA on NVIDIA, else TILE); their
// small cases run the other of the two routes too, forced (materialize at D = 512 runs TILE). The
// worst NMSE of each pair is printed at exit ("types worst NMSE").
//
// Included by test_vec.cu, not a translation unit of its own: every GPU test file that calls
// flash_attention compiles every kernel (about 2.5 min of one core under nvcc).
#include "attention_problem.hpp"

#include <array>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

namespace types_test {

using namespace turbo3;
using turbo3_test::attention_case;
using turbo3_test::attention_problem;
constexpr data_type all_types[5] = {data_type::f16, data_type::turbo3, data_type::turbo4, data_type::turbo2,
                                    data_type::q8_0};

struct pair_report {
  std::map<std::pair<int, int>, turbo3_test::nmse_tracker> pairs;  // by (K, V) index in all_types
  ~pair_report() {
    for (const auto& [kv, t] : pairs)
      std::printf("types worst NMSE k=%s v=%s: %.3e over %d runs (%s)\n", to_string(all_types[kv.first]),
                  to_string(all_types[kv.second]), t.worst, t.cases, t.worst_case.c_str());
  }
} g_types;

bool new_type(data_type t) { return t == data_type::turbo4 || t == data_type::turbo2 || t == data_type::q8_0; }

// The family the automatic route must pick for a pair with a turbo4, turbo2 or q8_0 side: the
// decode kernel up to a verify batch (materialize would copy the whole cache for a few rows) and at
// D = 512, else materialize.
kernel_choice expected_route(const attention_case& c) {
  if (c.n_q <= detail::vec_verify_max_queries || c.head_dim == 512) return kernel_choice::vec;
  return kernel_choice::materialize;
}

void run_route(attention_problem& prob, const std::vector<uint8_t>& want, int k, int v, const launch_options& opt,
               const std::string& name) {
  const attention_params p = prob.device_params();
  INFO(name);
  REQUIRE(supported(p, opt) == status::ok);
  prob.poison_output();
  stream_pool_allocator pool;
  REQUIRE(flash_attention(p, pool, nullptr, opt) == status::ok);
  TURBO3_CHECK_HIP(hipDeviceSynchronize());
  const double e = prob.compare_with(want);
  turbo3_test::check_nmse(g_types.pairs[{k, v}], e, name);
}

}  // namespace types_test

// Per pair and head dim, five cases, one per n_q in {1, 2, 3, 8, 64}; n_kv (1, 255, 4099), GQA (1,
// 2, 4, 8; two KV heads) and the options (none; random mask and sinks; causal; ggml's causal mask with
// the causal flag) cycle over them so that each pair sees every value of each. 4099 keys only up
// to 8 queries and causal only where n_kv >= n_q (else the mask): the reference's time, not the
// GPU's, bounds the grid (375 cases).
TEST_CASE("types: every K/V pair of f16, turbo3, turbo4, turbo2, q8_0 at D 128/256/512", "[types]") {
  using namespace types_test;
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x7e5);
  const int dims[3] = {128, 256, 512};
  const int n_qs[5] = {1, 2, 3, 8, 64};
  const int n_kvs[3] = {1, 255, 4099};
  for (int ki = 0; ki < 5; ++ki)
    for (int vi = 0; vi < 5; ++vi) {
      const int pair = ki * 5 + vi;
      for (int di = 0; di < 3; ++di)
        for (int qi = 0; qi < 5; ++qi) {
          attention_case c;
          c.k_type = all_types[ki];
          c.v_type = all_types[vi];
          c.head_dim = dims[di];
          c.n_q = n_qs[qi];
          c.n_kv = n_kvs[(qi + di + pair) % 3];
          if (c.n_kv > 255 && c.n_q > 8) c.n_kv = 255;
          c.n_head_kv = 2;
          c.n_head = 2 * (1 << ((qi + di + pair) % 4));  // GQA 1, 2, 4, 8
          const int opt = (qi + 2 * di + pair) % 4;
          const bool causal_fits = c.n_kv >= c.n_q;
          c.mask = opt == 1 || opt == 3 || (opt == 2 && !causal_fits);
          c.sinks = opt == 1;
          c.causal = (opt == 2 || opt == 3) && causal_fits;
          if (opt == 3) c.mask_pattern = attention_case::mask_kind::causal;
          c.q_type = (pair + qi) % 3 == 0 ? data_type::f16 : data_type::f32;
          c.out_type = (pair + di) % 4 == 0 ? data_type::f16 : data_type::f32;
          attention_problem prob(c, rng);
          const std::vector<uint8_t> want = prob.reference();
          const bool any_new = new_type(c.k_type) || new_type(c.v_type);
          if (any_new) {
            INFO(c.describe());
            CHECK(route(prob.device_params()) == expected_route(c));
          }
          run_route(prob, want, ki, vi, {}, c.describe());
          // The other route of a new-type pair, where it applies and the case is small:
          // materialize for the shapes the decode kernel takes, the decode kernel for the others.
          if (any_new && c.n_q <= 8) {
            const bool to_vec = expected_route(c) == kernel_choice::vec;
            launch_options other;
            other.kernel = to_vec ? kernel_choice::materialize : kernel_choice::vec;
            run_route(prob, want, ki, vi, other, c.describe() + (to_vec ? " [materialize]" : " [vec]"));
          }
        }
    }
}

// q8_0 rows at D = 64 (whole 32-value blocks, no rotation) with f16: materialize at every n_q (VEC
// has no kernel for them at D = 64).
TEST_CASE("types: q8_0 and f16 pairs at D = 64", "[types]") {
  using namespace types_test;
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x64);
  const std::array<std::pair<int, int>, 3> pairs = {{{4, 4}, {0, 4}, {4, 0}}};
  int variant = 0;
  for (const auto& [ki, vi] : pairs)
    for (int n_q : {1, 2, 8})
      for (int n_kv : {1, 255, 4099}) {
        attention_case c;
        c.k_type = all_types[ki];
        c.v_type = all_types[vi];
        c.head_dim = 64;
        c.n_q = n_q;
        c.n_kv = n_kv;
        c.n_head_kv = 2;
        c.n_head = variant % 2 == 0 ? 8 : 2;
        c.mask = variant % 3 == 1;
        c.causal = variant % 3 == 2 && n_kv >= n_q;
        ++variant;
        attention_problem prob(c, rng);
        const std::vector<uint8_t> want = prob.reference();
        INFO(c.describe());
        CHECK(route(prob.device_params()) == kernel_choice::materialize);
        run_route(prob, want, ki, vi, {}, c.describe());
      }
}

// 16 query rows per work-group (8 query heads per KV head, two queries) and 8 at D = 512, over a
// mix of pairs with a turbo4, turbo2 or q8_0 side: the row counts the grid above does not reach.
TEST_CASE("types: 16 and 8 query rows per work-group", "[types]") {
  using namespace types_test;
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x16);
  const std::array<std::pair<int, int>, 5> pairs = {{{2, 3}, {3, 4}, {4, 1}, {0, 2}, {2, 2}}};
  int variant = 0;
  for (const auto& [ki, vi] : pairs)
    for (int d : {128, 256, 512}) {
      attention_case c;
      c.k_type = all_types[ki];
      c.v_type = all_types[vi];
      c.head_dim = d;
      c.n_q = 2;
      c.n_kv = variant % 2 == 0 ? 300 : 1500;
      c.n_head_kv = 2;
      c.n_head = 16;
      c.mask = variant % 3 != 0;
      c.sinks = variant % 3 == 2;
      c.causal = variant % 2 == 1;
      ++variant;
      attention_problem prob(c, rng);
      const std::vector<uint8_t> want = prob.reference();
      run_route(prob, want, ki, vi, {}, c.describe());
    }
}

// Verify batches in the wide form at depth: 8 queries over GQA 2 and 8 KV heads (16 rows a
// work-group), with ggml's kind of mask and with the causal flag alone, with enough keys that the
// warps take fixed chunks, claimed pairs and the single groups of the tail (warp_key_chunks), for
// each one-type pair and q8_0 K with turbo3 V at D 128 and 256.
TEST_CASE("types: verify batches in the 16-row form at depth, masked and causal", "[types][vec]") {
  using namespace types_test;
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x9e1);
  // (K, V) in all_types: turbo3, turbo4, turbo2, q8_0 K with turbo3 V
  const std::array<std::pair<int, int>, 4> pairs = {{{1, 1}, {2, 2}, {3, 3}, {4, 1}}};
  int variant = 0;
  for (const auto& [ki, vi] : pairs)
    for (int d : {128, 256})
      for (bool masked : {true, false}) {
        attention_case c;
        c.k_type = all_types[ki];
        c.v_type = all_types[vi];
        c.head_dim = d;
        c.n_q = 8;
        c.n_kv = 24576 + 37 * variant;
        c.n_head_kv = 8;
        c.n_head = 16;
        c.mask = masked;
        c.causal = true;
        c.sinks = variant % 3 == 1;
        ++variant;
        attention_problem prob(c, rng);
        const std::vector<uint8_t> want = prob.reference();
        INFO(c.describe());
        CHECK(route(prob.device_params()) == kernel_choice::vec);
        run_route(prob, want, ki, vi, {}, c.describe());
      }
}

// The warp decode kernel over the pairs it reads besides turbo3's (vec_warp_types): the
// automatic route of one, two and four queries at GQA 1 and 4 takes it (up to 8 rows a
// work-group; 16 rows in two query tiles). Per pair: D 128 and 256, n_q 1, 2 and 4, GQA 1 and 4,
// unmasked and masked (24 cases); 2, 3 or 8 KV heads (token
// rows of 8 heads are 16-byte multiples: 16-byte staging, 8-byte where a head starts 2 bytes into
// a word; 2 and 3 heads: 8-, 4- and 2-byte staging), head-major rows every fifth case (span
// staging where rows are not 4-byte multiples), both rotation modes and Q types. q8_0 K rows are
// 136 or 272 bytes, 2-byte aligned blocks (q8_0_warp_side's shifted word loads). Then the
// deep-context shape (D = 256, one value column block, 65536 keys and more): 6 warps for turbo2, 4
// for turbo4 and q8_0 K (vec_warp_warps).
TEST_CASE("types: the warp decode kernel over turbo2 and turbo4 pairs and q8_0 keys", "[types][vec]") {
  using namespace types_test;
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x3a4);
  // (K, V) in all_types: turbo2, turbo4 and each with turbo3; q8_0 K with turbo3 V
  const std::array<std::pair<int, int>, 7> pairs = {{{3, 3}, {1, 3}, {3, 1}, {2, 2}, {1, 2}, {2, 1}, {4, 1}}};
  int variant = 0;
  for (const auto& [ki, vi] : pairs)
    for (int d : {128, 256})
      for (int n_q : {1, 2, 4})
        for (int gqa : {1, 4})
          for (bool masked : {false, true}) {
            attention_case c;
            c.k_type = all_types[ki];
            c.v_type = all_types[vi];
            c.head_dim = d;
            c.n_q = n_q;
            c.n_kv = 37 + 401 * (variant % 4);
            c.n_head_kv = variant % 3 == 0 ? 3 : variant % 3 == 1 ? 8 : 2;
            c.n_head = c.n_head_kv * gqa;
            c.mask = masked;
            c.sinks = variant % 6 == 1;
            c.causal = n_q >= 2;
            c.kv_head_major = variant % 5 == 0;
            c.library_rotates = variant % 4 != 3;
            c.q_type = variant % 3 == 1 ? data_type::f16 : data_type::f32;
            ++variant;
            attention_problem prob(c, rng);
            const std::vector<uint8_t> want = prob.reference();
            INFO(c.describe());
            CHECK(route(prob.device_params()) == kernel_choice::vec);
            run_route(prob, want, ki, vi, {}, c.describe());
          }
  for (const auto& [ki, vi] : {std::pair<int, int>{3, 3}, std::pair<int, int>{2, 2}, std::pair<int, int>{4, 1}}) {
    attention_case c;
    c.k_type = all_types[ki];
    c.v_type = all_types[vi];
    c.head_dim = 256;
    c.n_q = 1;
    c.n_kv = 65536 + 37;
    c.n_head_kv = 2;
    c.n_head = 4;
    c.mask = ki == 3;
    attention_problem prob(c, rng);
    const std::vector<uint8_t> want = prob.reference();
    run_route(prob, want, ki, vi, {}, c.describe());
  }
}
