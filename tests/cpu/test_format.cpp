// The turbo3 format: golden blocks, rotation, round trip, fp16 conversion.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_test_helpers.hpp"
#include "turbo3/turbo3.hpp"

using namespace turbo3;

namespace {

std::vector<float> golden_input() {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = float(sinf(0.37f * i + 0.1f) * 3.0f + ((i % 7) - 3) * 0.25f);
  return x;
}

using turbo3_cpu_test::fresh_seed;
using turbo3_cpu_test::hex;

}  // namespace

TEST_CASE("compatibility vector, Lloyd-Max codebook (format §6)", "[format]") {
  const auto x = golden_input();
  block_turbo3 b[2];
  ref::quantize_row(x.data(), b, 256);
  CHECK(hex(&b[0], 50) ==
        "274e7e01b64fcf7a73e87b6b85ba58dc3a77ea886e1096c216e085e640054a0fe29de4c214fba89c54ea5018e01607ef5d1e");
  CHECK(fp16_to_float(b[0].norm) == 24.609375f);
}

TEST_CASE("compatibility vector, legacy codebook (format §6)", "[format]") {
  const auto x = golden_input();
  block_turbo3 b[2];
  ref::quantize_row(x.data(), b, 256, codebook::legacy);
  CHECK(hex(&b[0], 50) ==
        "244e7e01b64fcf7a73e87a5b85ba58dc3a77ea886e1096c216e085e640054a0fe29de4c214fba89c54ea5018e01607ef5d1e");
}

// docs/format.md §6's golden block: every input value is exact in float32, so the bytes depend on
// no math library.
TEST_CASE("golden block of docs/format.md §6", "[format]") {
  float x[128];
  for (int i = 0; i < 128; ++i) x[i] = static_cast<float>((i * 37) % 128 - 64) / 16.0f * static_cast<float>(1 + i % 5);
  block_turbo3 b[1];
  ref::quantize_row(x, b, 128);
  CHECK(hex(&b[0], 50) ==
        "9d555226935e3a24d5bd7796c501d46ad00a37921266028e122dc5614551164fa561ae44b80020c705e5cc3ade86e5278b73");
  CHECK(fp16_to_float(b[0].norm) == 89.8125f);
  ref::quantize_row(x, b, 128, codebook::legacy);
  CHECK(hex(&b[0], 50) ==
        "a0555226935e3a24d5bd7796c501d469d00a37921266028e122dc5614551164fa561ae44b80020c705e5cc3ade86e5278b73");
}

TEST_CASE("rotation of e0 and sign tables (format §3, §6)", "[format]") {
  float e[128] = {1.0f};
  ref::rotate_forward(e, 128);
  const float expect[8] = {1, 1, 1, 1, -1, 1, 1, -1};
  for (int i = 0; i < 8; ++i) CHECK(e[i] == Approx(-0.08838835f * expect[i]).epsilon(1e-6));
  const float s1[8] = {-1, 1, 1, -1, -1, 1, -1, 1}, s2[8] = {1, 1, 1, 1, -1, 1, 1, -1};
  for (int i = 0; i < 8; ++i) {
    CHECK(rotation_s1(i) == s1[i]);
    CHECK(rotation_s2(i) == s2[i]);
  }
}

TEST_CASE("rotation: inverse after forward is the identity, norms are preserved", "[format]") {
  std::mt19937_64 rng(fresh_seed());
  std::normal_distribution<float> normal;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> x(512), y;
    for (float& v : x) v = normal(rng) * 4.0f;
    y = x;
    ref::rotate_forward(y.data(), 512);
    for (int g = 0; g < 4; ++g) {
      double nx = 0, ny = 0;
      for (int i = 0; i < 128; ++i) {
        nx += double(x[g * 128 + i]) * x[g * 128 + i];
        ny += double(y[g * 128 + i]) * y[g * 128 + i];
      }
      CHECK(std::sqrt(ny) == Approx(std::sqrt(nx)).epsilon(1e-6));
    }
    ref::rotate_inverse(y.data(), 512);
    double max_err = 0, max_abs = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      max_err = std::max(max_err, std::fabs(double(y[i]) - x[i]));
      max_abs = std::max(max_abs, std::fabs(double(x[i])));
    }
    CHECK(max_err <= 1e-6 * max_abs);
  }
}

TEST_CASE("zero groups quantize to norm 0 and dequantize to exact zeros", "[format]") {
  std::vector<float> x(384, 0.0f);
  for (int i = 128; i < 256; ++i) x[i] = 1.0f;  // a non-zero group between two zero groups
  std::vector<block_turbo3> b(3);
  ref::quantize_row(x.data(), b.data(), 384);
  CHECK(b[0].norm == 0);
  CHECK(b[2].norm == 0);
  std::vector<float> y(384, 1.0f);
  ref::dequantize_row(b.data(), y.data(), 384);
  for (int i = 0; i < 128; ++i) {
    CHECK(y[i] == 0.0f);
    CHECK(y[256 + i] == 0.0f);
  }
}

TEST_CASE("round-trip NMSE of N(0,1) vectors matches the 3-bit Lloyd-Max quantizer", "[format]") {
  std::mt19937_64 rng(fresh_seed());
  std::normal_distribution<float> normal;
  const int groups = 4000;
  std::vector<float> x(groups * 128), y(x.size());
  for (float& v : x) v = normal(rng);
  std::vector<block_turbo3> b(groups);
  for (codebook cb : {codebook::lloyd_max, codebook::legacy}) {
    ref::quantize_row(x.data(), b.data(), static_cast<int64_t>(x.size()), cb);
    ref::dequantize_row(b.data(), y.data(), static_cast<int64_t>(y.size()), cb);
    ref::rotate_inverse(y.data(), static_cast<int64_t>(y.size()));
    double mean = 0;
    for (int g = 0; g < groups; ++g) mean += ref::nmse(&y[g * 128], &x[g * 128], 128);
    mean /= groups;
    INFO(to_string(cb) << " mean round-trip NMSE " << mean);
    CHECK(mean > 0.030);
    CHECK(mean < 0.037);
  }
}

TEST_CASE("the wrong codebook is visible in the round trip", "[format]") {
  std::mt19937_64 rng(fresh_seed());
  std::normal_distribution<float> normal;
  std::vector<float> x(128 * 256), right(x.size()), wrong(x.size());
  for (float& v : x) v = normal(rng);
  std::vector<block_turbo3> b(256);
  ref::quantize_row(x.data(), b.data(), static_cast<int64_t>(x.size()));
  ref::dequantize_row(b.data(), right.data(), static_cast<int64_t>(x.size()), codebook::lloyd_max);
  ref::dequantize_row(b.data(), wrong.data(), static_cast<int64_t>(x.size()), codebook::legacy);
  const double e = ref::nmse(wrong.data(), right.data(), x.size());
  INFO("NMSE between the two codebooks' dequantizations " << e);
  CHECK(e > 1e-5);  // our test limit must be able to tell them apart
}

TEST_CASE("bit packing round trip and the sign bit is the index's high bit", "[format]") {
  std::mt19937_64 rng(fresh_seed());
  uint8_t idx[128];
  for (auto& i : idx) i = static_cast<uint8_t>(rng() & 7);
  block_turbo3 b{};
  pack_indices(idx, b);
  for (int j = 0; j < 128; ++j) REQUIRE(unpack_index(b, j) == idx[j]);
  const codebook_table t = codebook_values(codebook::lloyd_max);
  for (int i = 0; i < 8; ++i) CHECK((t.level[i] < 0) == (i < 4));
  for (int i = 0; i < 8; ++i) CHECK(quantize_index(t, t.level[i]) == i);
  CHECK(quantize_index(t, 0.0f) == 4);
  CHECK(quantize_index(t, t.threshold[2]) == 3);  // on a threshold goes to the upper cell
}

TEST_CASE("fp16 conversion rounds to nearest even and round-trips", "[format]") {
  CHECK(fp16_from_float(1.0f) == 0x3c00);
  CHECK(fp16_from_float(-2.0f) == 0xc000);
  CHECK(fp16_from_float(65504.0f) == 0x7bff);
  CHECK(fp16_from_float(65520.0f) == 0x7c00);                  // rounds to inf
  CHECK(fp16_from_float(1.0f + 1.0f / 2048) == 0x3c00);        // tie to even (down)
  CHECK(fp16_from_float(1.0f + 3.0f / 2048) == 0x3c02);        // tie to even (up)
  CHECK(fp16_from_float(5.960464477539063e-08f) == 0x0001);    // smallest subnormal
  CHECK(fp16_from_float(2.98e-08f) == 0x0000);                 // below half of it
  CHECK(std::isnan(fp16_to_float(fp16_from_float(NAN))));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half survives the round trip
    const uint16_t bits = static_cast<uint16_t>(h);
    REQUIRE(fp16_from_float(fp16_to_float(bits)) == bits);
    REQUIRE(fp16_from_float(-fp16_to_float(bits)) == (bits | 0x8000));
  }
}

TEST_CASE("fp16_from_float_saturated stops at 65504 and keeps NaN", "[format]") {
  CHECK(fp16_from_float_saturated(65504.0f) == 0x7bff);
  CHECK(fp16_from_float_saturated(65519.99f) == 0x7bff);
  CHECK(fp16_from_float_saturated(65520.0f) == 0x7bff);  // fp16_from_float: 0x7c00 (infinity)
  CHECK(fp16_from_float(65520.0f) == 0x7c00);
  CHECK(fp16_from_float_saturated(1e30f) == 0x7bff);
  CHECK(fp16_from_float_saturated(INFINITY) == 0x7bff);
  CHECK(fp16_from_float_saturated(-INFINITY) == 0xfbff);
  CHECK(fp16_from_float_saturated(-70000.0f) == 0xfbff);
  const uint16_t nan = fp16_from_float_saturated(NAN);
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);
  for (float f : {0.0f, 1.0f, -2.5f, 1e-7f, 65503.0f, 32768.5f})
    CHECK(fp16_from_float_saturated(f) == fp16_from_float(f));
}

// A finite group whose corrected norm rounds past 65504 (one value of 65000 is enough: the norm
// correction divides by r < 1) is stored with norm 65504 and dequantizes to finite values.
TEST_CASE("a group whose norm overflows fp16 stores 65504, finite after dequantizing", "[format]") {
  for (codebook cb : {codebook::lloyd_max, codebook::legacy}) {
    for (float big : {65000.0f, -65000.0f, 1e6f, 3e38f}) {
      std::vector<float> x(256, 0.0f);
      x[3] = big;
      x[130] = 1.0f;  // the second group stays small
      std::vector<block_turbo3> q(2);
      ref::quantize_row(x.data(), q.data(), 256, cb);
      INFO(to_string(cb) << " value " << big);
      CHECK(q[0].norm == 0x7bff);
      CHECK(q[1].norm != 0x7bff);
      std::vector<float> y(256);
      ref::dequantize_row(q.data(), y.data(), 256, cb);
      for (float v : y) REQUIRE(std::isfinite(v));
    }
  }
}
