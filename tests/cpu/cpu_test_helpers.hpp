// Helpers shared by the CPU tests: bytes as hex, and a fresh seed that the test output reports.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

namespace turbo3_cpu_test {

inline std::string hex(const void* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t b = static_cast<const uint8_t*>(p)[i];
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

inline uint64_t fresh_seed() {
  const uint64_t seed = std::random_device{}();
  WARN("seed " << seed);
  return seed;
}

}  // namespace turbo3_cpu_test
