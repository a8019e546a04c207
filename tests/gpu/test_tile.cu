// Prefill routes against ref::attention on identical quantized bytes, limit NMSE 1e-5: the TILE
// kernel (inline dequantization) and the materialize route (f16 copies + the device's default f16
// prefill kernel: MMA on NVIDIA, TILE elsewhere), forced through launch_options::kernel, on the
// prefill grids of test_grid.hpp and the D = 512 grid (materialize on each grid's sampled cases);
// the automatic routing; graph capture of prefill calls with the arena; a timing harness (hidden
// tag [.tile-timing]) for the pp512/2048/4096 comparison.
#include "attention_problem.hpp"
#include "test_grid.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

using namespace turbo3;
using turbo3_test::attention_case;
using turbo3_test::attention_problem;
using turbo3_test::check_nmse;
using turbo3_test::forced;
using turbo3_test::nmse_limit;
using turbo3_test::device_buffer;

namespace {

turbo3_test::reported_nmse g_tile("TILE"), g_materialize("materialize");

// Runs one case through the given route and compares; the reference runs once per problem.
void run_case(const attention_case& c, std::mt19937_64& rng, bool tile, bool materialize) {
  attention_problem prob(c, rng);
  INFO(c.describe());
  std::vector<kernel_choice> routes;
  if (tile) routes.push_back(kernel_choice::tile);
  if (materialize) routes.push_back(kernel_choice::materialize);
  for (kernel_choice k : routes) {
    const char* name = k == kernel_choice::tile ? "tile" : "materialize";
    INFO(name);
    const double e = run_and_compare(prob, forced(k));
    check_nmse(k == kernel_choice::tile ? g_tile : g_materialize, e, std::string(name) + " " + c.describe());
  }
}

// Runs every case of a grid on TILE, the sampled ones on materialize too.
void run_grid(const turbo3_test::case_grid& grid, std::mt19937_64& rng) {
  for (const turbo3_test::grid_case& g : grid) run_case(g.c, rng, true, g.sampled);
}

}  // namespace

TEST_CASE("TILE: the prefill route grids (seed, D=128 options, odd lengths, K/V pairs, GQA)", "[tile]") {
  turbo3_test::run_prefill_route_grids(run_grid);
}

TEST_CASE("TILE: f16 at D=64", "[tile]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x7c64);
  run_grid(turbo3_test::f16_d64_grid(), rng);
}

TEST_CASE("TILE: D=512 (every K/V pair, GQA 1/4/8, options, structured masks, two sequences)", "[tile]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x7512);
  run_grid(turbo3_test::prefill_d512_grid(), rng);
}

// Structured masks: TILE reads each row's visible end from the mask and never loads the key tiles
// past it; materialize's dense call (TILE or MMA) skips them too.
TEST_CASE("TILE: structured masks (causal pattern, sliding window, hidden rows)", "[tile]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x3a5d);
  using kind = attention_case::mask_kind;
  run_grid(turbo3_test::structured_mask_grid({128, 256}, {data_type::turbo3},
                                             {{200, 200, kind::causal, 0, false},
                                              {64, 300, kind::causal, 0, false},
                                              {150, 150, kind::window, 40, true},
                                              {3, 500, kind::causal, 0, false}}),
           rng);
}

// The sanitizer subset, then ggml's causal mask in place of the flag over several query and key
// tiles (visible ends).
TEST_CASE("TILE: sanitizer subset", "[tile-san]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x75a);
  run_grid(turbo3_test::sanitizer_grid({64, 128, 256, 512}), rng);
  run_grid(turbo3_test::causal_tiles_grid({data_type::turbo3}, {true}), rng);
}

TEST_CASE("routing: n_q <= 2 to VEC, else MMA (NVIDIA) or TILE; workspace_bytes per route", "[tile]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x7a0);
  attention_case c;
  c.head_dim = 256;
  c.n_head = 8;
  c.n_head_kv = 2;
  c.n_kv = 500;
  c.n_q = 40;
  c.mask = true;
  attention_problem prob(c, rng);
  const attention_params p = prob.device_params();
  const kernel_choice automatic = turbo3::route(p, launch_options{});
  CHECK(automatic == (detail::mma_by_default(platform::current_device_family()) ? kernel_choice::mma : kernel_choice::tile));
  // automatic: TILE keeps no temporaries; MMA only the partial rows of a key split
  launch_options one_pass;
  one_pass.kv_splits = 1;
  CHECK(workspace_bytes(p, one_pass) == 0);
  CHECK(workspace_bytes(p, forced(kernel_choice::tile)) == 0);
  // materialize: K and V each n_seq * n_head_kv * n_kv * D halves, rounded to 256 bytes, and 255
  // bytes of slack to start them at a 256-byte boundary whatever the allocator hands out; where
  // the dense call runs MMA, its key split's partial rows after them (the same split as turbo3's
  // own MMA call: one shape, one warpgroup form)
  const size_t one = (size_t{2} * 500 * 256 * 2 + 255) / 256 * 256;
  const bool dense_on_mma = detail::mma_by_default(platform::current_device_family());
  const size_t dense_partials = dense_on_mma ? workspace_bytes(p, forced(kernel_choice::mma)) : 0;
  CHECK(workspace_bytes(p, forced(kernel_choice::materialize)) == 255 + 2 * one + dense_partials);
  launch_options materialize_one_pass = forced(kernel_choice::materialize);
  materialize_one_pass.kv_splits = 1;
  CHECK(workspace_bytes(p, materialize_one_pass) == 255 + 2 * one);
  // automatic routing without a key split gives the same result with an empty arena
  arena_allocator none;  // an empty arena: any allocation would fail
  check_nmse(g_tile, run_and_compare(prob, none, one_pass), "automatic " + c.describe());
  // D = 64 (f16 only): MMA does not cover it, automatic routing takes TILE
  attention_case d64 = c;
  d64.head_dim = 64;
  d64.k_type = d64.v_type = data_type::f16;
  attention_problem prob64(d64, rng);
  CHECK(turbo3::route(prob64.device_params(), launch_options{}) == kernel_choice::tile);
  CHECK(run_and_compare(prob64, none) <= nmse_limit);
  // D = 512: TILE takes prefill (no MMA kernel has the head dim), VEC a verify batch of up to 16
  // queries (TILE has no key split); materialize's dense call runs TILE
  attention_case big = c;
  big.head_dim = 512;
  big.n_q = 5;
  big.n_kv = 100;
  attention_problem prob512(big, rng);
  CHECK(turbo3::route(prob512.device_params(), launch_options{}) == kernel_choice::vec);
  check_nmse(g_materialize, run_and_compare(prob512, forced(kernel_choice::materialize)),
             "materialize " + big.describe());
  CHECK(flash_attention(prob512.device_params(), none, nullptr, forced(kernel_choice::mma)) == status::unsupported);
  CHECK(run_and_compare(prob512) <= nmse_limit);
  check_nmse(g_tile, run_and_compare(prob512, none, forced(kernel_choice::tile)), "tile " + big.describe());
  big.n_q = 40;
  attention_problem prob512_prefill(big, rng);
  CHECK(turbo3::route(prob512_prefill.device_params(), launch_options{}) == kernel_choice::tile);
  check_nmse(g_tile, run_and_compare(prob512_prefill, none), "automatic " + big.describe());
}

namespace {

void capture_prefill(kernel_choice k, attention_problem& prob, std::mt19937_64& rng, const char* name) {
  hipStream_t stream;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  const launch_options opt = forced(k);
  const size_t need = workspace_bytes(prob.device_params(), opt);
  device_buffer arena_memory(arena_allocator::footprint(need));
  arena_allocator arena(arena_memory.ptr, arena_memory.bytes);
  const double worst = turbo3_test::capture_and_replay(arena, stream, prob, rng, opt, 5, name);
  // A captured call keeps its region until reset() (a graph may replay at any time): TILE takes none.
  CHECK(arena.used() == (need > 0 ? arena_allocator::footprint(need) : 0));
  arena.reset();
  CHECK(arena.used() == 0);
  std::printf("capture prefill (%s, arena %zu bytes): 5 replays with new Q/K/V, worst NMSE %.3e\n", name, need, worst);
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
}

}  // namespace

TEST_CASE("capture: prefill (TILE and materialize) with the arena allocator, replayed", "[tile][tile-capture]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x7ca9);
  attention_case c;
  c.head_dim = 256;
  c.n_head = 16;
  c.n_head_kv = 8;
  c.n_q = 100;
  c.n_kv = 700;
  c.causal = true;
  c.sinks = true;
  attention_problem prob(c, rng);
  capture_prefill(kernel_choice::tile, prob, rng, "tile");
  capture_prefill(kernel_choice::materialize, prob, rng, "materialize");
  // A non-capture-safe allocator under capture: capture_unsafe, nothing launched.
  hipStream_t stream;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  device_allocator plain;
  hipGraph_t graph = nullptr;
  TURBO3_CHECK_HIP(hipStreamBeginCapture(stream, hipStreamCaptureModeGlobal));
  const status s = flash_attention(prob.device_params(), plain, stream, forced(kernel_choice::materialize));
  TURBO3_CHECK_HIP(hipStreamEndCapture(stream, &graph));
  CHECK(s == status::capture_unsafe);
  if (graph) TURBO3_CHECK_HIP(hipGraphDestroy(graph));
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
}

namespace {

// The scalar decode kernel where launch_options can ask for one by name (vec_variant::scalar):
// the stock path of the TurboQuant llama.cpp forks, next to whatever VEC variant runs by default.
template <class O>
auto scalar_vec(O& o, int) -> decltype(o.vec = decltype(o.vec)::scalar, true) {
  o.vec = decltype(o.vec)::scalar;
  return true;
}
template <class O>
bool scalar_vec(O&, long) {
  return false;
}

}  // namespace

// Timing: D = 256, 16 query heads over 8 KV heads, causal, n_q = n_kv = 512 / 2048 / 4096:
// turbo3 TILE, f16 TILE, turbo3 materialize, turbo3 forced VEC. Hidden (run explicitly).
TEST_CASE("timing: prefill pp512/2048/4096", "[.tile-timing]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x71e);
  hipEvent_t e0, e1;
  TURBO3_CHECK_HIP(hipEventCreate(&e0));
  TURBO3_CHECK_HIP(hipEventCreate(&e1));
  stream_pool_allocator pool;
  for (int n : {512, 2048, 4096}) {
    attention_case c;
    c.head_dim = 256;
    c.n_head = 16;
    c.n_head_kv = 8;
    c.n_q = c.n_kv = n;
    c.causal = true;
    attention_problem t3(c, rng);
    c.k_type = c.v_type = data_type::f16;
    attention_problem f16(c, rng);
    struct variant {
      const char* name;
      attention_problem* prob;
      kernel_choice k;
    } variants[] = {{"turbo3 tile", &t3, kernel_choice::tile},
                    {"f16 tile", &f16, kernel_choice::tile},
                    {"turbo3 materialize", &t3, kernel_choice::materialize},
                    {"turbo3 vec", &t3, kernel_choice::vec},
                    {"turbo3 vec scalar", &t3, kernel_choice::vec}};
    launch_options scalar_opt = forced(kernel_choice::vec);
    const bool have_scalar = scalar_vec(scalar_opt, 0);
    double us[5] = {0, 0, 0, 0, 0};
    for (int v = 0; v < (have_scalar ? 5 : 4); ++v) {
      const attention_params p = variants[v].prob->device_params();
      const launch_options opt = v == 4 ? scalar_opt : forced(variants[v].k);
      for (int w = 0; w < 2; ++w) REQUIRE(flash_attention(p, pool, nullptr, opt) == status::ok);
      const int reps = variants[v].k == kernel_choice::vec && n >= 2048 ? 3 : 10;
      TURBO3_CHECK_HIP(hipEventRecord(e0, nullptr));
      for (int r = 0; r < reps; ++r) flash_attention(p, pool, nullptr, opt);
      TURBO3_CHECK_HIP(hipEventRecord(e1, nullptr));
      TURBO3_CHECK_HIP(hipEventSynchronize(e1));
      float ms = 0;
      TURBO3_CHECK_HIP(hipEventElapsedTime(&ms, e0, e1));
      us[v] = 1000.0 * ms / reps;
    }
    const double flop = 4.0 * c.n_head * c.head_dim * (static_cast<double>(n) * (n + 1) / 2);
    std::printf("pp%d: turbo3 TILE %.1f us (%.1f TFLOP/s), f16 TILE %.1f us, turbo3 materialize %.1f us, turbo3 VEC %.1f us\n",
                n, us[0], flop / us[0] * 1e-6, us[1], us[2], us[3]);
    std::printf("pp%d ratios: TILE/f16-TILE speed %.3fx, TILE vs materialize %.3fx, TILE vs VEC %.2fx\n", n,
                us[1] / us[0], us[2] / us[0], us[3] / us[0]);
    if (have_scalar)
      std::printf("pp%d: turbo3 VEC scalar variant %.1f us, TILE vs VEC scalar %.2fx\n", n, us[4], us[4] / us[0]);
  }
  TURBO3_CHECK_HIP(hipEventDestroy(e0));
  TURBO3_CHECK_HIP(hipEventDestroy(e1));
}
