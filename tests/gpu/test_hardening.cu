// Hardening on the GPU: allocators under capture (forked branches and two streams sharing an
// arena; memory deallocated while its stream captures stays the graph's; hipMalloc/hipFree while
// another thread captures in global mode), an error the caller left pending, two host threads
// calling on two streams at once, and a turbo3 norm past fp16's range through write_rows and
// attention.
#include <algorithm>
#include <atomic>
#include <thread>

#include "attention_problem.hpp"

using namespace turbo3;
using turbo3_test::attention_case;
using turbo3_test::attention_problem;
using turbo3_test::decode_case;
using turbo3_test::device_buffer;
using turbo3_test::owned_stream;

namespace {

attention_case prefill_case() {
  attention_case c = turbo3_test::gqa_case(256, 40, 300);
  c.causal = true;
  return c;
}

// Records what an arena hands out, so a test can tell whether two calls shared bytes.
struct recording_allocator {
  static constexpr bool capture_safe = true;
  arena_allocator* arena;
  struct grant {
    uintptr_t begin, end;
    hipStream_t stream;
  };
  std::vector<grant> grants;
  void* allocate(size_t bytes, hipStream_t s) {
    void* p = arena->allocate(bytes, s);
    if (p) grants.push_back({reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes, s});
    return p;
  }
  void deallocate(void* p, size_t bytes, hipStream_t s) { arena->deallocate(p, bytes, s); }
};

bool disjoint(const recording_allocator::grant& a, const recording_allocator::grant& b) {
  return a.end <= b.begin || b.end <= a.begin;
}

bool all_bytes(const device_buffer& b, uint8_t value) {
  std::vector<uint8_t> host(b.bytes);
  b.download(host.data(), host.size());
  return std::all_of(host.begin(), host.end(), [&](uint8_t x) { return x == value; });
}

}  // namespace

// Two calls captured on forked branches of one capture (two streams joined by events) share one
// arena. Each captured call keeps its own region (no roll-back under capture), so the branches,
// which run at the same time on every replay, never write the same partials.
TEST_CASE("arena: two calls captured on forked branches get separate regions; 20 replays", "[hardening][capture]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xf02c);
  attention_problem a(decode_case(3000), rng), b(decode_case(2000), rng);
  owned_stream s0, s1;
  hipEvent_t fork = nullptr, join = nullptr;
  TURBO3_CHECK_HIP(hipEventCreate(&fork));
  TURBO3_CHECK_HIP(hipEventCreate(&join));
  const size_t need_a = workspace_bytes(a.device_params()), need_b = workspace_bytes(b.device_params());
  REQUIRE(need_a > 0);
  REQUIRE(need_b > 0);
  const size_t regions = arena_allocator::footprint(need_a) + arena_allocator::footprint(need_b);
  device_buffer memory(regions);
  arena_allocator arena(memory.ptr, memory.bytes);

  hipGraph_t graph = nullptr;
  TURBO3_CHECK_HIP(hipStreamBeginCapture(s0.s, hipStreamCaptureModeGlobal));
  CHECK(hipEventRecord(fork, s0.s) == hipSuccess);
  CHECK(hipStreamWaitEvent(s1.s, fork, 0) == hipSuccess);
  const status sa = flash_attention(a.device_params(), arena, s0.s);
  const status sb = flash_attention(b.device_params(), arena, s1.s);
  CHECK(hipEventRecord(join, s1.s) == hipSuccess);
  CHECK(hipStreamWaitEvent(s0.s, join, 0) == hipSuccess);
  TURBO3_CHECK_HIP(hipStreamEndCapture(s0.s, &graph));
  REQUIRE(sa == status::ok);
  REQUIRE(sb == status::ok);
  CHECK(arena.used() == regions);  // both regions kept for the graph
  hipGraphExec_t exec = nullptr;
  TURBO3_CHECK_HIP(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
  double worst = 0;
  for (int replay = 0; replay < 20; ++replay) {
    a.refill(rng);
    b.refill(rng);
    a.poison_output();
    b.poison_output();
    TURBO3_CHECK_HIP(hipGraphLaunch(exec, s0.s));
    TURBO3_CHECK_HIP(hipStreamSynchronize(s0.s));
    const double ea = a.compare_with_reference(), eb = b.compare_with_reference();
    INFO("replay " << replay << ": NMSE " << ea << " / " << eb);
    REQUIRE(ea <= turbo3_test::nmse_limit);
    REQUIRE(eb <= turbo3_test::nmse_limit);
    worst = std::max({worst, ea, eb});
  }
  std::printf("arena, forked capture branches: 20 replays, worst NMSE %.3e\n", worst);
  TURBO3_CHECK_HIP(hipGraphExecDestroy(exec));
  TURBO3_CHECK_HIP(hipGraphDestroy(graph));
  TURBO3_CHECK_HIP(hipEventDestroy(fork));
  TURBO3_CHECK_HIP(hipEventDestroy(join));
  arena.reset();
  CHECK(arena.used() == 0);
}

// Eager calls on two streams with one arena: the second stream never gets the bytes the first
// stream's call gave back while that call may still run.
TEST_CASE("arena: eager calls on two streams never share bytes", "[hardening]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x2572);
  attention_problem a(decode_case(3000), rng), b(decode_case(3000), rng);
  owned_stream s0, s1;
  const size_t need = workspace_bytes(a.device_params());
  REQUIRE(need > 0);
  device_buffer memory(4 * arena_allocator::footprint(need));
  arena_allocator arena(memory.ptr, memory.bytes);
  recording_allocator rec{&arena, {}};
  double worst = 0;
  for (int round = 0; round < 10; ++round) {
    a.refill(rng);
    b.refill(rng);
    a.poison_output();
    b.poison_output();
    rec.grants.clear();
    REQUIRE(flash_attention(a.device_params(), rec, s0.s) == status::ok);
    REQUIRE(flash_attention(b.device_params(), rec, s1.s) == status::ok);
    REQUIRE(flash_attention(a.device_params(), rec, s0.s) == status::ok);  // s0 again: may reuse its own bytes
    REQUIRE(rec.grants.size() == 3);
    CHECK(disjoint(rec.grants[0], rec.grants[1]));
    CHECK(disjoint(rec.grants[2], rec.grants[1]));
    TURBO3_CHECK_HIP(hipStreamSynchronize(s0.s));
    TURBO3_CHECK_HIP(hipStreamSynchronize(s1.s));
    const double ea = a.compare_with_reference(), eb = b.compare_with_reference();
    INFO("round " << round << ": NMSE " << ea << " / " << eb);
    REQUIRE(ea <= turbo3_test::nmse_limit);
    REQUIRE(eb <= turbo3_test::nmse_limit);
    worst = std::max({worst, ea, eb});
    arena.reset();  // both streams are idle
  }
  std::printf("arena, two streams: 10 rounds, worst NMSE %.3e\n", worst);
}

// Plain memory allocated eagerly and deallocated inside a capture is the graph's: eager requests
// and deallocations after the capture must not hipFree it (they did, and the replays then wrote
// freed memory); release_deferred() frees it once the graph is gone.
TEST_CASE("adaptive allocator: memory deallocated under capture stays the graph's; 10 replays", "[hardening][memory]") {
  owned_stream ts;
  constexpr size_t threshold = size_t{1} << 20, n = size_t{4} << 20;
  adaptive_allocator alloc(threshold);
  device_buffer result(n);
  void* big = alloc.allocate(n, ts.s);
  REQUIRE(big);
  REQUIRE(alloc.last_route() == alloc_route::plain);

  hipGraph_t graph = nullptr;
  TURBO3_CHECK_HIP(hipStreamBeginCapture(ts.s, hipStreamCaptureModeGlobal));
  CHECK(hipMemsetAsync(big, 0x5a, n, ts.s) == hipSuccess);
  CHECK(hipMemcpyAsync(result.ptr, big, n, hipMemcpyDeviceToDevice, ts.s) == hipSuccess);
  alloc.deallocate(big, n, ts.s);
  TURBO3_CHECK_HIP(hipStreamEndCapture(ts.s, &graph));
  REQUIRE(graph);
  CHECK(alloc.deferred_plain() == 1);
  hipGraphExec_t exec = nullptr;
  TURBO3_CHECK_HIP(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));

  for (int i = 0; i < 4; ++i) {  // eager large requests and plain deallocations
    void* p = alloc.allocate(n, ts.s);
    REQUIRE(p);
    CHECK(alloc.last_route() == alloc_route::plain);
    CHECK(p != big);
    TURBO3_CHECK_HIP(hipMemsetAsync(p, 0x11, n, ts.s));
    alloc.deallocate(p, n, ts.s);
  }
  CHECK(alloc.deferred_plain() == 1);
  CHECK(alloc.live_plain() == 1);
  for (int replay = 0; replay < 10; ++replay) {
    result.poison(0);
    TURBO3_CHECK_HIP(hipGraphLaunch(exec, ts.s));
    TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));
    REQUIRE(all_bytes(result, 0x5a));
  }
  TURBO3_CHECK_HIP(hipGraphExecDestroy(exec));
  TURBO3_CHECK_HIP(hipGraphDestroy(graph));
  alloc.release_deferred();
  CHECK(alloc.live_plain() == 0);
  CHECK(alloc.failed_frees() == 0);
  CHECK(hipPeekAtLastError() == hipSuccess);
}

// device_allocator: a pointer deallocated while its stream captures is held (hipFree then would
// be refused and invalidate the capture), the graph replays over it, release_held() frees it.
TEST_CASE("device allocator: memory deallocated under capture is held for the graph; 5 replays", "[hardening][memory]") {
  owned_stream ts;
  constexpr size_t n = size_t{1} << 20;
  device_allocator dev;
  device_buffer result(n);
  void* p = dev.allocate(n, ts.s);
  REQUIRE(p);
  hipGraph_t graph = nullptr;
  TURBO3_CHECK_HIP(hipStreamBeginCapture(ts.s, hipStreamCaptureModeGlobal));
  CHECK(hipMemsetAsync(p, 0x77, n, ts.s) == hipSuccess);
  CHECK(hipMemcpyAsync(result.ptr, p, n, hipMemcpyDeviceToDevice, ts.s) == hipSuccess);
  dev.deallocate(p, n, ts.s);
  const hipError_t end = hipStreamEndCapture(ts.s, &graph);
  CHECK(end == hipSuccess);  // the capture was not invalidated
  REQUIRE(graph);
  CHECK(dev.held() == 1);
  hipGraphExec_t exec = nullptr;
  TURBO3_CHECK_HIP(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
  for (int replay = 0; replay < 5; ++replay) {
    result.poison(0);
    TURBO3_CHECK_HIP(hipGraphLaunch(exec, ts.s));
    TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));
    REQUIRE(all_bytes(result, 0x77));
  }
  TURBO3_CHECK_HIP(hipGraphExecDestroy(exec));
  TURBO3_CHECK_HIP(hipGraphDestroy(graph));
  dev.release_held();
  CHECK(dev.held() == 0);
  CHECK(dev.retrying() == 0);
  CHECK(dev.dropped() == 0);
}

// While another thread captures in global mode, a plain hipMalloc or hipFree from this thread is
// refused and invalidates that capture, unless made in relaxed mode as the allocators now do.
TEST_CASE("allocators: hipMalloc and hipFree while another thread captures in global mode", "[hardening][memory]") {
  owned_stream capturing, mine;
  device_buffer target(1 << 16);
  std::atomic<int> phase{0};
  hipError_t begin = hipSuccess, memset = hipSuccess, end = hipSuccess;
  hipGraph_t graph = nullptr;
  std::thread capturer([&] {
    begin = hipStreamBeginCapture(capturing.s, hipStreamCaptureModeGlobal);
    memset = hipMemsetAsync(target.ptr, 0x42, target.bytes, capturing.s);
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    end = hipStreamEndCapture(capturing.s, &graph);
  });
  while (phase.load() != 1) std::this_thread::yield();

  device_allocator dev;
  void* p = dev.allocate(size_t{1} << 20, mine.s);
  const bool dev_allocated = p != nullptr;
  if (p) dev.deallocate(p, size_t{1} << 20, mine.s);
  const int dev_retrying = dev.retrying(), dev_held = dev.held();

  adaptive_allocator adaptive(size_t{1} << 10);
  void* q = adaptive.allocate(size_t{1} << 20, mine.s);
  const bool adaptive_allocated = q != nullptr;
  const alloc_route route = adaptive.last_route();
  if (q) adaptive.deallocate(q, size_t{1} << 20, mine.s);
  const int adaptive_live = adaptive.live_plain();

  phase = 2;
  capturer.join();
  CHECK(begin == hipSuccess);
  CHECK(memset == hipSuccess);
  CHECK(dev_allocated);
  CHECK(dev_retrying == 0);
  CHECK(dev_held == 0);
  CHECK(adaptive_allocated);
  CHECK(route == alloc_route::plain);
  CHECK(adaptive_live == 0);
  CHECK(end == hipSuccess);  // the other thread's capture was not invalidated
  REQUIRE(graph);
  hipGraphExec_t exec = nullptr;
  TURBO3_CHECK_HIP(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
  target.poison(0);
  TURBO3_CHECK_HIP(hipGraphLaunch(exec, capturing.s));
  TURBO3_CHECK_HIP(hipStreamSynchronize(capturing.s));
  CHECK(all_bytes(target, 0x42));
  TURBO3_CHECK_HIP(hipGraphExecDestroy(exec));
  TURBO3_CHECK_HIP(hipGraphDestroy(graph));
}

// An error the caller left in the runtime's last error is the caller's: every route and
// write_rows succeed past it, and decode and write_rows leave it there (the library once took it
// for a failed launch of its own, returned runtime_error and cleared it).
TEST_CASE("an error the caller left pending is neither cleared nor blamed", "[hardening]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xe770);
  attention_problem decode(decode_case(3000), rng), prefill(prefill_case(), rng);
  owned_stream ts;
  stream_pool_allocator pool;
  int devices = 0;
  TURBO3_CHECK_HIP(hipGetDeviceCount(&devices));
  auto leave_error = [&] {
    hipDeviceProp_t prop;
    const hipError_t e = hipGetDeviceProperties(&prop, devices + 7);  // no such device
    REQUIRE(e != hipSuccess);
    REQUIRE(hipPeekAtLastError() == e);
    return e;
  };
  struct routed {
    const char* name;
    attention_problem* prob;
    kernel_choice kernel;
  };
  const routed routes[] = {{"decode", &decode, kernel_choice::automatic},
                           {"prefill (automatic)", &prefill, kernel_choice::automatic},
                           {"TILE", &prefill, kernel_choice::tile},
                           {"materialize", &prefill, kernel_choice::materialize}};
  for (const routed& r : routes) {
    INFO(r.name);
    launch_options opt;
    opt.kernel = r.kernel;
    r.prob->poison_output();
    const hipError_t pending = leave_error();
    CHECK(flash_attention(r.prob->device_params(), pool, ts.s, opt) == status::ok);
    if (r.prob == &decode) {
      CHECK(hipPeekAtLastError() == pending);
      CHECK(hipGetLastError() == pending);  // the caller's own check, which clears it
    } else {
      // The prefill kernels launch with more than 48 KB of dynamic shared memory, and the runtime
      // itself leaves no error behind such a launch (H100, CUDA 13.0): the library clears nothing
      // and blames nothing (the status above), but the caller's error may be gone.
      const hipError_t after = hipGetLastError();
      CHECK((after == pending || after == hipSuccess));
    }
    TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));
    const double e = r.prob->compare_with_reference();
    INFO("NMSE " << e);
    CHECK(e <= turbo3_test::nmse_limit);
  }
  device_buffer src(128 * 4), dst(50);
  src.poison(0);
  const row_source rows{src.ptr, data_type::f32, 128, 1, 512};
  const cache_view cache{dst.ptr, data_type::turbo3, 128, 1, 50};
  const hipError_t pending = leave_error();
  CHECK(write_rows(rows, static_cast<const int32_t*>(nullptr), cache, ts.s) == status::ok);
  CHECK(hipGetLastError() == pending);
  TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));
}

// Two host threads, each with its own stream, allocator and problem, call flash_attention at the
// same time, 30 times each, decode on one and prefill on the other. (Catch's assertions are not
// thread-safe: the threads record, the main thread checks.)
TEST_CASE("two host threads call flash_attention on two streams at once", "[hardening]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x7777);
  attention_problem decode(decode_case(5000), rng), prefill(prefill_case(), rng);
  std::atomic<int> ready{0};
  struct outcome {
    int calls = 0, failed = 0;
    double worst = 0;
  };
  outcome results[2];
  auto worker = [&](int t) {
    attention_problem& prob = t == 0 ? decode : prefill;
    std::mt19937_64 local(turbo3_test::run_seed() ^ (0x1000u + t));
    hipStream_t s = nullptr;
    if (hipStreamCreateWithFlags(&s, hipStreamNonBlocking) != hipSuccess) {
      results[t].failed = -1;
      return;
    }
    stream_pool_allocator pool;
    ++ready;
    while (ready.load() != 2) std::this_thread::yield();
    for (int i = 0; i < 30; ++i) {
      if (i % 10 == 0) prob.refill(local);
      const status st = flash_attention(prob.device_params(), pool, s);
      ++results[t].calls;
      if (st != status::ok || hipStreamSynchronize(s) != hipSuccess) {
        ++results[t].failed;
        continue;
      }
      const double e = prob.compare_with_reference();
      if (!(e <= results[t].worst)) results[t].worst = e;  // NaN sticks
    }
    (void)hipStreamDestroy(s);
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  for (int t = 0; t < 2; ++t) {
    INFO((t == 0 ? "decode" : "prefill") << " thread: " << results[t].calls << " calls, " << results[t].failed
                                         << " failed, worst NMSE " << results[t].worst);
    CHECK(results[t].calls == 30);
    CHECK(results[t].failed == 0);
    CHECK(results[t].worst <= turbo3_test::nmse_limit);
  }
  std::printf("two threads: decode worst NMSE %.3e, prefill worst NMSE %.3e\n", results[0].worst, results[1].worst);
}

// A finite row with one value of 65000 (or more) has a corrected group norm past 65504: write_rows
// stores 65504, byte for byte as ref::quantize_row does, and attention over the cache is finite
// and matches the reference.
TEST_CASE("write_rows: a norm past fp16's range is stored as 65504; attention over it stays finite", "[hardening][write]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x0f10);
  constexpr int64_t D = 256, n_kv = 8;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_kv * D));
  for (float& v : x) v = normal(rng);
  const float big[] = {65000.0f, -65000.0f, 1e6f, 3e38f};
  for (int64_t r = 0; r < n_kv; r += 2) x[static_cast<size_t>(r * D + 5 + r)] = big[(r / 2) % 4];
  const size_t row = row_bytes(data_type::turbo3, D);
  device_buffer d_src(x.size() * 4), d_cache(row * n_kv), d_q(D * 4 * 4), d_out(D * 4 * 4);
  d_src.upload(x.data(), x.size() * 4);
  d_cache.poison(0);
  const row_source src{d_src.ptr, data_type::f32, D, n_kv, D * 4};
  const cache_view cache{d_cache.ptr, data_type::turbo3, D, n_kv, row};
  REQUIRE(write_rows(src, static_cast<const int64_t*>(nullptr), cache, nullptr) == status::ok);
  TURBO3_CHECK_HIP(hipDeviceSynchronize());
  std::vector<block_turbo3> got(static_cast<size_t>(n_kv * 2)), want(got.size());
  d_cache.download(got.data(), got.size() * sizeof(block_turbo3));
  ref::quantize_row(x.data(), want.data(), n_kv * D);
  int saturated = 0;
  for (size_t b = 0; b < want.size(); ++b) {
    INFO("block " << b);
    CHECK(std::memcmp(&got[b], &want[b], sizeof(block_turbo3)) == 0);
    saturated += got[b].norm == 0x7bff;
  }
  CHECK(saturated == 4);

  // One query per head of 4 query heads over one KV head: K = V = the cache.
  std::vector<float> q(static_cast<size_t>(D * 4));
  for (float& v : q) v = normal(rng);
  d_q.upload(q.data(), q.size() * 4);
  attention_params p;
  p.q.data = d_q.ptr; p.q.type = data_type::f32;
  p.q.ne[0] = D; p.q.ne[1] = 1; p.q.ne[2] = 4; p.q.ne[3] = 1;
  p.q.nb[1] = D * 4; p.q.nb[2] = D * 4; p.q.nb[3] = D * 4 * 4;
  for (tensor_view* t : {&p.k, &p.v}) {
    t->data = d_cache.ptr; t->type = data_type::turbo3;
    t->ne[0] = D; t->ne[1] = n_kv; t->ne[2] = 1; t->ne[3] = 1;
    t->nb[1] = row; t->nb[2] = t->nb[3] = row * n_kv;
  }
  p.out.data = d_out.ptr; p.out.type = data_type::f32;
  p.out.ne[0] = D; p.out.ne[1] = 1; p.out.ne[2] = 4; p.out.ne[3] = 1;
  p.out.nb[1] = D * 4; p.out.nb[2] = D * 4; p.out.nb[3] = D * 4 * 4;
  p.scale = 1e-5f;  // keeps the scores of the 65504-norm keys moderate
  stream_pool_allocator pool;
  d_out.poison();
  REQUIRE(flash_attention(p, pool, nullptr) == status::ok);
  TURBO3_CHECK_HIP(hipDeviceSynchronize());
  std::vector<float> out(static_cast<size_t>(D * 4)), expected(out.size());
  d_out.download(out.data(), out.size() * 4);
  attention_params h = p;
  h.q.data = q.data();
  h.k.data = h.v.data = want.data();
  h.out.data = expected.data();
  ref::attention(h);
  for (float v : out) REQUIRE(std::isfinite(v));
  const double e = ref::nmse(out.data(), expected.data(), out.size());
  INFO("NMSE " << e);
  CHECK(e <= turbo3_test::nmse_limit);
}
