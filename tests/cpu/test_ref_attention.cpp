// ref::attention against a deliberately naive attention written here: dense double matrices per
// head, scores, softmax by its textbook formula (no max subtraction), weighted sum of V.
//
// Inputs are fresh random values every run. The run seed comes from std::random_device (or from
// the environment variable TURBO3_TEST_SEED to reproduce a run); every test case derives its own
// generator from it, so a case reproduces whatever order the cases run in. The seed is printed
// once per run and attached to every failure.
//
// Tolerances:
// - Same values on both sides (f16 or q8_0 K/V, or turbo types with the rotation steps off, so both sides read
//   the very same dequantized and caller-rotated numbers): the two double computations differ
//   only by summation order and the max shift of the softmax, a few ulp of double per term. Each
//   output element must be within half an ulp of the output type of the naive value (the final
//   rounding) plus 2e-12 * max|v| (n_kv <= 1000 terms of relative error ~1e-16 each, generously).
// - turbo types with rotate_q / unrotate_out on: the reference rotates Q and the output in double,
//   while the naive side reads K and V rotated back with the float ref::rotate_inverse, whose
//   rounding is about 1e-7 relative. Measured as NMSE: limit 1e-10 for f32 output (typical
//   values 1e-14); with f16 output the final f16 rounding alone gives ~1e-7, so 1e-6 there.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "turbo3/attention/params.hpp"
#include "turbo3/format/block.hpp"
#include "turbo3/format/fp16.hpp"
#include "turbo3/ref/attention.hpp"
#include "turbo3/ref/quantize.hpp"
#include "turbo3/types.hpp"

namespace {

using turbo3::codebook;
using turbo3::data_type;

// ---- seeds -----------------------------------------------------------------------------------

uint32_t run_seed() {
  static const uint32_t seed = [] {
    const char* env = std::getenv("TURBO3_TEST_SEED");
    const uint32_t s = env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : std::random_device{}();
    std::printf("test_ref_attention: seed %u (TURBO3_TEST_SEED=%u reproduces this run)\n", s, s);
    return s;
  }();
  return seed;
}

// A generator for one test case: the run seed mixed with a per-case constant.
std::mt19937 case_rng(uint32_t salt) {
  std::seed_seq seq{run_seed(), salt};
  return std::mt19937(seq);
}

#define TURBO3_SEED_INFO() INFO("run seed " << run_seed() << " (TURBO3_TEST_SEED reproduces it)")

// ---- one attention problem: configuration --------------------------------------------------------

// Memory order of dims 1..3 of a view, innermost first, and bytes of padding after every row.
struct layout {
  int order[3] = {1, 2, 3};
  size_t pad = 0;
};
const layout contiguous{};
const layout heads_inner{{2, 1, 3}, 0};           // ggml's permuted out [D, n_head, n_q, n_seq]; KV cache token-major
const layout heads_inner_padded{{2, 1, 3}, 16};
const layout seq_inner_padded{{3, 2, 1}, 32};

struct config {
  int64_t d_k = 64, d_v = 64, n_q = 3, n_kv = 17, n_head = 4, n_head_kv = 4, n_seq = 1;
  data_type q_type = data_type::f32, k_type = data_type::f16, v_type = data_type::f16, out_type = data_type::f32;
  int64_t mask_m2 = 0;             // 0: no mask; else mask planes over heads (1 = broadcast, n_head = per head)
  int64_t mask_m3 = 1;             // mask planes over sequences
  double mask_inf_fraction = 0.15; // share of -inf mask entries
  bool causal = false;
  bool sinks = false;
  float scale = 0.0f;              // 0: 1/sqrt(d_k)
  float max_bias = 0.0f;
  float softcap = 0.0f;
  codebook cb = codebook::lloyd_max;
  bool rotate_q = true, unrotate_out = true;
  layout q_layout = contiguous, k_layout = contiguous, v_layout = contiguous, out_layout = contiguous;
};

std::string describe(const config& c) {
  std::ostringstream os;
  os << "D_k " << c.d_k << " D_v " << c.d_v << " n_q " << c.n_q << " n_kv " << c.n_kv << " heads " << c.n_head << "/"
     << c.n_head_kv << " n_seq " << c.n_seq << " | q " << to_string(c.q_type) << " k " << to_string(c.k_type) << " v "
     << to_string(c.v_type) << " out " << to_string(c.out_type) << " | mask m2 " << c.mask_m2 << " m3 " << c.mask_m3
     << " causal " << c.causal << " sinks " << c.sinks << " scale " << c.scale << " max_bias " << c.max_bias
     << " softcap " << c.softcap << " | codebook " << to_string(c.cb) << " rotate_q " << c.rotate_q
     << " unrotate_out " << c.unrotate_out << " | layouts q " << c.q_layout.order[0] << c.q_layout.order[1]
     << c.q_layout.order[2] << "+" << c.q_layout.pad << " k " << c.k_layout.order[0] << c.k_layout.order[1]
     << c.k_layout.order[2] << "+" << c.k_layout.pad << " out " << c.out_layout.order[0] << c.out_layout.order[1]
     << c.out_layout.order[2] << "+" << c.out_layout.pad;
  return os.str();
}

// ---- strided storage ---------------------------------------------------------------------------

struct strided {
  data_type type = data_type::f32;
  int64_t ne[4] = {0, 1, 1, 1};
  size_t nb[4] = {0, 0, 0, 0};
  std::vector<unsigned char> bytes;

  unsigned char* row(int64_t i1, int64_t i2, int64_t i3) {
    return bytes.data() + static_cast<size_t>(i1) * nb[1] + static_cast<size_t>(i2) * nb[2] +
           static_cast<size_t>(i3) * nb[3];
  }
};

strided make_strided(data_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, layout lay,
                     unsigned char fill = 0) {
  strided t;
  t.type = type;
  t.ne[0] = ne0; t.ne[1] = ne1; t.ne[2] = ne2; t.ne[3] = ne3;
  t.nb[0] = turbo3::element_bytes(type);
  size_t stride = turbo3::row_bytes(type, ne0) + lay.pad;
  for (int k = 0; k < 3; ++k) {
    t.nb[lay.order[k]] = stride;
    stride *= static_cast<size_t>(t.ne[lay.order[k]]);
  }
  t.bytes.assign(stride, fill);
  return t;
}

turbo3::tensor_view view_of(const strided& t) {
  turbo3::tensor_view v;
  v.data = t.bytes.data();
  v.type = t.type;
  for (int k = 0; k < 4; ++k) { v.ne[k] = t.ne[k]; v.nb[k] = t.nb[k]; }
  return v;
}

turbo3::output_view output_of(strided& t) {
  turbo3::output_view v;
  v.data = t.bytes.data();
  v.type = t.type;
  for (int k = 0; k < 4; ++k) { v.ne[k] = t.ne[k]; v.nb[k] = t.nb[k]; }
  return v;
}

// Stores n floats as one row of type t and returns the values a reader of the row sees, in float
// (f16: rounded; block types: dequantized, turbo types in the rotated domain).
std::vector<float> store_row(unsigned char* dst, data_type t, const float* x, int64_t n, codebook cb) {
  std::vector<float> seen(static_cast<size_t>(n));
  turbo3::ref::store_row(t, x, dst, n, cb);
  turbo3::ref::load_row(t, dst, seen.data(), n, cb);
  return seen;
}

double read_out(const unsigned char* p, data_type t) {
  if (t == data_type::f16) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return turbo3::fp16_to_float(bits);
  }
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

// ---- the naive attention -------------------------------------------------------------------------

// What the naive attention reads: plain dense arrays in double.
struct dense {
  int64_t d_k = 0, d_v = 0, n_q = 0, n_kv = 0, n_head = 0, n_head_kv = 0, n_seq = 0;
  std::vector<double> q;      // [s][h][i][d]
  std::vector<double> k;      // [s][g][j][d]
  std::vector<double> v;      // [s][g][j][d]
  std::vector<double> mask;   // [s][h][i][j] already broadcast, -inf hides; empty: no mask
  std::vector<double> sinks;  // [h]; empty: no sinks

  size_t qi(int64_t s, int64_t h, int64_t i) const { return static_cast<size_t>(((s * n_head + h) * n_q + i) * d_k); }
  size_t ki(int64_t s, int64_t g, int64_t j) const { return static_cast<size_t>(((s * n_head_kv + g) * n_kv + j) * d_k); }
  size_t vi(int64_t s, int64_t g, int64_t j) const { return static_cast<size_t>(((s * n_head_kv + g) * n_kv + j) * d_v); }
  size_t mi(int64_t s, int64_t h, int64_t i) const { return static_cast<size_t>(((s * n_head + h) * n_q + i) * n_kv); }
  size_t oi(int64_t s, int64_t h, int64_t i) const { return static_cast<size_t>(((s * n_head + h) * n_q + i) * d_v); }
};

// ALiBi slope from its definition, in double (independent of the library's helper).
double naive_slope(double max_bias, int64_t h, int64_t n_head) {
  if (max_bias <= 0.0) return 1.0;
  const int64_t n2 = int64_t{1} << static_cast<int>(std::floor(std::log2(static_cast<double>(n_head))));
  const double m0 = std::pow(2.0, -max_bias / n2);
  const double m1 = std::pow(2.0, -max_bias / (2.0 * n2));
  return h < n2 ? std::pow(m0, static_cast<double>(h + 1)) : std::pow(m1, static_cast<double>(2 * (h - n2) + 1));
}

// out[s][h][i][d] = sum_j e^{x_j} v_j[d] / (sum_j e^{x_j} + e^{sink}), over the visible keys j.
std::vector<double> naive_attention(const dense& a, double scale, double max_bias, double softcap, bool causal) {
  std::vector<double> out(static_cast<size_t>(a.n_seq * a.n_head * a.n_q * a.d_v), 0.0);
  for (int64_t s = 0; s < a.n_seq; ++s) {
    for (int64_t h = 0; h < a.n_head; ++h) {
      const int64_t g = h * a.n_head_kv / a.n_head;
      const double slope = naive_slope(max_bias, h, a.n_head);
      for (int64_t i = 0; i < a.n_q; ++i) {
        std::vector<double> e(static_cast<size_t>(a.n_kv), 0.0);  // e^{x_j}, 0 for hidden keys
        bool any = false;
        for (int64_t j = 0; j < a.n_kv; ++j) {
          if (causal && j - (a.n_kv - a.n_q) > i) continue;
          const double m = a.mask.empty() ? 0.0 : a.mask[a.mi(s, h, i) + static_cast<size_t>(j)];
          if (m == -std::numeric_limits<double>::infinity()) continue;
          double x = 0.0;
          for (int64_t d = 0; d < a.d_k; ++d) x += a.q[a.qi(s, h, i) + static_cast<size_t>(d)] * a.k[a.ki(s, g, j) + static_cast<size_t>(d)];
          x *= scale;
          if (softcap > 0.0) x = softcap * std::tanh(x / softcap);
          x += slope * m;
          e[static_cast<size_t>(j)] = std::exp(x);
          any = true;
        }
        if (!any) continue;  // nothing visible: zeros
        double denominator = a.sinks.empty() ? 0.0 : std::exp(a.sinks[static_cast<size_t>(h)]);
        for (double w : e) denominator += w;
        for (int64_t d = 0; d < a.d_v; ++d) {
          double sum = 0.0;
          for (int64_t j = 0; j < a.n_kv; ++j) sum += e[static_cast<size_t>(j)] / denominator * a.v[a.vi(s, g, j) + static_cast<size_t>(d)];
          out[a.oi(s, h, i) + static_cast<size_t>(d)] = sum;
        }
      }
    }
  }
  return out;
}

// ---- building a problem ------------------------------------------------------------------------

struct problem {
  config cfg;
  strided q, k, v, mask, out;
  std::vector<float> sinks;
  dense naive;                 // the values the naive attention reads
  std::vector<double> expected;
  turbo3::attention_params params;
  unsigned char poison = 0xFF; // initial bytes of out (NaN in f32 and f16)

  // params points into the buffers above: moving keeps those alive, copying would not.
  problem() = default;
  problem(problem&&) = default;
  problem& operator=(problem&&) = default;
  problem(const problem&) = delete;
  problem& operator=(const problem&) = delete;
};

std::vector<float> normal_values(std::mt19937& rng, int64_t n, float sigma) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& f : x) f = dist(rng);
  return x;
}

// Random Q, K, V, mask and sinks stored as cfg says; the naive side reads
//   Q: the stored values (caller-rotated in float when K is a turbo type and rotate_q is off),
//   K, V: the stored values, turbo ones rotated back (float ref::rotate_inverse) when the library
//         is asked to do the matching rotation step, else left in the rotated domain.
// The number of random draws does not depend on types or flags, so two configs that differ only
// there see the same random numbers from the same seed.
problem make_problem(const config& c, std::mt19937& rng) {
  problem pb;
  pb.cfg = c;
  dense& a = pb.naive;
  a.d_k = c.d_k; a.d_v = c.d_v; a.n_q = c.n_q; a.n_kv = c.n_kv;
  a.n_head = c.n_head; a.n_head_kv = c.n_head_kv; a.n_seq = c.n_seq;

  const bool k_rotated_by_caller = turbo3::stores_rotated_values(c.k_type) && !c.rotate_q;
  const bool k_unrotate = turbo3::stores_rotated_values(c.k_type) && c.rotate_q;
  const bool v_unrotate = turbo3::stores_rotated_values(c.v_type) && c.unrotate_out;

  pb.q = make_strided(c.q_type, c.d_k, c.n_q, c.n_head, c.n_seq, c.q_layout, 0xAB);
  a.q.resize(static_cast<size_t>(c.n_seq * c.n_head * c.n_q * c.d_k));
  for (int64_t s = 0; s < c.n_seq; ++s)
    for (int64_t h = 0; h < c.n_head; ++h)
      for (int64_t i = 0; i < c.n_q; ++i) {
        std::vector<float> x = normal_values(rng, c.d_k, 1.0f);
        if (k_rotated_by_caller) turbo3::ref::rotate_forward(x.data(), c.d_k);
        const std::vector<float> seen = store_row(pb.q.row(i, h, s), c.q_type, x.data(), c.d_k, c.cb);
        for (int64_t d = 0; d < c.d_k; ++d) a.q[a.qi(s, h, i) + static_cast<size_t>(d)] = seen[static_cast<size_t>(d)];
      }

  pb.k = make_strided(c.k_type, c.d_k, c.n_kv, c.n_head_kv, c.n_seq, c.k_layout, 0xCD);
  pb.v = make_strided(c.v_type, c.d_v, c.n_kv, c.n_head_kv, c.n_seq, c.v_layout, 0xCD);
  a.k.resize(static_cast<size_t>(c.n_seq * c.n_head_kv * c.n_kv * c.d_k));
  a.v.resize(static_cast<size_t>(c.n_seq * c.n_head_kv * c.n_kv * c.d_v));
  for (int64_t s = 0; s < c.n_seq; ++s)
    for (int64_t g = 0; g < c.n_head_kv; ++g)
      for (int64_t j = 0; j < c.n_kv; ++j) {
        const std::vector<float> xk = normal_values(rng, c.d_k, 1.0f);
        std::vector<float> seen = store_row(pb.k.row(j, g, s), c.k_type, xk.data(), c.d_k, c.cb);
        if (k_unrotate) turbo3::ref::rotate_inverse(seen.data(), c.d_k);
        for (int64_t d = 0; d < c.d_k; ++d) a.k[a.ki(s, g, j) + static_cast<size_t>(d)] = seen[static_cast<size_t>(d)];

        const std::vector<float> xv = normal_values(rng, c.d_v, 1.0f);
        seen = store_row(pb.v.row(j, g, s), c.v_type, xv.data(), c.d_v, c.cb);
        if (v_unrotate) turbo3::ref::rotate_inverse(seen.data(), c.d_v);
        for (int64_t d = 0; d < c.d_v; ++d) a.v[a.vi(s, g, j) + static_cast<size_t>(d)] = seen[static_cast<size_t>(d)];
      }

  turbo3::attention_params& p = pb.params;
  if (c.mask_m2 > 0) {
    // Padded like an engine's mask: more columns than keys and more rows than queries.
    pb.mask = make_strided(data_type::f16, c.n_kv + 5, c.n_q + 2, c.mask_m2, c.mask_m3, contiguous);
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    std::vector<double> planes(static_cast<size_t>(c.mask_m3 * c.mask_m2 * c.n_q * c.n_kv));
    for (int64_t m3 = 0; m3 < c.mask_m3; ++m3)
      for (int64_t m2 = 0; m2 < c.mask_m2; ++m2)
        for (int64_t i = 0; i < pb.mask.ne[1]; ++i)
          for (int64_t j = 0; j < pb.mask.ne[0]; ++j) {
            const float x = coin(rng) < c.mask_inf_fraction ? -std::numeric_limits<float>::infinity() : value(rng);
            const uint16_t bits = turbo3::fp16_from_float(x);
            std::memcpy(pb.mask.row(i, m2, m3) + 2 * j, &bits, 2);
            if (i < c.n_q && j < c.n_kv)
              planes[static_cast<size_t>(((m3 * c.mask_m2 + m2) * c.n_q + i) * c.n_kv + j)] = turbo3::fp16_to_float(bits);
          }
    a.mask.resize(static_cast<size_t>(c.n_seq * c.n_head * c.n_q * c.n_kv));
    for (int64_t s = 0; s < c.n_seq; ++s)
      for (int64_t h = 0; h < c.n_head; ++h)
        for (int64_t i = 0; i < c.n_q; ++i)
          for (int64_t j = 0; j < c.n_kv; ++j)
            a.mask[a.mi(s, h, i) + static_cast<size_t>(j)] =
                planes[static_cast<size_t>((((s % c.mask_m3) * c.mask_m2 + h % c.mask_m2) * c.n_q + i) * c.n_kv + j)];
    p.mask = view_of(pb.mask);
  }

  if (c.sinks) {
    pb.sinks = normal_values(rng, c.n_head, 1.5f);
    a.sinks.assign(pb.sinks.begin(), pb.sinks.end());
    p.sinks = pb.sinks.data();
  }

  pb.out = make_strided(c.out_type, c.d_v, c.n_q, c.n_head, c.n_seq, c.out_layout, pb.poison);

  p.q = view_of(pb.q);
  p.k = view_of(pb.k);
  p.v = view_of(pb.v);
  p.out = output_of(pb.out);
  p.scale = c.scale > 0.0f ? c.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d_k)));
  p.max_bias = c.max_bias;
  p.softcap = c.softcap;
  p.causal = c.causal;
  p.kv_codebook = c.cb;
  p.rotate_q = c.rotate_q;
  p.unrotate_out = c.unrotate_out;

  pb.expected = naive_attention(a, p.scale, p.max_bias, p.softcap, p.causal);
  return pb;
}

// The output view read back in the naive layout [s][h][i][d].
std::vector<double> read_output(problem& pb) {
  const config& c = pb.cfg;
  const size_t eb = turbo3::element_bytes(c.out_type);
  std::vector<double> out(pb.expected.size());
  for (int64_t s = 0; s < c.n_seq; ++s)
    for (int64_t h = 0; h < c.n_head; ++h)
      for (int64_t i = 0; i < c.n_q; ++i)
        for (int64_t d = 0; d < c.d_v; ++d)
          out[pb.naive.oi(s, h, i) + static_cast<size_t>(d)] = read_out(pb.out.row(i, h, s) + eb * static_cast<size_t>(d), c.out_type);
  return out;
}

// Bytes of the out buffer that are not part of the view still hold the poison.
size_t poison_overwritten(problem& pb) {
  const config& c = pb.cfg;
  std::vector<bool> in_view(pb.out.bytes.size(), false);
  const size_t rb = turbo3::row_bytes(c.out_type, c.d_v);
  for (int64_t s = 0; s < c.n_seq; ++s)
    for (int64_t h = 0; h < c.n_head; ++h)
      for (int64_t i = 0; i < c.n_q; ++i) {
        const size_t off = static_cast<size_t>(pb.out.row(i, h, s) - pb.out.bytes.data());
        for (size_t b = 0; b < rb; ++b) in_view[off + b] = true;
      }
  size_t n = 0;
  for (size_t b = 0; b < in_view.size(); ++b) n += (!in_view[b] && pb.out.bytes[b] != pb.poison) ? 1 : 0;
  return n;
}

double max_abs(const std::vector<double>& x) {
  double m = 0.0;
  for (double v : x) m = std::fmax(m, std::fabs(v));
  return m;
}

// Element-wise check for "same values on both sides" (see the top of the file). Returns the number
// of elements out of bounds and reports the worst ratio error / bound.
size_t strict_mismatches(const std::vector<double>& got, const std::vector<double>& want, data_type out_type,
                         double v_max, double* worst_ratio) {
  // Rounding to f32: half an ulp, 2^-24 relative. To f16 the reference goes through float, and the
  // double rounding can add half a float ulp to the f16 half ulp: 2^-11 + 2^-24 relative.
  const double u = out_type == data_type::f16 ? std::ldexp(1.0, -11) + std::ldexp(1.0, -24) : std::ldexp(1.0, -24);
  const double abs_floor = out_type == data_type::f16 ? std::ldexp(1.0, -25) : 0.0;  // half the f16 subnormal step
  size_t bad = 0;
  *worst_ratio = 0.0;
  for (size_t n = 0; n < got.size(); ++n) {
    const double bound = u * std::fabs(want[n]) + abs_floor + 2e-12 * v_max;
    const double err = std::fabs(got[n] - want[n]);
    if (!(err <= bound)) ++bad;  // NaN counts as a mismatch
    *worst_ratio = std::fmax(*worst_ratio, std::isnan(err) ? INFINITY : err / bound);
  }
  return bad;
}

double nmse(const std::vector<double>& got, const std::vector<double>& want) {
  const std::vector<float> g(got.begin(), got.end()), w(want.begin(), want.end());
  return turbo3::ref::nmse(g.data(), w.data(), g.size());
}

// True when the naive side reads the very same numbers as the reference (no float rotation).
bool same_values(const config& c) {
  return !(turbo3::stores_rotated_values(c.k_type) && c.rotate_q) &&
         !(turbo3::stores_rotated_values(c.v_type) && c.unrotate_out);
}

// Runs ref::attention on a fresh random problem and compares it with the naive attention.
void check_case(const config& c, std::mt19937& rng) {
  INFO(describe(c));
  problem pb = make_problem(c, rng);
  turbo3::ref::attention(pb.params);
  const std::vector<double> got = read_output(pb);
  CHECK(poison_overwritten(pb) == 0);
  if (same_values(c)) {
    double worst = 0.0;
    const size_t bad = strict_mismatches(got, pb.expected, c.out_type, max_abs(pb.naive.v), &worst);
    INFO("worst error / bound " << worst);
    CHECK(bad == 0);
  } else {
    const double e = nmse(got, pb.expected);
    INFO("nmse " << e);
    CHECK(e <= (c.out_type == data_type::f16 ? 1e-6 : 1e-10));
  }
}

}  // namespace

// ---- f16 K/V: every option against the naive attention ------------------------------------------

TEST_CASE("ref::attention matches a naive softmax with f16 K/V and every option", "[ref_attention]") {
  TURBO3_SEED_INFO();
  std::mt19937 rng = case_rng(1);
  std::vector<config> cases;
  config c;

  cases.push_back(c);  // plain: D 64, GQA 1, f32 Q and out, contiguous

  c = config{};  // GQA 4, mask broadcast over heads, f16 Q
  c.n_head = 8; c.n_head_kv = 2; c.mask_m2 = 1; c.q_type = data_type::f16;
  cases.push_back(c);

  c = config{};  // per-head mask, per-sequence mask planes, two sequences, f16 out
  c.n_seq = 2; c.mask_m2 = 4; c.mask_m3 = 2; c.out_type = data_type::f16;
  cases.push_back(c);

  c = config{};  // causal (prefill: queries are the last n_q positions) with sinks, GQA 4
  c.n_q = 7; c.n_kv = 20; c.n_head = 8; c.n_head_kv = 2; c.causal = true; c.sinks = true;
  cases.push_back(c);

  c = config{};  // ALiBi with a head count that is not a power of two (m1 branch), GQA 4, 2 sequences
  c.n_head = 12; c.n_head_kv = 3; c.max_bias = 8.0f; c.mask_m2 = 1; c.n_seq = 2;
  cases.push_back(c);

  c = config{};  // same with a per-head mask
  c.n_head = 12; c.n_head_kv = 12; c.max_bias = 8.0f; c.mask_m2 = 12; c.mask_inf_fraction = 0.0;
  cases.push_back(c);

  c = config{};  // softcap with a scale large enough that tanh bends the scores
  c.softcap = 30.0f; c.scale = 4.0f; c.mask_m2 = 1; c.sinks = true;
  cases.push_back(c);

  c = config{};  // non-contiguous views: ggml's permuted out, token-major K/V cache, padded rows
  c.n_seq = 2; c.n_head = 8; c.n_head_kv = 2;
  c.q_layout = heads_inner_padded; c.k_layout = heads_inner; c.v_layout = seq_inner_padded; c.out_layout = heads_inner;
  cases.push_back(c);

  c = config{};  // different head dims for K and V, mask together with causal, f16 Q and out
  c.d_k = 96; c.d_v = 80; c.n_q = 6; c.n_kv = 9; c.causal = true; c.mask_m2 = 1;
  c.q_type = data_type::f16; c.out_type = data_type::f16;
  cases.push_back(c);

  c = config{};  // decode (n_q 1) over one key and over a long context, D 128 / 256
  c.d_k = 128; c.d_v = 128; c.n_q = 1; c.n_kv = 1; c.sinks = true;
  cases.push_back(c);
  c.d_k = 256; c.d_v = 256; c.n_q = 2; c.n_kv = 1000; c.n_head = 8; c.n_head_kv = 2; c.mask_m2 = 1;
  cases.push_back(c);

  c = config{};  // everything at once: GQA 12, ALiBi, softcap, per-head per-seq mask, causal, sinks
  c.n_head = 12; c.n_head_kv = 1; c.n_seq = 2; c.n_q = 5; c.n_kv = 23;
  c.max_bias = 8.0f; c.softcap = 30.0f; c.scale = 2.0f; c.mask_m2 = 12; c.mask_m3 = 2; c.causal = true; c.sinks = true;
  c.q_type = data_type::f16; c.out_type = data_type::f16;
  c.q_layout = heads_inner_padded; c.k_layout = heads_inner_padded; c.v_layout = heads_inner; c.out_layout = heads_inner_padded;
  cases.push_back(c);
  c.out_type = data_type::f32; c.q_type = data_type::f32;
  cases.push_back(c);

  for (const config& k : cases) check_case(k, rng);
}

// ---- turbo3 K and/or V -------------------------------------------------------------------------

TEST_CASE("ref::attention with turbo3 K/V: library rotation on and off, both codebooks", "[ref_attention]") {
  TURBO3_SEED_INFO();
  std::mt19937 rng = case_rng(2);
  const data_type kinds[2] = {data_type::f16, data_type::turbo3};
  for (codebook cb : {codebook::lloyd_max, codebook::legacy})
    for (data_type kt : kinds)
      for (data_type vt : kinds)
        for (bool flags : {true, false}) {
          config c;
          c.d_k = 256; c.d_v = 128; c.n_q = 3; c.n_kv = 45; c.n_head = 8; c.n_head_kv = 2; c.n_seq = 2;
          c.k_type = kt; c.v_type = vt; c.cb = cb; c.rotate_q = flags; c.unrotate_out = flags;
          c.mask_m2 = 1; c.sinks = true; c.causal = true;
          c.k_layout = heads_inner; c.v_layout = heads_inner_padded; c.out_layout = heads_inner;
          check_case(c, rng);
        }

  // One step by the library, the other by the caller; f16 Q and out.
  for (bool rq : {true, false}) {
    config c;
    c.d_k = 128; c.d_v = 256; c.n_q = 4; c.n_kv = 30; c.n_head = 4; c.n_head_kv = 1;
    c.k_type = data_type::turbo3; c.v_type = data_type::turbo3; c.rotate_q = rq; c.unrotate_out = !rq;
    c.q_type = data_type::f16; c.out_type = data_type::f16; c.mask_m2 = 4;
    check_case(c, rng);
  }
}

// ---- every K/V storage type ------------------------------------------------------------------

TEST_CASE("ref::attention with any K and V among f16, turbo3, turbo4, turbo2 and q8_0", "[ref_attention]") {
  TURBO3_SEED_INFO();
  std::mt19937 rng = case_rng(6);
  const data_type kinds[5] = {data_type::f16, data_type::turbo3, data_type::turbo4, data_type::turbo2,
                              data_type::q8_0};
  for (data_type kt : kinds)
    for (data_type vt : kinds)
      for (bool flags : {true, false}) {
        config c;
        c.d_k = 256; c.d_v = 128; c.n_q = 3; c.n_kv = 21; c.n_head = 4; c.n_head_kv = 2; c.n_seq = 1;
        c.k_type = kt; c.v_type = vt; c.rotate_q = flags; c.unrotate_out = flags;
        c.mask_m2 = 1; c.sinks = true; c.causal = true; c.cb = codebook::legacy;
        c.k_layout = heads_inner; c.v_layout = heads_inner_padded; c.out_layout = heads_inner;
        check_case(c, rng);
      }

  // D = 512 for K and V, decode and prefill, one step by the library and the other by the caller.
  for (data_type t : {data_type::turbo4, data_type::turbo2, data_type::q8_0})
    for (bool rq : {true, false}) {
      config c;
      c.d_k = 512; c.d_v = 512; c.n_q = rq ? 1 : 5; c.n_kv = 40; c.n_head = 8; c.n_head_kv = 2;
      c.k_type = t; c.v_type = t; c.rotate_q = rq; c.unrotate_out = !rq;
      c.q_type = data_type::f16; c.out_type = data_type::f16; c.mask_m2 = 8;
      check_case(c, rng);
    }

  // q8_0 rows of 32-value blocks: head dims that are no multiple of 128.
  {
    config c;
    c.d_k = 96; c.d_v = 64; c.n_q = 4; c.n_kv = 33; c.n_head = 6; c.n_head_kv = 3;
    c.k_type = data_type::q8_0; c.v_type = data_type::q8_0; c.causal = true; c.sinks = true;
    check_case(c, rng);
  }
}

// The turbo types share the rotation: with the library's rotation steps off, the output of a turbo4
// or turbo2 V is R times the output with them on (as for turbo3 below).
TEST_CASE("ref::attention: turbo4 and turbo2 without the rotation steps work in the rotated domain", "[ref_attention]") {
  TURBO3_SEED_INFO();
  const uint32_t seed = case_rng(7)();
  for (data_type t : {data_type::turbo4, data_type::turbo2}) {
    config on;
    on.d_k = 256; on.d_v = 128; on.n_q = 2; on.n_kv = 50; on.n_head = 4; on.n_head_kv = 2;
    on.k_type = t; on.v_type = t; on.mask_m2 = 1;
    config off = on;
    off.rotate_q = false; off.unrotate_out = false;
    INFO(describe(on));
    std::mt19937 rng_on(seed), rng_off(seed);
    problem a = make_problem(on, rng_on);
    problem b = make_problem(off, rng_off);
    REQUIRE(a.k.bytes == b.k.bytes);
    REQUIRE(a.v.bytes == b.v.bytes);
    turbo3::ref::attention(a.params);
    turbo3::ref::attention(b.params);
    const std::vector<double> out_on = read_output(a);
    const std::vector<double> out_off = read_output(b);
    INFO("nmse(off, on) " << nmse(out_off, out_on));
    CHECK(nmse(out_off, out_on) > 0.1);
    std::vector<float> back(out_off.begin(), out_off.end());
    turbo3::ref::rotate_inverse(back.data(), static_cast<int64_t>(back.size()));
    const std::vector<double> back_d(back.begin(), back.end());
    INFO("nmse(R^T off, on) " << nmse(back_d, out_on));
    CHECK(nmse(back_d, out_on) <= 1e-10);
  }
}

TEST_CASE("ref::attention without its rotation steps works in the rotated domain", "[ref_attention]") {
  TURBO3_SEED_INFO();
  const uint32_t seed = case_rng(3)();
  for (codebook cb : {codebook::lloyd_max, codebook::legacy}) {
    config on;
    on.d_k = 128; on.d_v = 256; on.n_q = 2; on.n_kv = 60; on.n_head = 4; on.n_head_kv = 2;
    on.k_type = data_type::turbo3; on.v_type = data_type::turbo3; on.cb = cb; on.mask_m2 = 1;
    config off = on;
    off.rotate_q = false; off.unrotate_out = false;
    INFO(describe(on));

    // Same seed: same random numbers, hence the same K/V bytes; off gets the caller-rotated Q.
    std::mt19937 rng_on(seed), rng_off(seed);
    problem a = make_problem(on, rng_on);
    problem b = make_problem(off, rng_off);
    REQUIRE(a.k.bytes == b.k.bytes);
    REQUIRE(a.v.bytes == b.v.bytes);
    turbo3::ref::attention(a.params);
    turbo3::ref::attention(b.params);
    const std::vector<double> out_on = read_output(a);
    std::vector<double> out_off = read_output(b);

    // The off output is R (the on output): different numbers until rotated back.
    INFO("nmse(off, on) " << nmse(out_off, out_on));
    CHECK(nmse(out_off, out_on) > 0.1);
    std::vector<float> back(out_off.begin(), out_off.end());
    turbo3::ref::rotate_inverse(back.data(), static_cast<int64_t>(back.size()));
    const std::vector<double> back_d(back.begin(), back.end());
    INFO("nmse(R^T off, on) " << nmse(back_d, out_on));
    CHECK(nmse(back_d, out_on) <= 1e-10);
  }
}

// ---- rows without keys and sinks ---------------------------------------------------------------

TEST_CASE("ref::attention: a query that sees no key outputs zeros", "[ref_attention]") {
  TURBO3_SEED_INFO();
  std::mt19937 rng = case_rng(4);
  for (bool sinks : {false, true}) {
    INFO("sinks " << sinks);

    // Causal with more queries than keys: query i sees keys j <= i - 2, so queries 0 and 1 see none.
    config c;
    c.n_q = 5; c.n_kv = 3; c.causal = true; c.sinks = sinks; c.n_seq = 2;
    problem pb = make_problem(c, rng);
    turbo3::ref::attention(pb.params);
    std::vector<double> got = read_output(pb);
    for (int64_t s = 0; s < c.n_seq; ++s)
      for (int64_t h = 0; h < c.n_head; ++h)
        for (int64_t i = 0; i < c.n_q; ++i)
          for (int64_t d = 0; d < c.d_v; ++d) {
            const double x = got[pb.naive.oi(s, h, i) + static_cast<size_t>(d)];
            if (i < 2) CHECK(x == 0.0);
            else CHECK(x != 0.0);
          }
    double worst = 0.0;
    CHECK(strict_mismatches(got, pb.expected, c.out_type, max_abs(pb.naive.v), &worst) == 0);

    // A mask that is -inf everywhere, with turbo3 V (the zero row also goes through the inverse rotation).
    c = config{};
    c.d_v = 128; c.v_type = data_type::turbo3; c.mask_m2 = 1; c.mask_inf_fraction = 1.0; c.sinks = sinks;
    c.out_type = data_type::f16;
    pb = make_problem(c, rng);
    turbo3::ref::attention(pb.params);
    got = read_output(pb);
    for (double x : got) CHECK(x == 0.0);
  }
}

TEST_CASE("ref::attention: a sink only joins the denominator", "[ref_attention]") {
  TURBO3_SEED_INFO();
  std::mt19937 rng = case_rng(5);
  // One key: out = v * e^x / (e^x + e^sink) = v / (1 + e^(sink - x)), for sinks far below, near
  // and far above the score.
  for (float sink : {-40.0f, -1.0f, 0.0f, 0.5f, 3.0f, 40.0f}) {
    INFO("sink " << sink);
    config c;
    c.n_q = 2; c.n_kv = 1; c.n_head = 1; c.n_head_kv = 1; c.sinks = true;
    problem pb = make_problem(c, rng);
    pb.sinks[0] = sink;
    turbo3::ref::attention(pb.params);
    const std::vector<double> got = read_output(pb);
    const dense& a = pb.naive;
    for (int64_t i = 0; i < c.n_q; ++i) {
      double x = 0.0;
      for (int64_t d = 0; d < c.d_k; ++d) x += a.q[a.qi(0, 0, i) + static_cast<size_t>(d)] * a.k[a.ki(0, 0, 0) + static_cast<size_t>(d)];
      x *= pb.params.scale;
      const double weight = 1.0 / (1.0 + std::exp(static_cast<double>(sink) - x));
      for (int64_t d = 0; d < c.d_v; ++d) {
        const double want = weight * a.v[a.vi(0, 0, 0) + static_cast<size_t>(d)];
        const double have = got[a.oi(0, 0, i) + static_cast<size_t>(d)];
        CHECK(std::fabs(have - want) <= std::ldexp(std::fabs(want), -24) + 1e-300);
      }
    }
  }

  // Sinks are per head: with two heads, only the head with the large sink is damped.
  config c;
  c.n_q = 1; c.n_kv = 4; c.n_head = 2; c.n_head_kv = 1; c.sinks = true;
  problem pb = make_problem(c, rng);
  pb.sinks[0] = -1000.0f;  // no effect at all
  pb.sinks[1] = 1000.0f;   // e^(x - 1000) underflows: every weight is zero
  turbo3::ref::attention(pb.params);
  const std::vector<double> got = read_output(pb);
  dense no_sinks = pb.naive;
  no_sinks.sinks.clear();
  const std::vector<double> free_softmax = naive_attention(no_sinks, pb.params.scale, 0.0, 0.0, false);
  for (int64_t d = 0; d < c.d_v; ++d) {
    const size_t h0 = pb.naive.oi(0, 0, 0) + static_cast<size_t>(d), h1 = pb.naive.oi(0, 1, 0) + static_cast<size_t>(d);
    CHECK(std::fabs(got[h0] - free_softmax[h0]) <= std::ldexp(std::fabs(free_softmax[h0]), -24) + 1e-12);
    CHECK(got[h1] == 0.0);
  }
}

// attention_pairs over disjoint ranges, each on a thread of its own, writes the bytes one
// attention call writes: per-head masks, ALiBi, sinks and the causal flag (all indexed by the
// absolute head), GQA 4, two sequences, ranges that split KV heads and sequences.
TEST_CASE("ref::attention_pairs: disjoint ranges on threads write the bytes of one call", "[ref_attention]") {
  TURBO3_SEED_INFO();
  std::mt19937 rng(case_rng(11)());
  config c;
  c.d_k = 128; c.d_v = 128; c.n_q = 5; c.n_kv = 70; c.n_head = 8; c.n_head_kv = 2; c.n_seq = 2;
  c.k_type = data_type::turbo3; c.v_type = data_type::q8_0; c.out_type = data_type::f16;
  c.mask_m2 = c.n_head; c.mask_m3 = 2; c.causal = true; c.sinks = true; c.max_bias = 8.0f;
  c.out_layout = heads_inner_padded;
  INFO(describe(c));
  problem pb = make_problem(c, rng);
  turbo3::ref::attention(pb.params);
  const std::vector<unsigned char> whole = pb.out.bytes;
  for (const std::vector<int64_t>& cuts : {std::vector<int64_t>{0, 3, 7, 16}, std::vector<int64_t>{0, 1, 15, 16},
                                           std::vector<int64_t>{0, 16}}) {
    std::fill(pb.out.bytes.begin(), pb.out.bytes.end(), pb.poison);
    std::vector<std::thread> pool;
    for (size_t k = 0; k + 1 < cuts.size(); ++k)
      pool.emplace_back([&, k] { turbo3::ref::attention_pairs(pb.params, cuts[k], cuts[k + 1]); });
    for (std::thread& t : pool) t.join();
    CHECK(pb.out.bytes == whole);
  }
  // An empty range writes nothing.
  std::fill(pb.out.bytes.begin(), pb.out.bytes.end(), pb.poison);
  turbo3::ref::attention_pairs(pb.params, 9, 9);
  CHECK(std::count(pb.out.bytes.begin(), pb.out.bytes.end(), pb.poison) == static_cast<long>(pb.out.bytes.size()));
}
