// VEC (decode) kernel against ref::attention on identical quantized bytes, limit NMSE 1e-5.
#include "attention_problem.hpp"

using namespace turbo3;
using turbo3_test::attention_case;
using turbo3_test::attention_problem;

namespace {

constexpr double nmse_limit = 1e-5;
turbo3_test::nmse_tracker g_vec;

struct report_at_exit {
  ~report_at_exit() {
    if (g_vec.cases)
      std::printf("VEC: %d cases, worst NMSE %.3e (%s)\n", g_vec.cases, g_vec.worst, g_vec.worst_case.c_str());
  }
} g_report;

const data_type kv_types[2] = {data_type::f16, data_type::turbo3};

// [vec-san]: the cases compute-sanitizer runs on the decode kernels (small enough for racecheck:
// 2-17 s each on an H200): odd lengths, both codebooks and rotation modes, and the warp kernel over
// every staging unit, row shift and option.

void run_vec_case(const attention_case& c, std::mt19937_64& rng, const launch_options& opt = {}) {
  attention_problem prob(c, rng);
  prob.poison_output();
  stream_pool_allocator pool;
  const status s = flash_attention(prob.device_params(), pool, nullptr, opt);
  INFO(c.describe());
  REQUIRE(s == status::ok);
  TURBO3_CHECK_HIP(hipDeviceSynchronize());
  const double e = prob.compare_with_reference();
  g_vec.record(e, c.describe());
  INFO("NMSE " << e);
  CHECK(e <= nmse_limit);
}

}  // namespace

TEST_CASE("VEC: D=128 grid (GQA 1/4/12, n_kv 113/512/1024, options) at n_q=1 and forced at n_q=3/32/75", "[vec]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x128);
  launch_options forced;
  forced.kernel = kernel_choice::vec;
  int variant = 0;
  for (int gqa : {1, 4, 12})
    for (int n_kv : {113, 512, 1024})
      for (int n_q : {1, 3, 32, 75}) {
        attention_case c;
        c.head_dim = 128;
        c.n_head_kv = 4;
        c.n_head = 4 * gqa;
        c.n_kv = n_kv;
        c.n_q = n_q;
        // Options cycle so every combination of GQA, n_kv and n_q sees a different mix.
        const int opt = variant++ % 6;
        c.mask = opt != 0 && opt != 5;
        c.sinks = opt == 2 || opt == 4;
        c.max_bias = opt == 3 ? 8.0f : 0.0f;
        c.softcap = opt == 4 ? 2.0f : 0.0f;
        c.causal = opt == 5;
        c.k_type = kv_types[(variant / 2) % 2];
        c.v_type = kv_types[variant % 2];
        c.q_type = variant % 3 == 0 ? data_type::f16 : data_type::f32;
        c.out_type = variant % 5 == 0 ? data_type::f16 : data_type::f32;
        c.permuted_out = variant % 2 == 0;
        // Every case once with turbo3 K and V, the reason this library exists.
        run_vec_case(c, rng, forced);
        if (c.k_type != data_type::turbo3 || c.v_type != data_type::turbo3) {
          c.k_type = c.v_type = data_type::turbo3;
          run_vec_case(c, rng, forced);
        }
      }
}

TEST_CASE("VEC: D=256, 16 query heads over 4 and 8 KV heads, every K/V pair", "[vec]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x256);
  for (int n_head_kv : {4, 8})
    for (int n_q : {1, 2})
      for (int n_kv : {1, 3, 255, 512, 1024, 4099})
        for (data_type kt : kv_types)
          for (data_type vt : kv_types) {
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
            run_vec_case(c, rng);
          }
}

TEST_CASE("VEC: both codebooks and both rotation modes", "[vec][vec-san]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xcb);
  for (codebook cb : {codebook::lloyd_max, codebook::legacy})
    for (bool library_rotates : {true, false})
      for (data_type kt : kv_types)
        for (data_type vt : kv_types) {
          attention_case c;
          c.head_dim = 256;
          c.n_head = 8;
          c.n_head_kv = 2;
          c.n_kv = 777;
          c.cb = cb;
          c.library_rotates = library_rotates;
          c.k_type = kt;
          c.v_type = vt;
          c.mask = true;
          run_vec_case(c, rng);
        }
}

TEST_CASE("VEC: D=512 and D=64, GQA up to 16, two sequences", "[vec]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x512);
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
        run_vec_case(c, rng);
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
    run_vec_case(c, rng);
  }
  attention_case c;  // turbo3 with two sequences and a fixed split count
  c.head_dim = 128;
  c.n_head = 8;
  c.n_head_kv = 2;
  c.n_kv = 3000;
  c.n_seq = 2;
  c.n_q = 2;
  c.causal = true;
  launch_options three_splits;
  three_splits.kv_splits = 3;
  run_vec_case(c, rng, three_splits);
}

TEST_CASE("VEC: the matrix-instruction kernel (opt-in) on every K/V pair", "[vec]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x5ca1);
  launch_options matrix;
  matrix.vec = vec_variant::matrix;
  for (int d : {128, 256})
    for (data_type kt : kv_types)
      for (data_type vt : kv_types) {
        attention_case c;
        c.head_dim = d;
        c.n_head = 16;
        c.n_head_kv = 8;
        c.n_kv = 1500;
        c.k_type = kt;
        c.v_type = vt;
        c.mask = true;
        c.sinks = true;
        run_vec_case(c, rng, matrix);
        c.n_q = 2;  // two queries x 4 heads = the matrix kernel's 8 rows
        c.n_head = 32;
        run_vec_case(c, rng, matrix);
      }
}

TEST_CASE("VEC: odd lengths", "[vec][vec-san]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x0dd);
  for (int n_kv : {1, 3, 9, 27, 81, 129, 257, 1000}) {
    attention_case c;
    c.head_dim = 128;
    c.n_head = 6;
    c.n_head_kv = 2;
    c.n_kv = n_kv;
    c.mask = true;
    c.sinks = n_kv % 2 == 1;
    run_vec_case(c, rng);
  }
}

TEST_CASE("VEC: the warp kernel over row layouts, shifts, GQA, options; the scalar kernel forced", "[vec][vec-san]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x3a4b);
  launch_options warp, scalar;
  warp.vec = vec_variant::warp;
  scalar.vec = vec_variant::scalar;
  int variant = 0;
  // Row strides (token-major, rows of 50 * D / 128 bytes per head): D = 128 with 1 or 3 KV heads is
  // copied in 2-byte units, with 2 heads in 4-byte units (rows starting 0 or 2 bytes into a word),
  // with 4 heads in 8-byte units (rows starting 0, 2, 4 or 6 bytes into a unit), with 8 heads in
  // 16-byte units on even heads (rows starting 0, 4, 8 or 12 bytes in) and 8-byte units on odd
  // ones; D = 256 with 1 or 3 heads in 4-byte units, with 2 heads in 8-byte units (rows starting 0
  // or 4 bytes in), with 4 or 8 heads (the benchmark's layout) in 16-byte units (0, 4, 8 or 12).
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
          c.n_kv = 37 + 401 * (variant % 5);  // partial groups of 16 keys, uneven warps
          const int opt = variant++ % 6;
          c.mask = opt == 1 || opt == 3;
          c.sinks = opt == 2;
          c.max_bias = opt == 3 ? 8.0f : 0.0f;
          c.softcap = opt == 4 ? 2.0f : 0.0f;
          c.causal = opt == 5 || n_q == 2;
          c.k_type = c.v_type = data_type::turbo3;
          c.q_type = variant % 3 == 0 ? data_type::f16 : data_type::f32;
          c.library_rotates = variant % 4 != 0;
          c.cb = variant % 7 == 0 ? codebook::legacy : codebook::lloyd_max;
          run_vec_case(c, rng, warp);
          if (variant % 3 == 0) run_vec_case(c, rng, scalar);
        }
  attention_case c;  // many splits of one tile each, and one split covering everything
  c.head_dim = 256;
  c.n_head = 16;
  c.n_head_kv = 8;
  c.n_kv = 4099;
  c.k_type = c.v_type = data_type::turbo3;
  for (int splits : {1, 7, 33}) {
    launch_options o = warp;
    o.kv_splits = splits;
    run_vec_case(c, rng, o);
  }
}

TEST_CASE("VEC: the warp kernel's deep-context shape (6 warps at D = 256 from 65536 keys)", "[vec][vec-deep]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xdee9);
  launch_options warp;
  warp.vec = vec_variant::warp;
  // 8-byte staging (8 KV heads) and 4-byte staging (3 heads); 2 and 4 rows a work-group (one value
  // column block); partial last group; the options spread over three cases (each takes the host
  // reference about 12 s); few splits (long claims per work-group).
  struct deep_case {
    int n_head, n_head_kv, n_q, n_kv, splits;
  };
  const deep_case cases[] = {{16, 8, 1, 65573, 0}, {6, 3, 1, 70001, 0}, {16, 8, 2, 65600, 5}};
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
    c.cb = opt == 2 ? codebook::legacy : codebook::lloyd_max;
    launch_options o = warp;
    o.kv_splits = d.splits;
    run_vec_case(c, rng, o);
  }
}
