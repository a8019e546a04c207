// Seeded, time-bounded fuzzing of the host code an engine feeds untrusted numbers: validate()
// (and the kernels' view_end), the host quantizer and dequantizer, and the fp16 conversions. Built
// with AddressSanitizer and UndefinedBehaviorSanitizer (tests/CMakeLists.txt), which abort on the
// first report; on top of that each input is checked against properties that must hold:
//
//   fp16      fp16_from_float is round-to-nearest-even against an exact oracle (double arithmetic
//             over neighbouring fp16 values); every fp16 value round-trips; the saturating form
//             differs only where the plain one gives an infinity.
//   quantize  for every block type (turbo3 with both tables, turbo4, turbo2, q8_0): a block of
//             finite input gets a finite, non-negative norm or scale (the overflow policy) and
//             finite values after dequantizing; two runs give the same bytes.
//   validate  any input returns a status without undefined behaviour; where it says ok, every
//             view's span fits, view_end is data + span, out's rows are pairwise disjoint (checked
//             row by row where there are few), and out shares no byte with an input.
//
// Usage: turbo3_fuzz_host [--seconds S] [--seed N]   (TURBO3_FUZZ_SEED also sets the seed)
// Exit status 0 when every property held; 1 and a message naming the seed and the case otherwise.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "turbo3/attention/kernel_args.hpp"
#include "turbo3/attention/validate.hpp"
#include "turbo3/format/fp16.hpp"
#include "turbo3/ref/storage.hpp"

using namespace turbo3;

namespace {

uint64_t g_seed = 0;
long g_failures = 0;

void fail(const char* what, uint64_t case_index, const std::string& detail) {
  if (g_failures++ < 20)
    std::fprintf(stderr, "FAIL %s (seed %" PRIu64 ", case %" PRIu64 "): %s\n", what, g_seed, case_index, detail.c_str());
}

std::string hex32(uint32_t x) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", x);
  return b;
}

// ---- fp16 -----------------------------------------------------------------------------------------

bool half_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

// Round to nearest even by search: the largest non-negative fp16 value not above |f|, then the
// nearer of it and the next one (ties to the even pattern); 65520 and above round to infinity.
uint16_t oracle_fp16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;
  int lo = 0, hi = 0x7bff;  // largest k with value(k) <= a
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (static_cast<double>(fp16_to_float(static_cast<uint16_t>(mid))) <= a) lo = mid;
    else hi = mid - 1;
  }
  const double below = fp16_to_float(static_cast<uint16_t>(lo));
  const double above = lo == 0x7bff ? 65536.0 : static_cast<double>(fp16_to_float(static_cast<uint16_t>(lo + 1)));
  const double d_below = a - below, d_above = above - a;
  int k = lo;
  if (d_above < d_below || (d_above == d_below && (lo & 1))) k = lo + 1;
  return static_cast<uint16_t>(sign | k);
}

float random_float(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: {  // any bit pattern
      const uint32_t bits = static_cast<uint32_t>(rng());
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case 1: {  // the fp16 range and just past it
      std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
      return u(rng);
    }
    case 2: {  // near an fp16 value or a midpoint between two
      const uint16_t h = static_cast<uint16_t>(rng() % 0x7c00);
      float f = fp16_to_float(h);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      bits += static_cast<uint32_t>(static_cast<int>(rng() % 8193) - 4096);
      std::memcpy(&f, &bits, 4);
      return (rng() & 1) ? -f : f;
    }
    default: {  // subnormal fp16 range
      std::uniform_real_distribution<float> u(-7e-5f, 7e-5f);
      return u(rng);
    }
  }
}

void check_fp16_exhaustive() {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float f = fp16_to_float(b);
    if (half_is_nan(b)) {
      if (!std::isnan(f) || !half_is_nan(fp16_from_float(f))) fail("fp16 NaN round trip", h, hex32(h));
      continue;
    }
    if (fp16_from_float(f) != b) fail("fp16 round trip", h, hex32(h));
  }
}

void fuzz_fp16(std::mt19937_64& rng, uint64_t index) {
  const float f = random_float(rng);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t h = fp16_from_float(f);
  const uint16_t s = fp16_from_float_saturated(f);
  if (std::isnan(f)) {
    if (!half_is_nan(h) || !half_is_nan(s)) fail("fp16 of NaN", index, hex32(bits));
    return;
  }
  const uint16_t want = oracle_fp16(f);
  if (h != want) fail("fp16_from_float rounding", index, hex32(bits) + " gave " + hex32(h) + ", want " + hex32(want));
  const bool to_inf = (want & 0x7fff) == 0x7c00;
  const uint16_t want_sat = to_inf ? static_cast<uint16_t>((want & 0x8000) | 0x7bff) : want;
  if (s != want_sat) fail("fp16_from_float_saturated", index, hex32(bits) + " gave " + hex32(s));
}

// ---- quantizer --------------------------------------------------------------------------------------

void fuzz_quantize(std::mt19937_64& rng, uint64_t index) {
  const int groups = 1 + static_cast<int>(rng() % 4);
  const int64_t n = int64_t{groups} * block_values;
  std::vector<float> x(static_cast<size_t>(n));
  const int kind = static_cast<int>(rng() % 6);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 200) - 100);
  for (float& v : x) {
    switch (kind) {
      case 0: v = normal(rng); break;
      case 1: v = normal(rng) * scale; break;                          // 2^-100 .. 2^99
      case 2: v = random_float(rng); break;                            // anything, NaN and inf included
      case 3: v = (rng() % 16 == 0) ? normal(rng) * 60000.0f : 0.0f; break;  // sparse outliers
      case 4: v = 0.0f; break;
      default: {
        const uint32_t bits = static_cast<uint32_t>(rng() % 0x00800000u) | (rng() & 1 ? 0x80000000u : 0u);
        std::memcpy(&v, &bits, 4);                                     // float subnormals
      }
    }
  }
  if (kind != 2 && rng() % 8 == 0) x[rng() % x.size()] = (rng() & 1) ? 65000.0f : -3e38f;
  const data_type types[4] = {data_type::turbo3, data_type::turbo4, data_type::turbo2, data_type::q8_0};
  const data_type type = types[rng() % 4];
  const codebook cb = (rng() & 1) ? codebook::lloyd_max : codebook::legacy;
  std::vector<unsigned char> q(row_bytes(type, n)), again(q.size());
  ref::store_row(type, x.data(), q.data(), n, cb);
  ref::store_row(type, x.data(), again.data(), n, cb);
  if (q != again) fail("quantize determinism", index, to_string(type));
  std::vector<float> y(x.size());
  ref::load_row(type, q.data(), y.data(), n, cb);
  // Every block type stores its fp16 norm or scale in its first two bytes.
  const int values = values_per_block(type);
  const size_t bytes = bytes_per_block(type);
  for (int64_t b = 0; b < n / values; ++b) {
    bool finite = true;
    for (int i = 0; i < values; ++i) finite = finite && std::isfinite(x[static_cast<size_t>(b * values + i)]);
    if (!finite) continue;
    uint16_t norm;
    std::memcpy(&norm, q.data() + static_cast<size_t>(b) * bytes, sizeof norm);
    if ((norm & 0x7c00) == 0x7c00 || (norm & 0x8000))
      fail("finite block, norm or scale not finite and non-negative", index,
           std::string(to_string(type)) + " norm " + hex32(norm) + " kind " + std::to_string(kind));
    for (int i = 0; i < values; ++i)
      if (!std::isfinite(y[static_cast<size_t>(b * values + i)])) {
        fail("finite block dequantizes to a non-finite value", index,
             std::string(to_string(type)) + " kind " + std::to_string(kind));
        break;
      }
  }
}

// ---- validate ---------------------------------------------------------------------------------------

// Values a size or stride field takes: small and valid-looking ones most of the time, edges and
// arbitrary 64-bit patterns otherwise.
int64_t random_extent(std::mt19937_64& rng) {
  switch (rng() % 10) {
    case 0: return static_cast<int64_t>(rng());
    case 1: return -static_cast<int64_t>(rng() % 4);
    case 2: return INT32_MAX - static_cast<int64_t>(rng() % 3);
    case 3: return int64_t{1} << (rng() % 40);
    default: return 1 + static_cast<int64_t>(rng() % 9);
  }
}

size_t random_stride(std::mt19937_64& rng, size_t row) {
  switch (rng() % 10) {
    case 0: return static_cast<size_t>(rng());
    case 1: return size_t{1} << (rng() % 64);
    case 2: return 0;
    case 3: return (size_t{1} << 63) + 4 * (rng() % 4);
    case 4: return row * (rng() % 4) + 4 * (rng() % 3);
    default: return row * (1 + rng() % 16);
  }
}

data_type random_type(std::mt19937_64& rng) {
  return rng() % 16 == 0 ? static_cast<data_type>(rng() % 7) : static_cast<data_type>(rng() % 3);
}

template <class View>
void randomize_view(View& v, std::mt19937_64& rng, uintptr_t base, bool mutate_only) {
  if (!mutate_only) {
    v.type = random_type(rng);
    const int64_t d = (rng() % 4 == 0) ? random_extent(rng) : 128 * (1 + static_cast<int64_t>(rng() % 2));
    v.ne[0] = d;
    for (int i = 1; i < 4; ++i) v.ne[i] = (rng() % 6 == 0) ? random_extent(rng) : 1 + static_cast<int64_t>(rng() % 5);
    const size_t row = row_bytes(v.type == data_type::turbo3 ? data_type::turbo3 : data_type::f32, d > 0 && d < 1024 ? d : 128);
    v.nb[0] = 0;
    v.nb[1] = row;
    v.nb[2] = row * static_cast<size_t>(v.ne[1] > 0 && v.ne[1] < 64 ? v.ne[1] : 1);
    v.nb[3] = v.nb[2] * static_cast<size_t>(v.ne[2] > 0 && v.ne[2] < 64 ? v.ne[2] : 1);
    for (int i = 1; i < 4; ++i)
      if (rng() % 5 == 0) v.nb[i] = random_stride(rng, row);
    const uintptr_t offset = (rng() % 8 == 0) ? static_cast<uintptr_t>(rng() % 4096) : 256 * (rng() % 16);
    v.data = reinterpret_cast<decltype(v.data)>(base + offset);
  }
  switch (rng() % 12) {
    case 0: v.data = nullptr; break;
    case 1: v.data = reinterpret_cast<decltype(v.data)>(~uintptr_t{0} - (rng() % 65536)); break;
    case 2: v.data = reinterpret_cast<decltype(v.data)>(static_cast<uintptr_t>(rng())); break;
    default: break;
  }
}

// A call that is often well formed (shapes agree) so the later rules are reached, then mutated.
attention_params random_params(std::mt19937_64& rng) {
  attention_params p;
  const int64_t d = 128 * (1 + static_cast<int64_t>(rng() % 2));
  const int64_t n_q = 1 + static_cast<int64_t>(rng() % 5), n_kv = 1 + static_cast<int64_t>(rng() % 9);
  const int64_t n_head_kv = 1 + static_cast<int64_t>(rng() % 3), n_head = n_head_kv * (1 + static_cast<int64_t>(rng() % 3));
  const int64_t n_seq = 1 + static_cast<int64_t>(rng() % 3);
  // Regions 1 GiB apart so that spans only overlap where a mutation makes them.
  const uintptr_t region = uintptr_t{1} << 30;
  auto shape = [&](auto& v, data_type t, int64_t a, int64_t b, int64_t c, int64_t e, uintptr_t at) {
    v.type = t;
    v.ne[0] = a, v.ne[1] = b, v.ne[2] = c, v.ne[3] = e;
    v.nb[0] = 0;
    v.nb[1] = row_bytes(t, a);
    v.nb[2] = v.nb[1] * static_cast<size_t>(b);
    v.nb[3] = v.nb[2] * static_cast<size_t>(c);
    v.data = reinterpret_cast<decltype(v.data)>(at);
  };
  const data_type kv = (rng() & 1) ? data_type::turbo3 : data_type::f16;
  shape(p.q, (rng() & 1) ? data_type::f32 : data_type::f16, d, n_q, n_head, n_seq, 1 * region);
  shape(p.k, kv, d, n_kv, n_head_kv, n_seq, 2 * region);
  shape(p.v, (rng() % 4 == 0) ? data_type::f16 : kv, d, n_kv, n_head_kv, n_seq, 3 * region);
  shape(p.out, (rng() & 1) ? data_type::f32 : data_type::f16, d, n_q, n_head, n_seq, 4 * region);
  if (rng() & 1) shape(p.mask, data_type::f16, n_kv + static_cast<int64_t>(rng() % 3), n_q, 1, 1, 5 * region);
  if (rng() & 1) p.sinks = reinterpret_cast<const float*>(6 * region);
  if (rng() % 3 == 0) {  // ggml's permuted out
    p.out.nb[2] = row_bytes(p.out.type, d);
    p.out.nb[1] = p.out.nb[2] * static_cast<size_t>(n_head);
  }
  p.scale = 0.0883f;
  const int mutations = static_cast<int>(rng() % 4);
  for (int m = 0; m < mutations; ++m) {
    switch (rng() % 12) {
      case 0: randomize_view(p.q, rng, 1 * region, rng() & 1); break;
      case 1: randomize_view(p.k, rng, 2 * region, rng() & 1); break;
      case 2: randomize_view(p.v, rng, 3 * region, rng() & 1); break;
      case 3: randomize_view(p.out, rng, 4 * region, rng() & 1); break;
      case 4: randomize_view(p.mask, rng, 5 * region, rng() & 1); break;
      case 5: p.out.nb[1 + rng() % 3] = random_stride(rng, row_bytes(p.out.type, d)); break;
      case 6: p.out.data = (rng() & 1) ? const_cast<void*>(p.q.data) : reinterpret_cast<void*>(static_cast<uintptr_t>(
                                                                             2 * region + 2 * (rng() % 100000))); break;
      case 7: p.sinks = reinterpret_cast<const float*>(4 * region + 4 * (rng() % 4096)); break;
      case 8: {
        const float specials[] = {NAN, INFINITY, -INFINITY, -1.0f, 0.0f, 1e30f};
        float& f = (rng() % 3 == 0) ? p.scale : (rng() & 1) ? p.softcap : p.max_bias;
        f = specials[rng() % 6];
        break;
      }
      case 9: p.kv_codebook = static_cast<codebook>(rng() % 4); break;
      case 10: p.q.ne[1 + rng() % 3] = random_extent(rng); break;
      default: p.k.nb[1 + rng() % 3] = random_stride(rng, row_bytes(p.k.type, d)); break;
    }
  }
  return p;
}

bool same_row_bytes_overlap(const attention_params& p, uint64_t index) {
  // Every (query, head, sequence) row's start; with few rows, pairwise disjointness checked.
  const int64_t rows = p.out.ne[1] * p.out.ne[2] * p.out.ne[3];
  if (rows > 4096) return false;
  const size_t row = row_bytes(p.out.type, p.out.ne[0]);
  std::vector<uint64_t> starts;
  starts.reserve(static_cast<size_t>(rows));
  for (int64_t s = 0; s < p.out.ne[3]; ++s)
    for (int64_t h = 0; h < p.out.ne[2]; ++h)
      for (int64_t i = 0; i < p.out.ne[1]; ++i)
        starts.push_back(static_cast<uint64_t>(i) * p.out.nb[1] + static_cast<uint64_t>(h) * p.out.nb[2] +
                         static_cast<uint64_t>(s) * p.out.nb[3]);
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i)
    if (starts[i] - starts[i - 1] < row) {
      fail("validate accepted out rows that overlap", index, "");
      return true;
    }
  return false;
}

void fuzz_validate(std::mt19937_64& rng, uint64_t index, long& accepted) {
  const attention_params p = random_params(rng);
  const status s = validate(p);
  if (s != status::ok) return;
  ++accepted;
  size_t bytes[5] = {0, 0, 0, 0, 0};
  const tensor_view* views[4] = {&p.q, &p.k, &p.v, &p.mask};
  for (int i = 0; i < 4; ++i) {
    if (i == 3 && !p.mask.data) break;
    if (!detail::view_bytes(views[i]->data, views[i]->type, views[i]->ne, views[i]->nb, bytes[i])) {
      fail("validate accepted a view whose span does not fit", index, std::to_string(i));
      return;
    }
    const uintptr_t end = reinterpret_cast<uintptr_t>(detail::view_end(*views[i]));
    if (end - reinterpret_cast<uintptr_t>(views[i]->data) != bytes[i]) fail("view_end is not data + span", index, "");
  }
  if (!detail::view_bytes(p.out.data, p.out.type, p.out.ne, p.out.nb, bytes[4])) {
    fail("validate accepted an out span that does not fit", index, "");
    return;
  }
  same_row_bytes_overlap(p, index);
  const uintptr_t out = reinterpret_cast<uintptr_t>(p.out.data);
  for (int i = 0; i < 4; ++i) {
    if (i == 3 && !p.mask.data) break;
    const uintptr_t in = reinterpret_cast<uintptr_t>(views[i]->data);
    if (out < in + bytes[i] && in < out + bytes[4]) fail("validate accepted out overlapping an input", index, std::to_string(i));
  }
  if (p.sinks) {
    const uintptr_t sinks = reinterpret_cast<uintptr_t>(p.sinks);
    if (out < sinks + 4 * static_cast<uintptr_t>(p.n_head()) && sinks < out + bytes[4])
      fail("validate accepted out overlapping the sinks", index, "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 15.0;
  const char* env = std::getenv("TURBO3_FUZZ_SEED");
  g_seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
    else if (std::strcmp(argv[i], "--seed") == 0) g_seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  std::printf("fuzz: seed %" PRIu64 " (TURBO3_FUZZ_SEED or --seed repeats it), %.0f s\n", g_seed, seconds);
  std::mt19937_64 rng(g_seed);

  check_fp16_exhaustive();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  uint64_t fp16_cases = 0, quantize_cases = 0, validate_cases = 0;
  long accepted = 0;
  while (std::chrono::steady_clock::now() < deadline && g_failures == 0) {
    for (int i = 0; i < 256; ++i) fuzz_fp16(rng, fp16_cases++);
    for (int i = 0; i < 8; ++i) fuzz_quantize(rng, quantize_cases++);
    for (int i = 0; i < 64; ++i) fuzz_validate(rng, validate_cases++, accepted);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("fuzz: %.1f s: %" PRIu64 " fp16 conversions (and all 65536 fp16 values), %" PRIu64
              " quantized rows, %" PRIu64 " validate() calls (%ld accepted)\n",
              took, fp16_cases, quantize_cases, validate_cases, accepted);
  if (g_failures) {
    std::printf("fuzz: %ld properties failed\n", g_failures);
    return 1;
  }
  std::printf("fuzz: every property held\n");
  return 0;
}
