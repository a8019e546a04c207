// platform::per_device_value: kept per device number (any number), a failed computation is not
// kept, and concurrent users see one value.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "turbo3/platform/device_state.hpp"

using turbo3::platform::per_device_value;

TEST_CASE("per_device_value keeps a value per device, past device 63 too", "[device_state]") {
  per_device_value cache;
  int calls = 0;
  auto compute_as = [&](int v) {
    return [&calls, v](int& out) {
      ++calls;
      out = v;
      return true;
    };
  };
  int v = -1;
  for (int device : {0, 1, 63, 64, 1000, 1 << 20}) {
    REQUIRE(cache.get(device, v, compute_as(device * 3 - 7)));
    CHECK(v == device * 3 - 7);
  }
  CHECK(calls == 6);
  for (int device : {0, 1, 63, 64, 1000, 1 << 20}) {
    REQUIRE(cache.get(device, v, compute_as(12345)));
    CHECK(v == device * 3 - 7);
    CHECK(cache.has(device));
  }
  CHECK(calls == 6);  // every value was kept
  CHECK(!cache.has(2));
  CHECK(!cache.get(-1, v, compute_as(1)));  // no device
  CHECK(calls == 6);
}

TEST_CASE("per_device_value does not keep a failed computation", "[device_state]") {
  per_device_value cache;
  int calls = 0;
  auto failing = [&](int& out) {
    ++calls;
    out = 80;
    return false;
  };
  for (int device : {5, 700}) {
    int v = -1;
    CHECK(!cache.get(device, v, failing));
    CHECK(!cache.get(device, v, failing));
    CHECK(!cache.has(device));
    CHECK(cache.get(device, v, [](int& out) {
      out = 132;
      return true;
    }));
    CHECK(v == 132);
  }
  CHECK(calls == 4);  // asked again after each failure
}

TEST_CASE("per_device_value: threads computing at once agree", "[device_state]") {
  per_device_value cache;
  std::atomic<int> calls{0};
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int device = 0; device < 200; ++device) {
        int v = -1;
        const bool ok = cache.get(device, v, [&](int& out) {
          ++calls;
          out = device + 17;
          return true;
        });
        if (!ok || v != device + 17) ++wrong;
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(wrong == 0);
  CHECK(calls >= 200);
}
