// VEC (decode) kernel against ref::attention on identical quantized bytes, limit NMSE 1e-5, on the
// decode grids of test_grid.hpp and the D = 128 options and codebook grids it shares with prefill.
#include "attention_problem.hpp"
#include "test_grid.hpp"

#include <optional>

using namespace turbo3;
using turbo3_test::attention_case;
using turbo3_test::attention_problem;
using turbo3_test::check_nmse;
using turbo3_test::forced;
using turbo3_test::nmse_limit;

namespace {

turbo3_test::reported_nmse g_vec("VEC");

// [vec-san]: the cases compute-sanitizer runs on the decode kernels (small enough for racecheck:
// 2-17 s each on an H200): odd lengths, both codebooks and rotation modes, and the warp kernel over
// every staging unit, row shift and option.

void run_vec_case(const attention_case& c, std::mt19937_64& rng, const launch_options& opt = {}) {
  attention_problem prob(c, rng);
  INFO(c.describe());
  check_nmse(g_vec, run_and_compare(prob, opt), c.describe());
}

// Runs every case of a grid with `family` (the route and VEC variant) and the case's split count;
// with `sampled_variant`, the sampled cases again with that VEC variant.
void run_vec_grid(const turbo3_test::case_grid& grid, std::mt19937_64& rng, const launch_options& family = {},
                  std::optional<vec_variant> sampled_variant = std::nullopt) {
  for (const turbo3_test::grid_case& g : grid) {
    launch_options o = family;
    o.kv_splits = g.kv_splits;
    run_vec_case(g.c, rng, o);
    if (sampled_variant && g.sampled) {
      o.vec = *sampled_variant;
      run_vec_case(g.c, rng, o);
    }
  }
}

}  // namespace

TEST_CASE("VEC: D=128 grid (GQA 1/4/12, n_kv 113/512/1024, options) at n_q=1 and forced at n_q=3/32/75", "[vec]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x128);
  launch_options forced;
  forced.kernel = kernel_choice::vec;
  run_vec_grid(turbo3_test::options_grid({1, 3, 32, 75}, /*causal_with_mask=*/false), rng, forced);
}

TEST_CASE("VEC: D=256, 16 query heads over 4 and 8 KV heads, every K/V pair", "[vec]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x256);
  run_vec_grid(turbo3_test::decode_pairs_grid(), rng);
}

TEST_CASE("VEC: both codebooks and both rotation modes", "[vec][vec-san]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xcb);
  run_vec_grid(turbo3_test::codebook_rotation_grid({256}, 1, 777, /*causal_when_library_rotates=*/false), rng);
}

TEST_CASE("VEC: D=512 and D=64, GQA up to 16, two sequences", "[vec]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x512);
  run_vec_grid(turbo3_test::decode_head_dims_grid(), rng);
}

TEST_CASE("VEC: the matrix-instruction kernel (opt-in) on every K/V pair", "[vec]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x5ca1);
  launch_options matrix;
  matrix.vec = vec_variant::matrix;
  run_vec_grid(turbo3_test::decode_matrix_grid(), rng, matrix);
}

TEST_CASE("VEC: odd lengths", "[vec][vec-san]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x0dd);
  run_vec_grid(turbo3_test::decode_odd_lengths_grid(), rng);
}

TEST_CASE("VEC: the warp kernel over row layouts, shifts, GQA, options; the scalar kernel forced", "[vec][vec-san]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x3a4b);
  launch_options warp;
  warp.vec = vec_variant::warp;
  run_vec_grid(turbo3_test::decode_warp_grid(), rng, warp, vec_variant::scalar);
}

// kernels.cu: the wide form's plan launched with its work-groups in `warps` warps.
namespace turbo3_test {
turbo3::status run_vec_wide_in_warps(const turbo3::attention_params& p, int warps);
}

// The wide form takes 8 warps a work-group (vec_warp_wide_warps), 4 where a device cannot hold the
// 8-warp work-group's shared memory (154 KB at D = 256: consumer GPUs): every wide-form shape of
// the warp grid again in 4-warp work-groups.
TEST_CASE("VEC: the wide form in 4-warp work-groups (where 8 do not fit)", "[vec]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x4a4b);
  int ran = 0;
  for (const turbo3_test::grid_case& g : turbo3_test::decode_warp_grid()) {
    attention_problem prob(g.c, rng);
    INFO(g.c.describe());
    prob.poison_output();
    const status s = turbo3_test::run_vec_wide_in_warps(prob.device_params(), 4);
    if (s == status::unsupported) continue;
    REQUIRE(s == status::ok);
    check_nmse(g_vec, prob.compare_with_reference(), g.c.describe() + " in 4-warp work-groups");
    ++ran;
  }
  REQUIRE(ran >= 8);
}

TEST_CASE("VEC: the warp kernel's deep-context shape (6 warps at D = 256 from 65536 keys)", "[vec][vec-deep]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xdee9);
  launch_options warp;
  warp.vec = vec_variant::warp;
  run_vec_grid(turbo3_test::decode_deep_grid(), rng, warp);
}

// MLA's cache (DeepSeek, Kimi, GLM's MLA models in ggml engines): K rows of 640 values (576 padded to
// whole turbo blocks), V a view of each row's first 512, one KV head under GQA 16 and 128 (and 2 KV
// heads under 16), through the automatic route: the warp kernel's V-in-K form.
namespace {
attention_case mla_case(turbo3::data_type t, int n_head, int n_head_kv, int n_q, int n_kv) {
    attention_case c;
    c.head_dim = 640;
    c.v_in_k = true;
    c.v_head_dim = 512;
    c.k_type = c.v_type = t;
    c.n_head = n_head;
    c.n_head_kv = n_head_kv;
    c.n_q = n_q;
    c.n_kv = n_kv;
    return c;
}
}  // namespace

TEST_CASE("VEC: K head dim 640 with V its first 512 values (MLA's cache), GQA up to 128", "[vec][vec-mla]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x640);
  const auto mla = mla_case;
  for (turbo3::data_type t : {data_type::turbo3, data_type::turbo2, data_type::turbo4})
    for (int n_kv : {1, 255, 4099})
      for (int n_q : {1, 2, 3}) {
        run_vec_case(mla(t, 16, 1, n_q, n_kv), rng);
        if (n_q < 3) run_vec_case(mla(t, 128, 1, n_q, n_kv), rng);
        attention_case two = mla(t, 32, 2, n_q, n_kv);
        two.causal = n_q > 1;
        run_vec_case(two, rng);
      }
  // The options over one shape: mask, sinks, ALiBi, softcap, the other codebook, the caller's
  // rotation, two sequences, f16 Q and output, token-major and head-major rows.
  for (int variant = 0; variant < 7; ++variant) {
    attention_case c = mla(data_type::turbo3, 16, 1, 2, 777);
    if (variant == 0) c.mask = true, c.sinks = true;
    if (variant == 1) c.max_bias = 8.0f, c.softcap = 30.0f;
    if (variant == 2) c.cb = turbo3::codebook::legacy;
    if (variant == 3) c.library_rotates = false;
    if (variant == 4) c.n_seq = 2, c.n_head_kv = 2, c.n_head = 32, c.kv_head_major = true;
    if (variant == 5) c.q_type = c.out_type = data_type::f16, c.mask = true, c.causal = true;
    if (variant == 6) c.n_seq = 2, c.permuted_out = true;
    run_vec_case(c, rng);
  }
  // Only the warp kernel has the form: a forced scalar or matrix kernel is unsupported.
  attention_problem prob(mla(data_type::turbo3, 16, 1, 1, 300), rng);
  for (vec_variant v : {vec_variant::scalar, vec_variant::matrix}) {
    launch_options o;
    o.vec = v;
    turbo3::stream_pool_allocator pool;
    CHECK(flash_attention(prob.device_params(), pool, nullptr, o) == status::unsupported);
  }
}

// The form's staging and merge under compute-sanitizer: small caches, each type, GQA 16 and 128.
TEST_CASE("VEC: MLA's cache, small cases for the sanitizers", "[vec-san]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x641);
  for (turbo3::data_type t : {data_type::turbo3, data_type::turbo2, data_type::turbo4})
    for (int n_kv : {1, 255}) {
      run_vec_case(mla_case(t, 16, 1, 2, n_kv), rng);
      attention_case c = mla_case(t, 128, 1, 1, n_kv);
      c.mask = true;
      run_vec_case(c, rng);
    }
}

// Every K/V type pair through the automatic route ([types]): in this file to save a translation unit.
#include "test_types.inl"
