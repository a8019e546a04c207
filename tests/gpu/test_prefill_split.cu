// The MMA prefill kernels with their keys split over several work-groups and merged
// (launch_options::kv_splits, prefill_args::kv_splits) against ref::attention on identical quantized
// bytes, limit NMSE 1e-5: forced split counts (including more splits than key tiles and splits
// left empty by a causal window or a mask) over both head dims, every K/V pair, masks, causal,
// sinks, ALiBi, softcap, both rotation modes, the permuted output; every MMA form; the split the
// launcher picks for verify batches at depth (checked to split, with workspace) eagerly and under
// graph capture.
#include "attention_problem.hpp"

#include <vector>

using namespace turbo3;
using turbo3_test::attention_case;
using turbo3_test::attention_problem;
using turbo3_test::check_nmse;
using turbo3_test::forced;
using turbo3_test::nmse_limit;
using turbo3_test::device_buffer;

namespace {

turbo3_test::reported_nmse g_split("MMA with key splits");

const char* variant_name(mma_variant v) {
  return v == mma_variant::fragment ? "fragment" : v == mma_variant::warpgroup ? "warpgroup"
       : v == mma_variant::warp_specialized ? "warp-specialized" : "automatic";
}

// One problem through the MMA route with kv_splits forced to each of `splits` (0: the launcher's
// choice), for each MMA form that applies to its head dim.
void run_splits(const attention_case& c, std::initializer_list<int> splits, std::mt19937_64& rng) {
  attention_problem prob(c, rng);
  INFO(c.describe());
  for (mma_variant variant : {mma_variant::automatic, mma_variant::fragment, mma_variant::warp_specialized}) {
    if (variant != mma_variant::automatic && c.head_dim != 128 && c.head_dim != 256) continue;
    for (int s : splits) {
      INFO("mma " << variant_name(variant) << ", kv_splits " << s);
      launch_options opt;
      opt.kernel = kernel_choice::mma;
      opt.mma = variant;
      opt.kv_splits = s;
      REQUIRE(supported(prob.device_params(), opt) == status::ok);
      const double e = run_and_compare(prob, opt);
      check_nmse(g_split, e, c.describe() + " mma " + variant_name(variant) + " splits " + std::to_string(s));
    }
  }
}

}  // namespace

TEST_CASE("mma split: every K/V pair, D 128 and 256, plain and causal", "[mma][mma-split]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x5b117);
  const data_type types[2] = {data_type::f16, data_type::turbo3};
  for (int d : {128, 256})
    for (data_type k : types)
      for (data_type v : types)
        for (bool causal : {false, true}) {
          attention_case c = turbo3_test::gqa_case(d, 37, 1000);
          c.k_type = k;
          c.v_type = v;
          c.causal = causal;
          run_splits(c, {2, 3, 7}, rng);
        }
}

TEST_CASE("mma split: masks, sinks, ALiBi, softcap, rotation modes, layouts", "[mma][mma-split]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x5b118);
  for (int d : {128, 256}) {
    // ggml's causal mask over a verify-sized batch at depth, with sinks: the engine's shape.
    attention_case c = turbo3_test::gqa_case(d, 8, 4099);
    c.mask = true;
    c.mask_pattern = attention_case::mask_kind::causal;
    c.sinks = true;
    run_splits(c, {0, 2, 5, 64}, rng);
    // A random mask, ALiBi and softcap, f16 output in ggml's permuted layout.
    c = turbo3_test::gqa_case(d, 20, 700);
    c.mask = true;
    c.max_bias = 8.0f;
    c.softcap = 30.0f;
    c.out_type = data_type::f16;
    c.permuted_out = true;
    c.q_type = data_type::f16;
    run_splits(c, {2, 9}, rng);
    // A window mask: the early splits of late queries see nothing; the caller rotates.
    c = turbo3_test::gqa_case(d, 70, 1200);
    c.mask = true;
    c.mask_pattern = attention_case::mask_kind::window;
    c.window = 100;
    c.library_rotates = false;
    c.sinks = true;
    run_splits(c, {4, 13}, rng);
    // More splits than key tiles (capped), a single key, two sequences, the second codebook.
    c = turbo3_test::gqa_case(d, 5, 70);
    c.n_seq = 2;
    c.cb = codebook::legacy;
    run_splits(c, {64}, rng);
    c = turbo3_test::gqa_case(d, 3, 1);
    run_splits(c, {3}, rng);
    // Causal prefill where the query tiles' key runs differ (split per tile), GQA 4 over 32 heads.
    c = turbo3_test::gqa_case(d, 150, 170);
    c.n_head = 32;
    c.n_head_kv = 8;
    c.causal = true;
    run_splits(c, {2, 6}, rng);
  }
}

TEST_CASE("mma split: the launcher splits verify batches at depth, eagerly and under capture",
          "[mma][mma-split][capture]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x5b119);
  for (int d : {128, 256}) {
    // 32 rows per KV head: past the 16 the warp decode kernel takes (vec_takes_verify_batch)
    attention_case c = turbo3_test::gqa_case(d, 16, 20000);
    c.mask = true;
    c.mask_pattern = attention_case::mask_kind::causal;
    c.sinks = true;
    attention_problem prob(c, rng);
    INFO(c.describe());
    REQUIRE(route(prob.device_params()) == kernel_choice::mma);
    const size_t need = workspace_bytes(prob.device_params());
    INFO("workspace " << need);
    CHECK(need > 0);  // 8 work-groups on a whole GPU: the launcher splits their keys
    run_splits(c, {0}, rng);
    turbo3_test::owned_stream stream;
    device_buffer arena_memory(arena_allocator::footprint(need));
    arena_allocator arena(arena_memory.ptr, arena_memory.bytes);
    const double worst = turbo3_test::capture_and_replay(arena, stream.s, prob, rng, launch_options{}, 5, "split");
    g_split.record(worst, c.describe() + " captured");
    std::printf("capture (arena, MMA with key splits, D=%d): 5 replays, worst NMSE %.3e\n", d, worst);
  }
}

// Verify batches of up to 16 rows per KV head over turbo3 (one work-group of the warp kernel's wide
// form) go to VEC on NVIDIA; more rows, or f16 K/V, to the MMA key split (vec_takes_verify_batch).
TEST_CASE("routing: verify batches at depth by rows per KV head and K/V type", "[mma-split]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x5b11b);
  if (!detail::mma_by_default(platform::current_device_family())) return;
  struct expectation {
    int head_dim, n_q;
    data_type kv;
    kernel_choice route;
  };
  for (const expectation& x : {expectation{128, 4, data_type::turbo3, kernel_choice::vec},
                               expectation{256, 3, data_type::turbo3, kernel_choice::vec},
                               expectation{128, 5, data_type::turbo3, kernel_choice::vec},
                               expectation{256, 8, data_type::turbo3, kernel_choice::vec},
                               expectation{128, 9, data_type::turbo3, kernel_choice::mma},
                               expectation{256, 16, data_type::turbo3, kernel_choice::mma},
                               expectation{128, 4, data_type::f16, kernel_choice::mma}}) {
    attention_case c = turbo3_test::gqa_case(x.head_dim, x.n_q, 4096);  // 16 query heads over 8
    c.k_type = c.v_type = x.kv;
    c.causal = true;
    attention_problem prob(c, rng);
    INFO(c.describe());
    CHECK(route(prob.device_params()) == x.route);
    check_nmse(g_split, run_and_compare(prob), c.describe() + " routed");
  }
}

// Small split cases for compute-sanitizer runs (racecheck, memcheck): hidden from the default run.
TEST_CASE("mma split: small cases for the sanitizers", "[.mma-split-san]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x5b11a);
  for (int d : {128, 256}) {
    attention_case c = turbo3_test::gqa_case(d, 9, 300);
    c.mask = true;
    c.mask_pattern = attention_case::mask_kind::causal;
    c.sinks = true;
    run_splits(c, {3}, rng);
    c.k_type = data_type::f16;
    c.v_type = data_type::f16;
    run_splits(c, {2}, rng);
  }
}
