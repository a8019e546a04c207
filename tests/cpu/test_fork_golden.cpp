// The library's quantizers against the TurboQuant llama.cpp fork's own: tests/data/
// fork_golden_blocks.hpp holds seeded rows (D 128 to 512, zeros, large and small norms, exact
// ties) and the bytes the fork's C reference quantizers wrote for them (tools/golden/README.md).
// Every byte must match: turbo4, turbo2 and q8_0 with their one table each, turbo3 with
// codebook::legacy, the 3-bit table the fork at that revision writes.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../data/fork_golden_blocks.hpp"
#include "cpu_test_helpers.hpp"
#include "turbo3/ref/storage.hpp"
#include "turbo3/types.hpp"

using namespace turbo3;

namespace {

std::vector<float> input_of(const fork_golden::row& r) {
  std::vector<float> x(static_cast<size_t>(r.n));
  std::memcpy(x.data(), r.x, x.size() * sizeof(float));
  return x;
}

std::string hex(const std::vector<unsigned char>& bytes) { return turbo3_cpu_test::hex(bytes.data(), bytes.size()); }

std::vector<unsigned char> quantized(data_type t, const std::vector<float>& x, codebook cb) {
  std::vector<unsigned char> bytes(row_bytes(t, static_cast<int64_t>(x.size())));
  ref::store_row(t, x.data(), bytes.data(), static_cast<int64_t>(x.size()), cb);
  return bytes;
}

// Bytes of a and b (hex strings of equal length) that are equal.
size_t equal_bytes(const std::string& a, const std::string& b) {
  size_t n = 0;
  for (size_t i = 0; i + 1 < a.size() && i + 1 < b.size(); i += 2) n += a.compare(i, 2, b, i, 2) == 0 ? 1 : 0;
  return n;
}

struct typed_expectation {
  data_type type;
  codebook cb;
  const char* fork_hex;
};

}  // namespace

TEST_CASE("the fork's golden rows: turbo3, turbo4, turbo2 and q8_0 byte for byte", "[format][fork]") {
  size_t rows = 0, blocks_bytes = 0, matched = 0, pairs = 0, pairs_matched = 0;
  for (const fork_golden::row& r : fork_golden::rows) {
    const std::vector<float> x = input_of(r);
    const typed_expectation expect[4] = {{data_type::turbo3, codebook::legacy, r.turbo3},
                                         {data_type::turbo4, codebook::lloyd_max, r.turbo4},
                                         {data_type::turbo2, codebook::lloyd_max, r.turbo2},
                                         {data_type::q8_0, codebook::lloyd_max, r.q8_0}};
    for (const typed_expectation& e : expect) {
      INFO("row \"" << r.name << "\" (" << r.n << " values), " << to_string(e.type));
      const std::string ours = hex(quantized(e.type, x, e.cb));
      const std::string fork = e.fork_hex;
      REQUIRE(fork.size() == 2 * row_bytes(e.type, r.n));
      CHECK(ours == fork);
      blocks_bytes += fork.size() / 2;
      matched += equal_bytes(ours, fork);
      ++pairs;
      pairs_matched += ours == fork ? 1 : 0;
    }
    ++rows;
  }
  std::printf("fork golden rows: %zu rows x 4 types, %zu of %zu (row, type) pairs and %zu of %zu bytes match\n",
              rows, pairs_matched, pairs, matched, blocks_bytes);
  CHECK(rows == 17);
  CHECK(matched == blocks_bytes);
}

// The fork's 3-bit table is the one this library calls codebook::legacy: its default table writes
// other bytes for the same rows.
TEST_CASE("the fork writes turbo3 with codebook::legacy, not codebook::lloyd_max", "[format][fork]") {
  for (const fork_golden::row& r : fork_golden::rows) {
    if (std::string(r.name).rfind("normal", 0) != 0) continue;  // the N(0, sigma^2) rows
    INFO("row \"" << r.name << "\"");
    CHECK(hex(quantized(data_type::turbo3, input_of(r), codebook::lloyd_max)) != r.turbo3);
  }
}
