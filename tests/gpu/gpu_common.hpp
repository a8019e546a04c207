// Shared helpers of the GPU tests: checked runtime calls, device buffers, seeded random inputs.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "turbo3/platform/runtime.hpp"

#define TURBO3_CHECK_HIP(expr)                                                              \
  do {                                                                                      \
    const hipError_t turbo3_err_ = (expr);                                                  \
    if (turbo3_err_ != hipSuccess) {                                                        \
      FAIL(#expr << " failed: " << hipGetErrorString(turbo3_err_));                         \
    }                                                                                       \
  } while (0)

namespace turbo3_test {

// The run's seed: fresh every run unless TURBO3_TEST_SEED is set; printed by main.
uint64_t run_seed();

// An owning device buffer.
struct device_buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit device_buffer(size_t n) : bytes(n) { TURBO3_CHECK_HIP(hipMalloc(&ptr, n == 0 ? 1 : n)); }
  ~device_buffer() { if (ptr) (void)hipFree(ptr); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  template <class T> T* as() const { return static_cast<T*>(ptr); }
  void upload(const void* host, size_t n) { TURBO3_CHECK_HIP(hipMemcpy(ptr, host, n, hipMemcpyHostToDevice)); }
  void download(void* host, size_t n) const { TURBO3_CHECK_HIP(hipMemcpy(host, ptr, n, hipMemcpyDeviceToHost)); }
  // 0xffff: f16/f32 NaN. Complete on return: hipMemset runs on the null stream, which work on a
  // non-blocking stream does not wait for.
  void poison(uint8_t byte = 0xff) {
    TURBO3_CHECK_HIP(hipMemset(ptr, byte, bytes));
    TURBO3_CHECK_HIP(hipStreamSynchronize(nullptr));
  }
};

// A non-blocking stream, destroyed with its owner.
struct owned_stream {
  hipStream_t s = nullptr;
  owned_stream() { TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&s, hipStreamNonBlocking)); }
  ~owned_stream() {
    if (s) (void)hipStreamDestroy(s);
  }
  owned_stream(const owned_stream&) = delete;
  owned_stream& operator=(const owned_stream&) = delete;
};

}  // namespace turbo3_test
