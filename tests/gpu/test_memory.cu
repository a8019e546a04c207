// The allocators of memory.hpp: arena arithmetic, the stream-ordered pool, the adaptive policy's
// routes, and capture behaviour under the strictest mode (hipStreamCaptureModeGlobal).
#include "gpu_common.hpp"

#include <cstdint>
#include <vector>

#include "turbo3/memory.hpp"

using turbo3::adaptive_allocator;
using turbo3::alloc_route;
using turbo3::arena_allocator;
using turbo3::device_allocator;
using turbo3::status;
using turbo3::stream_pool_allocator;

static_assert(turbo3::is_allocator_v<arena_allocator>, "arena models the allocator concept");
static_assert(turbo3::is_allocator_v<stream_pool_allocator>, "pool models the allocator concept");
static_assert(turbo3::is_allocator_v<device_allocator>, "device models the allocator concept");
static_assert(turbo3::is_allocator_v<adaptive_allocator>, "adaptive models the allocator concept");
static_assert(!turbo3::is_allocator_v<int>, "int is no allocator");
static_assert(arena_allocator::capture_safe && stream_pool_allocator::capture_safe &&
                  adaptive_allocator::capture_safe && !device_allocator::capture_safe,
              "capture safety of the provided allocators");

namespace {

using test_stream = turbo3_test::owned_stream;

bool aligned256(const void* p) { return reinterpret_cast<uintptr_t>(p) % 256 == 0; }

// The stream still takes work: a memset and a synchronize succeed.
void require_stream_usable(hipStream_t s) {
  turbo3_test::device_buffer probe(4096);
  TURBO3_CHECK_HIP(hipMemsetAsync(probe.ptr, 0x3c, probe.bytes, s));
  TURBO3_CHECK_HIP(hipStreamSynchronize(s));
  std::vector<unsigned char> host(probe.bytes);
  probe.download(host.data(), host.size());
  CHECK(host.front() == 0x3c);
  CHECK(host.back() == 0x3c);
}

constexpr size_t huge_request = size_t{1} << 60;  // no device has this much

}  // namespace

TEST_CASE("memory: arena alignment, exhaustion, roll-back and reset", "[memory]") {
  test_stream ts;
  turbo3_test::device_buffer buf(64 * 1024);
  // A base one byte past a 256-byte boundary: the arena rounds it up and loses 255 bytes.
  arena_allocator arena(static_cast<unsigned char*>(buf.ptr) + 1, buf.bytes - 1);
  REQUIRE(aligned256(buf.ptr));
  CHECK(arena.base() == static_cast<unsigned char*>(buf.ptr) + 256);
  CHECK(arena.capacity() == 255 * 256);
  CHECK(arena.used() == 0);

  void* a = arena.allocate(1, ts.s);
  void* b = arena.allocate(300, ts.s);
  void* c = arena.allocate(0, ts.s);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(aligned256(a));
  CHECK(aligned256(b));
  CHECK(aligned256(c));
  CHECK(a == arena.base());
  CHECK(static_cast<char*>(b) - static_cast<char*>(a) == 256);
  CHECK(static_cast<char*>(c) - static_cast<char*>(b) == 512);
  CHECK(arena.used() == 1024);
  CHECK(arena_allocator::footprint(300) == 512);

  // The sub-allocations are real device memory.
  TURBO3_CHECK_HIP(hipMemsetAsync(b, 0x11, 300, ts.s));
  TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));

  SECTION("exhaustion returns nullptr and leaves the arena intact") {
    CHECK(arena.allocate(arena.capacity(), ts.s) == nullptr);
    CHECK(arena.allocate(arena.available() + 1, ts.s) == nullptr);
    CHECK(arena.allocate(huge_request, ts.s) == nullptr);
    CHECK(arena.allocate(SIZE_MAX, ts.s) == nullptr);
    CHECK(arena.used() == 1024);
    void* rest = arena.allocate(arena.available(), ts.s);
    CHECK(rest != nullptr);
    CHECK(arena.available() == 0);
    CHECK(arena.allocate(1, ts.s) == nullptr);
  }
  SECTION("LIFO deallocation rolls back, anything else waits for reset") {
    arena.deallocate(b, 300, ts.s);  // not the most recent: no-op
    CHECK(arena.used() == 1024);
    arena.deallocate(c, 0, ts.s);
    CHECK(arena.used() == 768);
    arena.deallocate(b, 300, ts.s);
    CHECK(arena.used() == 256);
    arena.deallocate(a, 1, ts.s);
    CHECK(arena.used() == 0);
    CHECK(arena.allocate(10, ts.s) == a);
    arena.deallocate(nullptr, 10, ts.s);
    arena.deallocate(buf.ptr, 10, ts.s);  // outside the arena: ignored
    CHECK(arena.used() == 256);
  }
  SECTION("reset returns everything") {
    arena.reset();
    CHECK(arena.used() == 0);
    CHECK(arena.high_water() == 1024);
    CHECK(arena.allocate(5000, ts.s) == a);
  }
  SECTION("an empty arena serves nothing") {
    arena_allocator none;
    CHECK(none.allocate(1, ts.s) == nullptr);
    arena_allocator tiny(static_cast<unsigned char*>(buf.ptr) + 1, 200);
    CHECK(tiny.capacity() == 0);
    CHECK(tiny.allocate(1, ts.s) == nullptr);
  }
}

TEST_CASE("memory: stream pool allocator", "[memory]") {
  test_stream ts;

  SECTION("device's current pool") {
    stream_pool_allocator pool;
    CHECK(pool.pool() == nullptr);
    void* p = pool.allocate(size_t{1} << 20, ts.s);
    REQUIRE(p);
    TURBO3_CHECK_HIP(hipMemsetAsync(p, 0x22, size_t{1} << 20, ts.s));
    pool.deallocate(p, size_t{1} << 20, ts.s);
    void* z = pool.allocate(0, ts.s);
    CHECK(z != nullptr);
    pool.deallocate(z, 0, ts.s);
    pool.deallocate(nullptr, 0, ts.s);
    TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));
  }
  SECTION("an explicit pool") {
    int device = 0;
    TURBO3_CHECK_HIP(hipGetDevice(&device));
    hipMemPool_t mp = nullptr;
    TURBO3_CHECK_HIP(hipDeviceGetDefaultMemPool(&mp, device));
    stream_pool_allocator pool(mp);
    CHECK(pool.pool() == mp);
    void* p = pool.allocate(4096, ts.s);
    REQUIRE(p);
    TURBO3_CHECK_HIP(hipMemsetAsync(p, 0x23, 4096, ts.s));
    pool.deallocate(p, 4096, ts.s);
    TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));
  }
  SECTION("failure is nullptr and leaves no pending runtime error") {
    stream_pool_allocator pool;
    CHECK(pool.allocate(huge_request, ts.s) == nullptr);
    CHECK(hipGetLastError() == hipSuccess);
    require_stream_usable(ts.s);
  }
}

TEST_CASE("memory: device allocator", "[memory]") {
  device_allocator dev;
  void* p = dev.allocate(4096, nullptr);
  REQUIRE(p);
  CHECK(aligned256(p));
  TURBO3_CHECK_HIP(hipMemset(p, 0, 4096));
  dev.deallocate(p, 4096, nullptr);
  CHECK(dev.allocate(huge_request, nullptr) == nullptr);
  CHECK(hipGetLastError() == hipSuccess);
}

TEST_CASE("memory: adaptive allocator routes small to the pool and large to plain memory",
          "[memory]") {
  test_stream ts;
  constexpr size_t threshold = size_t{1} << 20;
  adaptive_allocator alloc(threshold);
  CHECK(alloc.threshold() == threshold);
  CHECK(adaptive_allocator(0).threshold() == 0);
  CHECK(adaptive_allocator().threshold() == adaptive_allocator::default_threshold);
  CHECK(alloc.last_route() == alloc_route::none);

  void* small = alloc.allocate(4096, ts.s);
  REQUIRE(small);
  CHECK(alloc.last_route() == alloc_route::pool);
  void* edge = alloc.allocate(threshold, ts.s);  // "at most the threshold": pool
  REQUIRE(edge);
  CHECK(alloc.last_route() == alloc_route::pool);
  void* large = alloc.allocate(threshold + 1, ts.s);
  REQUIRE(large);
  CHECK(alloc.last_route() == alloc_route::plain);
  CHECK(alloc.pool_count() == 2);
  CHECK(alloc.plain_count() == 1);
  CHECK(alloc.live_plain() == 1);

  TURBO3_CHECK_HIP(hipMemsetAsync(small, 1, 4096, ts.s));
  TURBO3_CHECK_HIP(hipMemsetAsync(edge, 2, threshold, ts.s));
  TURBO3_CHECK_HIP(hipMemsetAsync(large, 3, threshold + 1, ts.s));

  alloc.deallocate(large, threshold + 1, ts.s);
  CHECK(alloc.live_plain() == 0);
  alloc.deallocate(edge, threshold, ts.s);
  alloc.deallocate(small, 4096, ts.s);
  TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));

  SECTION("a full route table falls back to the pool") {
    std::vector<void*> ptrs;
    for (int i = 0; i < adaptive_allocator::max_plain; ++i) {
      ptrs.push_back(alloc.allocate(threshold + 1, ts.s));
      REQUIRE(ptrs.back());
      CHECK(alloc.last_route() == alloc_route::plain);
    }
    CHECK(alloc.live_plain() == adaptive_allocator::max_plain);
    void* extra = alloc.allocate(threshold + 1, ts.s);
    REQUIRE(extra);
    CHECK(alloc.last_route() == alloc_route::pool);
    alloc.deallocate(extra, threshold + 1, ts.s);
    for (void* p : ptrs) alloc.deallocate(p, threshold + 1, ts.s);
    CHECK(alloc.live_plain() == 0);
    TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));
  }
  SECTION("a failed large request leaves no pending runtime error") {
    CHECK(alloc.allocate(huge_request, ts.s) == nullptr);
    CHECK(alloc.live_plain() == 0);
    CHECK(hipGetLastError() == hipSuccess);
  }
  SECTION("moving hands the route table over") {
    void* p = alloc.allocate(threshold * 2, ts.s);
    REQUIRE(p);
    adaptive_allocator moved(std::move(alloc));
    CHECK(moved.live_plain() == 1);
    moved.deallocate(p, threshold * 2, ts.s);
    CHECK(moved.live_plain() == 0);
  }
}

TEST_CASE("memory: scoped_allocation deallocates on scope exit", "[memory]") {
  test_stream ts;
  turbo3_test::device_buffer buf(8192);
  arena_allocator arena(buf.ptr, buf.bytes);
  {
    turbo3::scoped_allocation<arena_allocator> a(arena, 1000, ts.s);
    REQUIRE(a);
    CHECK(a.size() == 1000);
    CHECK(a.stream() == ts.s);
    CHECK(a.as<float>() == static_cast<float*>(a.get()));
    CHECK(arena.used() == 1024);
    turbo3::scoped_allocation<arena_allocator> b(arena, 100000, ts.s);  // does not fit
    CHECK(!b);
    turbo3::scoped_allocation<arena_allocator> moved(std::move(a));
    CHECK(!a);
    CHECK(moved);
  }
  CHECK(arena.used() == 0);

  adaptive_allocator alloc(4096);
  {
    turbo3::scoped_allocation<adaptive_allocator> big(alloc, 8192, ts.s);
    REQUIRE(big);
    CHECK(alloc.live_plain() == 1);
    TURBO3_CHECK_HIP(hipMemsetAsync(big.get(), 0, 8192, ts.s));
  }
  CHECK(alloc.live_plain() == 0);
  {
    turbo3::scoped_allocation<adaptive_allocator> small(alloc, 100, ts.s);
    REQUIRE(small);
    void* p = small.release();
    CHECK(!small);
    alloc.deallocate(p, 100, ts.s);
  }
  TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));
}

TEST_CASE("memory: check_capture under global-mode capture", "[memory]") {
  test_stream ts;
  turbo3_test::device_buffer arena_mem(64 * 1024);
  arena_allocator arena(arena_mem.ptr, arena_mem.bytes);
  stream_pool_allocator pool;
  device_allocator dev;
  constexpr size_t threshold = size_t{1} << 20;
  adaptive_allocator adaptive(threshold);

  bool capturing = true;
  CHECK(turbo3::stream_is_capturing(ts.s, capturing) == status::ok);
  CHECK(!capturing);
  CHECK(turbo3::check_capture(dev, ts.s) == status::ok);
  CHECK(turbo3::check_capture(arena, ts.s) == status::ok);

  // Eagerly allocated plain memory, released inside the capture: deferred, not hipFree'd.
  void* eager_plain = adaptive.allocate(threshold * 2, ts.s);
  REQUIRE(eager_plain);
  REQUIRE(adaptive.last_route() == alloc_route::plain);

  TURBO3_CHECK_HIP(hipStreamBeginCapture(ts.s, hipStreamCaptureModeGlobal));
  // Inside the capture only CHECK (no early exit), so the capture is always ended below.
  capturing = false;
  CHECK(turbo3::stream_is_capturing(ts.s, capturing) == status::ok);
  CHECK(capturing);
  CHECK(turbo3::check_capture(dev, ts.s) == status::capture_unsafe);
  CHECK(turbo3::check_capture(arena, ts.s) == status::ok);
  CHECK(turbo3::check_capture(pool, ts.s) == status::ok);
  CHECK(turbo3::check_capture(adaptive, ts.s) == status::ok);

  void* a = arena.allocate(1000, ts.s);
  CHECK(a != nullptr);
  void* p = pool.allocate(4096, ts.s);
  CHECK(p != nullptr);
  void* big = adaptive.allocate(threshold * 4, ts.s);  // large, but capturing: pool
  CHECK(big != nullptr);
  CHECK(adaptive.last_route() == alloc_route::pool);
  CHECK(adaptive.plain_count() == 1);
  if (p) CHECK(hipMemsetAsync(p, 0, 4096, ts.s) == hipSuccess);
  if (big) CHECK(hipMemsetAsync(big, 0, threshold * 4, ts.s) == hipSuccess);
  if (a) CHECK(hipMemsetAsync(a, 0, 1000, ts.s) == hipSuccess);
  adaptive.deallocate(big, threshold * 4, ts.s);
  pool.deallocate(p, 4096, ts.s);
  arena.deallocate(a, 1000, ts.s);
  adaptive.deallocate(eager_plain, threshold * 2, ts.s);
  CHECK(adaptive.live_plain() == 1);  // deferred

  hipGraph_t graph = nullptr;
  const hipError_t end = hipStreamEndCapture(ts.s, &graph);
  CHECK(end == hipSuccess);  // the capture was never invalidated
  CHECK(graph != nullptr);
  if (graph) TURBO3_CHECK_HIP(hipGraphDestroy(graph));  // discard it

  capturing = true;
  CHECK(turbo3::stream_is_capturing(ts.s, capturing) == status::ok);
  CHECK(!capturing);
  CHECK(turbo3::check_capture(dev, ts.s) == status::ok);
  adaptive.release_deferred();
  CHECK(adaptive.live_plain() == 0);
  CHECK(hipGetLastError() == hipSuccess);
  require_stream_usable(ts.s);
}

TEST_CASE("memory: pool allocations captured in a graph replay", "[memory]") {
  test_stream ts;
  constexpr size_t n = 1 << 16;
  turbo3_test::device_buffer result(n);
  result.poison(0);
  adaptive_allocator alloc(1024);  // n is above the threshold: the capture must still use the pool

  TURBO3_CHECK_HIP(hipStreamBeginCapture(ts.s, hipStreamCaptureModeGlobal));
  void* tmp = alloc.allocate(n, ts.s);
  CHECK(tmp != nullptr);
  CHECK(alloc.last_route() == alloc_route::pool);
  if (tmp) {
    CHECK(hipMemsetAsync(tmp, 0x5a, n, ts.s) == hipSuccess);
    CHECK(hipMemcpyAsync(result.ptr, tmp, n, hipMemcpyDeviceToDevice, ts.s) == hipSuccess);
    alloc.deallocate(tmp, n, ts.s);
  }
  hipGraph_t graph = nullptr;
  TURBO3_CHECK_HIP(hipStreamEndCapture(ts.s, &graph));
  REQUIRE(graph);

  hipGraphExec_t exec = nullptr;
  TURBO3_CHECK_HIP(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
  for (int replay = 0; replay < 3; ++replay) TURBO3_CHECK_HIP(hipGraphLaunch(exec, ts.s));
  TURBO3_CHECK_HIP(hipStreamSynchronize(ts.s));
  std::vector<unsigned char> host(n);
  result.download(host.data(), n);
  size_t wrong = 0;
  for (unsigned char byte : host) wrong += byte != 0x5a;
  CHECK(wrong == 0);
  TURBO3_CHECK_HIP(hipGraphExecDestroy(exec));
  TURBO3_CHECK_HIP(hipGraphDestroy(graph));
  require_stream_usable(ts.s);
}
