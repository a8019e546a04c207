// Soak: 100,000 replays of a captured decode call and of a captured prefill call. Every 1,000
// replays the output is compared with ref::attention (NMSE limit 1e-5) and the inputs get new
// contents; device memory in use (hipMemGetInfo) must not grow. Hidden from the default run:
// ctest's gpu_soak entry runs it ("[soak]"); TURBO3_SOAK_REPLAYS shortens it for a quick look.
#include <algorithm>
#include <cstdlib>

#include "attention_problem.hpp"

using namespace turbo3;
using turbo3_test::attention_case;
using turbo3_test::attention_problem;

namespace {

int soak_replays() {
  const char* env = std::getenv("TURBO3_SOAK_REPLAYS");
  const int n = env ? std::atoi(env) : 100000;
  return n > 0 ? n : 100000;
}

size_t device_memory_in_use() {
  size_t free_bytes = 0, total_bytes = 0;
  TURBO3_CHECK_HIP(hipMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
}

// Captures one call of prob (global mode), replays it `replays` times on one stream; every
// `every` replays: synchronize, check NMSE and memory, refill the inputs.
template <class Allocator>
void soak(attention_problem& prob, Allocator& allocator, const launch_options& opt, const char* name,
          std::mt19937_64& rng) {
  const int replays = soak_replays(), every = 1000;
  hipStream_t stream = nullptr;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  hipGraph_t graph = nullptr;
  hipGraphExec_t exec = nullptr;
  TURBO3_CHECK_HIP(hipStreamBeginCapture(stream, hipStreamCaptureModeGlobal));
  const status s = flash_attention(prob.device_params(), allocator, stream, opt);
  TURBO3_CHECK_HIP(hipStreamEndCapture(stream, &graph));
  REQUIRE(s == status::ok);
  TURBO3_CHECK_HIP(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));

  // Memory in use once the graph has run (its allocations, if any, are made on first launch).
  prob.poison_output();
  TURBO3_CHECK_HIP(hipGraphLaunch(exec, stream));
  TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
  const size_t before = device_memory_in_use();
  size_t highest = before;
  double worst = 0;
  int checkpoints = 0;
  for (int replay = 0; replay < replays; ++replay) {
    if (replay % every == 0) {
      TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
      if (replay > 0) {
        const double e = prob.compare_with_reference();
        INFO(name << ": replay " << replay << ", NMSE " << e);
        REQUIRE(e <= turbo3_test::nmse_limit);
        worst = std::max(worst, e);
        ++checkpoints;
      }
      highest = std::max(highest, device_memory_in_use());
      prob.refill(rng);
      prob.poison_output();
    }
    TURBO3_CHECK_HIP(hipGraphLaunch(exec, stream));
  }
  TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
  const double e = prob.compare_with_reference();
  INFO(name << ": after " << replays << " replays, NMSE " << e);
  REQUIRE(e <= turbo3_test::nmse_limit);
  worst = std::max(worst, e);
  ++checkpoints;
  const size_t after = device_memory_in_use();
  highest = std::max(highest, after);
  std::printf("soak (%s): %d replays, %d checkpoints, worst NMSE %.3e; device memory in use %.1f MiB before, "
              "%.1f MiB after, %.1f MiB at most\n",
              name, replays, checkpoints, worst, before / 1048576.0, after / 1048576.0, highest / 1048576.0);
  // The driver's own bookkeeping may move by a page or two; a leak per replay or per checkpoint
  // shows as far more (100 checkpoints, 100,000 replays).
  constexpr size_t slack = size_t{2} << 20;
  CHECK(highest <= before + slack);
  TURBO3_CHECK_HIP(hipGraphExecDestroy(exec));
  TURBO3_CHECK_HIP(hipGraphDestroy(graph));
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
}

}  // namespace

// Decode: D = 256, 16 query heads over 8, 3000 keys, mask and sinks; the split partials come from
// the stream-ordered pool (graph allocation nodes, so a leak there would show in memory).
TEST_CASE("soak: 100,000 replays of a captured decode call, new inputs every 1,000", "[.][soak]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x50a7);
  attention_problem prob(turbo3_test::decode_case(), rng);
  stream_pool_allocator pool;
  soak(prob, pool, launch_options{}, "decode, stream pool", rng);
}

// Prefill: D = 256, 16 query heads over 8, 48 queries over 400 keys, causal (the automatic route:
// the warpgroup MMA kernel on sm_90, else MMA or TILE); and the materialize route, whose dense
// copies come from the adaptive allocator's pool while capturing.
TEST_CASE("soak: 100,000 replays of a captured prefill call, new inputs every 1,000", "[.][soak]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x50a8);
  attention_case c = turbo3_test::gqa_case(256, 48, 400);
  c.causal = true;
  attention_problem prob(c, rng);
  stream_pool_allocator pool;
  soak(prob, pool, launch_options{}, "prefill, automatic route", rng);
  adaptive_allocator adaptive;
  launch_options materialize;
  materialize.kernel = kernel_choice::materialize;
  soak(prob, adaptive, materialize, "prefill, materialize, adaptive allocator", rng);
}
