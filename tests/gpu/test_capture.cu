// Graph capture of decode calls: arena and stream-ordered pool replayed with new contents; a
// capture with a non-capture-safe allocator returns capture_unsafe and the stream stays usable.
#include <algorithm>

#include "attention_problem.hpp"

using namespace turbo3;
using turbo3_test::attention_case;
using turbo3_test::attention_problem;
using turbo3_test::decode_case;
using turbo3_test::device_buffer;

namespace {

template <class Allocator>
void capture_and_replay(Allocator& allocator, hipStream_t stream, attention_problem& prob, std::mt19937_64& rng,
                        const char* name) {
  const double worst = turbo3_test::capture_and_replay(allocator, stream, prob, rng, launch_options{}, 20, name);
  std::printf("capture (%s): 20 replays with new Q/K/V, worst NMSE %.3e\n", name, worst);
}

}  // namespace

TEST_CASE("capture: decode with the arena allocator, 20 replays", "[capture]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xa7e);
  attention_problem prob(decode_case(), rng);
  hipStream_t stream;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  const size_t need = workspace_bytes(prob.device_params());
  REQUIRE(need > 0);
  device_buffer arena_memory(arena_allocator::footprint(need));
  arena_allocator arena(arena_memory.ptr, arena_memory.bytes);
  capture_and_replay(arena, stream, prob, rng, "arena");
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
}

TEST_CASE("capture: decode with the stream-ordered pool, 20 replays", "[capture]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x9001);
  attention_case c = decode_case();
  c.k_type = data_type::turbo3;
  c.v_type = data_type::f16;
  attention_problem prob(c, rng);
  hipStream_t stream;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  stream_pool_allocator pool;
  capture_and_replay(pool, stream, prob, rng, "stream pool");
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
}

namespace {
struct offset_allocator {  // 4 bytes past what the arena hands out
  static constexpr bool capture_safe = true;
  arena_allocator* arena;
  void* allocate(size_t bytes, hipStream_t s) {
    void* p = arena->allocate(bytes + 4, s);
    return p ? static_cast<char*>(p) + 4 : nullptr;
  }
  void deallocate(void* p, size_t bytes, hipStream_t s) { arena->deallocate(static_cast<char*>(p) - 4, bytes + 4, s); }
};
static_assert(is_allocator_v<offset_allocator>, "an allocator");
}  // namespace

// The allocator concept promises no alignment: an allocator that hands out memory 4 bytes past a
// 256-byte boundary still gets correct results, eagerly and under capture: the decode's split
// partials (read with 16-byte loads) and the materialize route's f16 copies and its MMA call's
// partial rows (16-byte loads) start at aligned boundaries inside the workspace.
TEST_CASE("capture: decode and materialize with an allocator that hands out 4-byte-aligned memory", "[capture]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x0ff5);
  attention_problem prob(decode_case(), rng);
  hipStream_t stream;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  launch_options materialize;
  materialize.kernel = kernel_choice::materialize;
  const size_t need =
      std::max(workspace_bytes(prob.device_params()), workspace_bytes(prob.device_params(), materialize));
  // The eager call rolls back; the captured one keeps its region (no roll-back under capture),
  // above the eager call's only if the stream differs: one stream here, so one region suffices.
  device_buffer arena_memory(arena_allocator::footprint(need + 4));
  arena_allocator arena(arena_memory.ptr, arena_memory.bytes);
  offset_allocator offset{&arena};
  double worst = 0;
  for (const launch_options& opt : {launch_options{}, materialize}) {
    arena.reset();  // the previous option's graph is gone; its captured region comes back
    prob.poison_output();
    REQUIRE(flash_attention(prob.device_params(), offset, stream, opt) == status::ok);
    TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
    const double e = prob.compare_with_reference();
    INFO((opt.kernel == kernel_choice::materialize ? "materialize" : "decode") << ", eager: NMSE " << e);
    REQUIRE(e <= turbo3_test::nmse_limit);
    worst = std::max(worst, e);
    worst = std::max(worst, turbo3_test::capture_and_replay(offset, stream, prob, rng, opt, 4, "offset"));
  }
  std::printf("capture (4-byte-aligned allocator): decode and materialize, eager and 4 replays each, worst NMSE %.3e\n",
              worst);
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
}

// The deep-context warp kernel (6 warps, 64.5 KB of shared memory): run alone ("[capture-deep]"),
// its first launch, with the kernel's shared-memory limit raised, is inside the capture.
TEST_CASE("capture: deep-context decode (65573 keys) with the arena allocator, 2 replays", "[capture][capture-deep]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xdee9);
  attention_case c = decode_case();
  c.n_kv = 65573;
  attention_problem prob(c, rng);
  hipStream_t stream;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  device_buffer arena_memory(arena_allocator::footprint(workspace_bytes(prob.device_params())));
  arena_allocator arena(arena_memory.ptr, arena_memory.bytes);
  const double worst = turbo3_test::capture_and_replay(arena, stream, prob, rng, launch_options{}, 2, "arena, deep");
  std::printf("capture (arena, deep): 2 replays with new Q/K/V, worst NMSE %.3e\n", worst);
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
}

// Caller-owned counters (launch_options::counters): each call leaves them zero for the next, so
// eager calls and graph replays that share them stay correct (a call that left a count behind
// would skip keys in the next one); too little memory or a misaligned pointer is refused. Two
// shapes: one decode row (the warp kernel merges its splits), and GQA 8 over one KV head at
// D = 256, whose 141 splits the combine kernel merges (36 merge round trips per warp:
// vec_warp_combines).
TEST_CASE("capture: decode with caller-owned counters, eager and 20 replays, left zero", "[capture][counters]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xc0c0);
  attention_case one_kv_head = decode_case();
  one_kv_head.head_dim = 256;
  one_kv_head.n_head = 8;
  one_kv_head.n_head_kv = 1;
  one_kv_head.n_kv = 9001;
  for (const attention_case& c : {decode_case(), one_kv_head}) {
  INFO(c.describe());
  attention_problem prob(c, rng);
  hipStream_t stream;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  launch_options opt;
  const size_t need = counter_bytes(prob.device_params(), opt);
  REQUIRE(need > 0);
  device_buffer counters(need + 128);  // hipMalloc: at least 256-byte aligned
  TURBO3_CHECK_HIP(hipMemset(counters.ptr, 0, need + 128));
  opt.counters = counters.ptr;
  opt.counters_bytes = need;
  device_buffer arena_memory(arena_allocator::footprint(workspace_bytes(prob.device_params(), opt)));
  arena_allocator arena(arena_memory.ptr, arena_memory.bytes);
  auto counters_zero = [&] {
    std::vector<unsigned> c(need / sizeof(unsigned));
    TURBO3_CHECK_HIP(hipMemcpy(c.data(), counters.ptr, need, hipMemcpyDeviceToHost));
    return std::all_of(c.begin(), c.end(), [](unsigned v) { return v == 0u; });
  };

  launch_options small = opt;
  small.counters_bytes = need - 4;
  launch_options misaligned = opt;
  misaligned.counters = static_cast<char*>(counters.ptr) + 64;
  prob.poison_output();
  CHECK(flash_attention(prob.device_params(), arena, stream, small) == status::invalid_argument);
  CHECK(flash_attention(prob.device_params(), arena, stream, misaligned) == status::invalid_argument);

  for (int i = 0; i < 4; ++i) {
    prob.refill(rng);
    prob.poison_output();
    arena.reset();
    REQUIRE(flash_attention(prob.device_params(), arena, stream, opt) == status::ok);
    TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
    const double e = prob.compare_with_reference();
    INFO("eager call " << i << ": NMSE " << e);
    REQUIRE(e <= turbo3_test::nmse_limit);
    REQUIRE(counters_zero());
  }
  arena.reset();
  const double worst = turbo3_test::capture_and_replay(arena, stream, prob, rng, opt, 20, "arena, caller-owned counters");
  CHECK(counters_zero());
  std::printf("capture (arena, caller-owned counters, %s): 4 eager calls and 20 replays, worst NMSE %.3e\n",
              c.describe().c_str(), worst);
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
  }
}

TEST_CASE("capture: a non-capture-safe allocator gives capture_unsafe and the stream stays usable", "[capture]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xbad);
  attention_problem prob(decode_case(), rng);
  hipStream_t stream;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  device_allocator plain;
  prob.poison_output();
  hipGraph_t graph = nullptr;
  TURBO3_CHECK_HIP(hipStreamBeginCapture(stream, hipStreamCaptureModeGlobal));
  const status s = flash_attention(prob.device_params(), plain, stream);
  TURBO3_CHECK_HIP(hipStreamEndCapture(stream, &graph));
  CHECK(s == status::capture_unsafe);
  if (graph) TURBO3_CHECK_HIP(hipGraphDestroy(graph));
  // Eager on the same stream, same allocator: correct.
  REQUIRE(flash_attention(prob.device_params(), plain, stream) == status::ok);
  TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
  const double e = prob.compare_with_reference();
  INFO("eager after refused capture: NMSE " << e);
  CHECK(e <= turbo3_test::nmse_limit);
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
}
