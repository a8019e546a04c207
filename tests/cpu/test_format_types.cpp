// The turbo4, turbo2 and q8_0 formats (docs/format.md §8-10): layouts, codebooks, packing, golden
// blocks, round-trip error, and the norm / scale overflow policy of §7.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_test_helpers.hpp"
#include "turbo3/turbo3.hpp"

using namespace turbo3;

namespace {

using turbo3_cpu_test::fresh_seed;
using turbo3_cpu_test::hex;

// docs/format.md §6's exact input: every value a multiple of 1/16, no math library involved.
std::vector<float> exact_vector() {
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) x[i] = static_cast<float>((i * 37) % 128 - 64) / 16.0f * static_cast<float>(1 + i % 5);
  return x;
}

const data_type block_types[] = {data_type::turbo3, data_type::turbo4, data_type::turbo2, data_type::q8_0};

// Mean per-group NMSE of n_groups N(0,1) groups of 128 stored as t and read back (rotated back for
// the turbo types).
double mean_round_trip_nmse(data_type t, std::mt19937_64& rng, int n_groups) {
  std::normal_distribution<float> normal;
  const int64_t n = int64_t{n_groups} * 128;
  std::vector<float> x(static_cast<size_t>(n)), y(x.size());
  for (float& v : x) v = normal(rng);
  std::vector<unsigned char> bytes(row_bytes(t, n));
  ref::store_row(t, x.data(), bytes.data(), n);
  ref::load_row(t, bytes.data(), y.data(), n);
  if (stores_rotated_values(t)) ref::rotate_inverse(y.data(), n);
  double mean = 0.0;
  for (int g = 0; g < n_groups; ++g) mean += ref::nmse(&y[static_cast<size_t>(g) * 128], &x[static_cast<size_t>(g) * 128], 128);
  return mean / n_groups;
}

}  // namespace

TEST_CASE("block types: sizes, values per block, row bytes, names", "[format][types]") {
  CHECK(sizeof(block_turbo4) == 68);
  CHECK(sizeof(block_turbo2) == 34);
  CHECK(sizeof(block_q8_0) == 34);
  CHECK(values_per_block(data_type::f32) == 1);
  CHECK(values_per_block(data_type::f16) == 1);
  CHECK(values_per_block(data_type::turbo3) == 128);
  CHECK(values_per_block(data_type::turbo4) == 128);
  CHECK(values_per_block(data_type::turbo2) == 128);
  CHECK(values_per_block(data_type::q8_0) == 32);
  CHECK(row_bytes(data_type::f32, 256) == 1024);
  CHECK(row_bytes(data_type::f16, 256) == 512);
  CHECK(row_bytes(data_type::turbo3, 256) == 100);
  CHECK(row_bytes(data_type::turbo4, 256) == 136);
  CHECK(row_bytes(data_type::turbo2, 256) == 68);
  CHECK(row_bytes(data_type::q8_0, 256) == 272);
  for (data_type t : block_types) CHECK(element_bytes(t) == 0);
  CHECK(std::string(to_string(data_type::turbo4)) == "turbo4");
  CHECK(std::string(to_string(data_type::turbo2)) == "turbo2");
  CHECK(std::string(to_string(data_type::q8_0)) == "q8_0");
  CHECK(stores_rotated_values(data_type::turbo3));
  CHECK(stores_rotated_values(data_type::turbo4));
  CHECK(stores_rotated_values(data_type::turbo2));
  CHECK_FALSE(stores_rotated_values(data_type::q8_0));
  CHECK_FALSE(stores_rotated_values(data_type::f16));
}

// The golden blocks of docs/format.md §8-10.
TEST_CASE("golden blocks of docs/format.md §8-10", "[format][types]") {
  const std::vector<float> x = exact_vector();
  block_turbo4 t4;
  ref::quantize_row(x.data(), &t4, 128);
  CHECK(hex(&t4, 68) ==
        "8555000082bcc4a2072c541c32a5b884016071371727b341bb5a02aa085b4204085dd29a168f04ec92a1cd1283887ee9930c52921b7991"
        "decb099122ce8155d0cc43ad0e");
  CHECK(fp16_to_float(t4.norm) == 88.3125f);
  block_turbo2 t2;
  ref::quantize_row(x.data(), &t2, 128);
  CHECK(hex(&t2, 34) == "a955a9892125959a405411496aa0621462adb1e1881ba9e7299462b82a088b855a3b");
  CHECK(fp16_to_float(t2.norm) == 90.5625f);
  block_q8_0 q8[4];
  ref::quantize_row(x.data(), q8, 128);
  CHECK(hex(&q8[0], 34) == "9130e4e80d52a0fd1ab0d61c16dcfb3a81f70e46bdfe10d0e8217bf10233a5df0a34");
  CHECK(q8[0].scale == 0x3091);  // fp16(18.125 / 127)
}

TEST_CASE("turbo4 and turbo2 codebooks: sorted, symmetric, thresholds between levels", "[format][types]") {
  const turbo4_codebook_table t4 = turbo4_codebook();
  for (int i = 0; i < 16; ++i) CHECK(t4.level[i] == -t4.level[15 - i]);
  for (int i = 0; i < 15; ++i) {
    CHECK(t4.level[i] < t4.threshold[i]);
    CHECK(t4.threshold[i] < t4.level[i + 1]);
    CHECK(t4.threshold[i] == Approx(0.5 * (t4.level[i] + t4.level[i + 1])).margin(1e-6));
  }
  for (int i = 0; i < 16; ++i) CHECK(quantize_index(t4, t4.level[i]) == i);
  CHECK(quantize_index(t4, 0.0f) == 8);
  CHECK(quantize_index(t4, -0.0f) == 8);
  CHECK(quantize_index(t4, t4.threshold[3]) == 4);  // on a threshold goes to the upper cell
  CHECK(quantize_index(t4, -1.0f) == 0);
  CHECK(quantize_index(t4, 1.0f) == 15);

  const turbo2_codebook_table t2 = turbo2_codebook();
  for (int i = 0; i < 4; ++i) CHECK(t2.level[i] == -t2.level[3 - i]);
  for (int i = 0; i < 3; ++i) {
    CHECK(t2.level[i] < t2.threshold[i]);
    CHECK(t2.threshold[i] < t2.level[i + 1]);
    CHECK(t2.threshold[i] == Approx(0.5 * (t2.level[i] + t2.level[i + 1])).margin(1e-6));
  }
  for (int i = 0; i < 4; ++i) CHECK(quantize_index(t2, t2.level[i]) == i);
  CHECK(quantize_index(t2, 0.0f) == 2);
  CHECK(quantize_index(t2, t2.threshold[0]) == 1);
}

TEST_CASE("turbo4 and turbo2 packing: round trip, value 0 in the lowest bits", "[format][types]") {
  std::mt19937_64 rng(fresh_seed());
  uint8_t idx[128];
  for (auto& i : idx) i = static_cast<uint8_t>(rng() & 15);
  block_turbo4 b4{};
  pack_indices(idx, b4);
  for (int j = 0; j < 128; ++j) REQUIRE(unpack_index(b4, j) == idx[j]);
  CHECK(b4.qs[0] == (idx[0] | (idx[1] << 4)));

  for (auto& i : idx) i = static_cast<uint8_t>(rng() & 3);
  block_turbo2 b2{};
  pack_indices(idx, b2);
  for (int j = 0; j < 128; ++j) REQUIRE(unpack_index(b2, j) == idx[j]);
  CHECK(b2.qs[0] == (idx[0] | (idx[1] << 2) | (idx[2] << 4) | (idx[3] << 6)));
}

TEST_CASE("zero groups and blocks store 0 and read back exact zeros", "[format][types]") {
  std::vector<float> x(384, 0.0f);
  for (int i = 128; i < 256; ++i) x[i] = 1.0f;  // a non-zero group between two zero groups
  for (data_type t : block_types) {
    INFO(to_string(t));
    std::vector<unsigned char> bytes(row_bytes(t, 384), 0xa5);
    ref::store_row(t, x.data(), bytes.data(), 384);
    std::vector<float> y(384, 1.0f);
    ref::load_row(t, bytes.data(), y.data(), 384);
    for (int i = 0; i < 128; ++i) {
      CHECK(y[i] == 0.0f);
      CHECK(y[256 + i] == 0.0f);
    }
  }
  block_turbo4 b;
  std::memset(&b, 0xa5, sizeof b);
  ref::quantize_row(x.data(), &b, 128);
  CHECK(b.norm == 0);
  CHECK(b.reserved == 0);
  for (int j = 0; j < 128; ++j) CHECK(unpack_index(b, j) == 8);
}

// Measured means over 4000 groups: turbo4 0.0181, turbo2 0.1185, q8_0 2.9e-5, turbo3 0.0338 (the
// spread of such a mean is below 1e-3 of it). docs/format.md §8-10 give the tables' Gaussian MSE.
TEST_CASE("round-trip NMSE of N(0,1) rows is in each type's expected range", "[format][types]") {
  std::mt19937_64 rng(fresh_seed());
  struct expected {
    data_type type;
    double low, high;
  };
  for (const expected e : {expected{data_type::turbo3, 0.030, 0.037}, expected{data_type::turbo4, 0.0165, 0.0195},
                           expected{data_type::turbo2, 0.112, 0.125}, expected{data_type::q8_0, 2.4e-5, 3.4e-5}}) {
    const double mean = mean_round_trip_nmse(e.type, rng, 4000);
    INFO(to_string(e.type) << " mean round-trip NMSE " << mean);
    CHECK(mean > e.low);
    CHECK(mean < e.high);
  }
}

TEST_CASE("q8_0: the error of each value is at most half a step, ties round away from zero", "[format][types]") {
  std::mt19937_64 rng(fresh_seed());
  std::normal_distribution<float> normal;
  std::vector<float> x(32 * 200), y(x.size());
  // blocks of magnitude 2^-6 .. 2^19: d = amax / 127 is a normal fp16 value (relative rounding 2^-11)
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(i / 32 % 26) - 6);
  std::vector<block_q8_0> q(200);
  ref::quantize_row(x.data(), q.data(), static_cast<int64_t>(x.size()));
  ref::dequantize_row(q.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t b = 0; b < q.size(); ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    for (int j = 0; j < 32; ++j) {
      const size_t i = b * 32 + j;
      // half a step, plus the stored scale's fp16 rounding (2^-11 relative) over the value
      REQUIRE(std::fabs(y[i] - x[i]) <= 0.5f * d * 1.001f + std::fabs(x[i]) * 0x1p-11f * 1.001f);
    }
  }
  float ties[32];
  ties[0] = 127.0f;  // d = 1 exactly
  for (int j = 1; j < 32; ++j) ties[j] = static_cast<float>(j % 9 - 4) + 0.5f;
  block_q8_0 t;
  ref::quantize_row(ties, &t, 32);
  CHECK(t.scale == 0x3c00);
  for (int j = 1; j < 32; ++j) CHECK(t.qs[j] == static_cast<int8_t>(std::round(ties[j])));
  CHECK(t.qs[1] == -3);  // -2.5
  CHECK(t.qs[3] == -1);  // -0.5
  CHECK(t.qs[4] == 1);   // 0.5
}

// §7 for the new types: a norm or scale past 65504 is stored as 65504, so finite rows read back
// finite; q8_0 blocks whose 1/d overflows (float-subnormal values) store zeros.
TEST_CASE("turbo4, turbo2 and q8_0 norms and scales saturate at 65504", "[format][types]") {
  for (data_type t : {data_type::turbo4, data_type::turbo2, data_type::q8_0}) {
    for (float big : {1e5f, -1e5f, 1e7f, 3e38f}) {
      INFO(to_string(t) << " value " << big);
      std::vector<float> x(256, 0.0f);
      x[3] = big;
      x[130] = 1.0f;
      if (t == data_type::q8_0 && std::fabs(big) < 8.4e6f) continue;  // d = amax / 127 still fits fp16
      std::vector<unsigned char> bytes(row_bytes(t, 256));
      ref::store_row(t, x.data(), bytes.data(), 256);
      uint16_t first;
      std::memcpy(&first, bytes.data(), 2);
      CHECK(first == 0x7bff);
      std::vector<float> y(256);
      ref::load_row(t, bytes.data(), y.data(), 256);
      for (float v : y) REQUIRE(std::isfinite(v));
    }
  }
  float tiny[32];
  for (int j = 0; j < 32; ++j) tiny[j] = (j % 2 ? -1.0f : 1.0f) * static_cast<float>(j + 1) * 1e-40f;
  block_q8_0 q;
  ref::quantize_row(tiny, &q, 32);
  CHECK(q.scale == 0);
  for (int j = 0; j < 32; ++j) CHECK(q.qs[j] == 0);
}

TEST_CASE("store_row and load_row read and write rows at any address", "[format][types]") {
  std::mt19937_64 rng(fresh_seed());
  std::normal_distribution<float> normal;
  std::vector<float> x(512);
  for (float& v : x) v = normal(rng);
  for (data_type t : {data_type::f32, data_type::f16, data_type::turbo3, data_type::turbo4, data_type::turbo2,
                      data_type::q8_0}) {
    INFO(to_string(t));
    const size_t bytes = row_bytes(t, 512);
    std::vector<unsigned char> aligned(bytes), shifted(bytes + 1);
    ref::store_row(t, x.data(), aligned.data(), 512);
    ref::store_row(t, x.data(), shifted.data() + 1, 512);
    CHECK(std::memcmp(aligned.data(), shifted.data() + 1, bytes) == 0);
    std::vector<float> a(512), b(512);
    ref::load_row(t, aligned.data(), a.data(), 512);
    ref::load_row(t, shifted.data() + 1, b.data(), 512);
    CHECK(a == b);
  }
}
