// One attention problem with engine-like layouts: random inputs on the host, the same bytes on
// the device, the GPU result against ref::attention on the identical quantized bytes.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gpu_common.hpp"
#include "turbo3/turbo3.hpp"

namespace turbo3_test {

struct attention_case {
  int head_dim = 128;  // K's (and Q's); V's and the output's too, but where v_in_k
  // MLA's cache as ggml engines keep it: V is a view of each K row's first v_head_dim values.
  bool v_in_k = false;
  int v_head_dim = 0;
  int head_dim_v() const { return v_in_k ? v_head_dim : head_dim; }
  int n_q = 1, n_kv = 256, n_head = 4, n_head_kv = 4, n_seq = 1;
  turbo3::data_type q_type = turbo3::data_type::f32;
  turbo3::data_type k_type = turbo3::data_type::turbo3, v_type = turbo3::data_type::turbo3;
  turbo3::data_type out_type = turbo3::data_type::f32;
  bool mask = false, causal = false, sinks = false;
  // With mask: random values with 15% -inf (random), or -inf past each query's diagonal (causal,
  // ggml's prefill mask), or visible only within `window` keys before the diagonal (window); each
  // structured pattern also hides every key from the queries in rows 5 .. 7 when it has them.
  enum class mask_kind { random, causal, window } mask_pattern = mask_kind::random;
  int window = 0;
  float max_bias = 0.0f, softcap = 0.0f;
  turbo3::codebook cb = turbo3::codebook::lloyd_max;
  bool library_rotates = true;
  bool permuted_out = false;  // ggml's out layout [D, n_head, n_q, n_seq]
  bool kv_head_major = false;  // K/V rows of each head back to back, not an engine's token-major rows

  std::string describe() const {
    using turbo3::to_string;
    std::string s = "D=" + std::to_string(head_dim) + (v_in_k ? " V=K[:" + std::to_string(v_head_dim) + "]" : "") + " n_q=" + std::to_string(n_q) + " n_kv=" + std::to_string(n_kv) +
                    " heads=" + std::to_string(n_head) + "/" + std::to_string(n_head_kv) + " seq=" + std::to_string(n_seq) +
                    " q=" + to_string(q_type) + " k=" + to_string(k_type) + " v=" + to_string(v_type) +
                    " out=" + to_string(out_type) + " cb=" + to_string(cb);
    if (mask) s += mask_pattern == mask_kind::random ? " mask" : mask_pattern == mask_kind::causal ? " mask(causal)" : " mask(window " + std::to_string(window) + ")";
    if (causal) s += " causal";
    if (sinks) s += " sinks";
    if (max_bias > 0) s += " alibi";
    if (softcap > 0) s += " softcap";
    if (!library_rotates) s += " caller-rotates";
    if (permuted_out) s += " permuted-out";
    if (kv_head_major) s += " kv-head-major";
    return s;
  }
};

// A case with a structured mask (attention_case::mask_kind) over 16 query heads and 8 KV heads.
struct mask_shape {
  int n_q, n_kv;
  attention_case::mask_kind pattern;
  int window;
  bool causal;
};
inline attention_case structured_mask_case(int head_dim, turbo3::data_type kv, const mask_shape& sh) {
  attention_case c;
  c.head_dim = head_dim;
  c.n_head = 16;
  c.n_head_kv = 8;
  c.n_q = sh.n_q;
  c.n_kv = sh.n_kv;
  c.k_type = kv;
  c.v_type = kv;
  c.mask = true;
  c.mask_pattern = sh.pattern;
  c.window = sh.window;
  c.causal = sh.causal;
  return c;
}

// The benchmark's head layout, 16 query heads over 8 KV heads, at head dim D.
inline attention_case gqa_case(int head_dim, int n_q, int n_kv) {
  attention_case c;
  c.head_dim = head_dim;
  c.n_head = 16;
  c.n_head_kv = 8;
  c.n_q = n_q;
  c.n_kv = n_kv;
  return c;
}

// One decode row as an engine runs it: D = 256, 16 query heads over 8, mask and sinks.
inline attention_case decode_case(int n_kv = 3000) {
  attention_case c = gqa_case(256, 1, n_kv);
  c.mask = true;
  c.sinks = true;
  return c;
}

// D = 256, 4 query heads over 2, 150 queries over 170 keys: several query and key tiles of every
// prefill kernel, ragged at both ends; causal by the flag, or (ggml_mask) by ggml's causal mask in
// its place.
inline attention_case causal_tiles_case(turbo3::data_type kv, bool ggml_mask) {
  attention_case c;
  c.head_dim = 256;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.n_q = 150;
  c.n_kv = 170;
  c.k_type = kv;
  c.v_type = kv;
  c.causal = !ggml_mask;
  c.mask = ggml_mask;
  c.mask_pattern = attention_case::mask_kind::causal;
  return c;
}

// ref::attention with its (sequence, query head) pairs shared among the host's threads: on one
// thread the reference of the deep and wide cases is most of the GPU suite's run time. The
// bytes are those of one ref::attention call (ref::attention_pairs).
inline void reference_on_all_threads(const turbo3::attention_params& p) {
  const int64_t pairs = p.n_seq() * p.n_head();
  const int64_t n = std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), pairs));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < n; ++t)
    pool.emplace_back([&p, t, n, pairs] { turbo3::ref::attention_pairs(p, pairs * t / n, pairs * (t + 1) / n); });
  turbo3::ref::attention_pairs(p, 0, pairs / n);
  for (std::thread& t : pool) t.join();
}

// Host and device copies of one problem's tensors.
class attention_problem {
 public:
  attention_problem(const attention_case& c, std::mt19937_64& rng) : c_(c) {
    using namespace turbo3;
    const int64_t D = c.head_dim;
    // Q [D, n_q, n_head, n_seq], contiguous.
    q_ = make_tensor(c.q_type, D, c.n_q, c.n_head, c.n_seq, /*token_major=*/false, rng, 1.0f);
    // K/V: the cache layout of an engine, rows of all KV heads of one token adjacent; or head-major.
    k_ = make_tensor(c.k_type, D, c.n_kv, c.n_head_kv, c.n_seq, !c.kv_head_major, rng, 1.0f);
    if (!c.v_in_k) v_ = make_tensor(c.v_type, D, c.n_kv, c.n_head_kv, c.n_seq, !c.kv_head_major, rng, 1.0f);
    const int64_t DV = c.head_dim_v();
    if (c.mask) {
      const int64_t ne0 = c.n_kv + 5, ne1 = c.n_q + 3;  // padded, as engines pad
      std::vector<uint16_t> m(static_cast<size_t>(ne0 * ne1));
      std::uniform_real_distribution<float> u(-2.0f, 2.0f), coin(0.0f, 1.0f);
      for (auto& x : m) x = coin(rng) < 0.15f ? 0xfc00 : fp16_from_float(u(rng));  // 15% -inf
      if (c.mask_pattern != attention_case::mask_kind::random) {
        for (int64_t i = 0; i < ne1; ++i)
          for (int64_t j = 0; j < ne0; ++j) {
            const int64_t diagonal = i + c.n_kv - c.n_q;  // the last key query i may see
            bool hidden = j > diagonal || (i >= 5 && i <= 7);
            if (c.mask_pattern == attention_case::mask_kind::window) hidden = hidden || j < diagonal - c.window;
            uint16_t& x = m[static_cast<size_t>(i * ne0 + j)];
            x = hidden ? uint16_t{0xfc00} : fp16_from_float(u(rng));
          }
      }
      mask_host_.resize(m.size() * 2);
      std::memcpy(mask_host_.data(), m.data(), mask_host_.size());
      mask_view_.type = data_type::f16;
      mask_view_.ne[0] = ne0; mask_view_.ne[1] = ne1; mask_view_.ne[2] = 1; mask_view_.ne[3] = 1;
      mask_view_.nb[1] = static_cast<size_t>(ne0) * 2;
      mask_view_.nb[2] = mask_view_.nb[3] = mask_view_.nb[1] * ne1;
    }
    if (c.sinks) {
      std::normal_distribution<float> n(0.0f, 2.0f);
      sinks_host_.resize(c.n_head);
      for (auto& x : sinks_host_) x = n(rng);
    }
    // out [D, n_q, n_head, n_seq] or permuted [D, n_head, n_q, n_seq].
    const size_t es = c.out_type == data_type::f16 ? 2 : 4;
    out_view_.type = c.out_type;
    out_view_.ne[0] = DV; out_view_.ne[1] = c.n_q; out_view_.ne[2] = c.n_head; out_view_.ne[3] = c.n_seq;
    if (c.permuted_out) {
      out_view_.nb[2] = DV * es;
      out_view_.nb[1] = out_view_.nb[2] * c.n_head;
    } else {
      out_view_.nb[1] = DV * es;
      out_view_.nb[2] = out_view_.nb[1] * c.n_q;
    }
    out_view_.nb[3] = static_cast<size_t>(DV) * es * c.n_q * c.n_head;
    out_bytes_ = out_view_.nb[3] * c.n_seq;

    // Device copies.
    d_q_ = upload(q_.host);
    d_k_ = upload(k_.host);
    if (!c.v_in_k) d_v_ = upload(v_.host);
    if (c.mask) d_mask_ = upload(mask_host_);
    if (c.sinks) {
      std::vector<uint8_t> b(sinks_host_.size() * 4);
      std::memcpy(b.data(), sinks_host_.data(), b.size());
      d_sinks_ = upload(b);
    }
    d_out_ = std::make_unique<device_buffer>(out_bytes_);
  }

  // Replaces Q, K and V by fresh random contents (same shapes), on the host and the device.
  void refill(std::mt19937_64& rng) {
    fill(q_, rng, 1.0f);
    fill(k_, rng, 1.0f);
    d_q_->upload(q_.host.data(), q_.host.size());
    d_k_->upload(k_.host.data(), k_.host.size());
    if (!c_.v_in_k) {
      fill(v_, rng, 1.0f);
      d_v_->upload(v_.host.data(), v_.host.size());
    }
  }

  turbo3::attention_params device_params() const { return params(true); }
  turbo3::attention_params host_params(void* out) const {
    turbo3::attention_params p = params(false);
    p.out.data = out;
    return p;
  }

  void poison_output() { d_out_->poison(0xff); }  // NaN in f32 and f16

  // NMSE of the device output against ref::attention on the same bytes.
  double compare_with_reference() const { return compare_with(reference()); }

  // ref::attention's output bytes (the output type and layout), for several compare_with calls.
  std::vector<uint8_t> reference() const {
    std::vector<uint8_t> want(out_bytes_);
    reference_on_all_threads(host_params(want.data()));
    return want;
  }

  // NMSE of the device output against `want` (reference()).
  double compare_with(const std::vector<uint8_t>& want) const {
    std::vector<uint8_t> got(out_bytes_);
    d_out_->download(got.data(), got.size());
    const size_t n = out_bytes_ / (c_.out_type == turbo3::data_type::f16 ? 2 : 4);
    std::vector<float> g(n), w(n);
    for (size_t i = 0; i < n; ++i) {
      if (c_.out_type == turbo3::data_type::f16) {
        uint16_t a, b;
        std::memcpy(&a, &got[2 * i], 2);
        std::memcpy(&b, &want[2 * i], 2);
        g[i] = turbo3::fp16_to_float(a);
        w[i] = turbo3::fp16_to_float(b);
      } else {
        std::memcpy(&g[i], &got[4 * i], 4);
        std::memcpy(&w[i], &want[4 * i], 4);
      }
    }
    return turbo3::ref::nmse(g.data(), w.data(), n);
  }

  const attention_case& spec() const { return c_; }

 private:
  struct tensor {
    turbo3::data_type type;
    int64_t ne[4];
    size_t nb[4];
    std::vector<uint8_t> host;
  };

  static tensor make_tensor(turbo3::data_type t, int64_t d, int64_t rows, int64_t heads, int64_t seqs, bool token_major,
                            std::mt19937_64& rng, float sigma) {
    tensor x{t, {d, rows, heads, seqs}, {0, 0, 0, 0}, {}};
    const size_t rb = turbo3::row_bytes(t, d);
    if (token_major) {
      x.nb[2] = rb;
      x.nb[1] = rb * heads;
    } else {
      x.nb[1] = rb;
      x.nb[2] = rb * rows;
    }
    x.nb[3] = rb * rows * heads;
    x.host.resize(x.nb[3] * seqs);
    fill(x, rng, sigma);
    return x;
  }

  static void fill(tensor& x, std::mt19937_64& rng, float sigma) {
    using namespace turbo3;
    std::normal_distribution<float> n(0.0f, sigma);
    const int64_t d = x.ne[0];
    std::vector<float> row(static_cast<size_t>(d));
    for (int64_t s = 0; s < x.ne[3]; ++s)
      for (int64_t h = 0; h < x.ne[2]; ++h)
        for (int64_t r = 0; r < x.ne[1]; ++r) {
          for (auto& v : row) v = n(rng);
          uint8_t* dst = x.host.data() + r * x.nb[1] + h * x.nb[2] + s * x.nb[3];
          if (x.type == data_type::f32) {
            std::memcpy(dst, row.data(), row.size() * 4);
          } else if (x.type == data_type::f16) {
            for (int64_t i = 0; i < d; ++i) {
              const uint16_t b = fp16_from_float(row[i]);
              std::memcpy(dst + 2 * i, &b, 2);
            }
          } else {  // the block types: the host quantizer's bytes (turbo3 with the Lloyd-Max table)
            ref::store_row(x.type, row.data(), dst, d);
          }
        }
  }

  static std::unique_ptr<device_buffer> upload(const std::vector<uint8_t>& host) {
    auto b = std::make_unique<device_buffer>(host.size());
    b->upload(host.data(), host.size());
    return b;
  }

  static turbo3::tensor_view view(const tensor& t, const void* data) {
    turbo3::tensor_view v;
    v.data = data;
    v.type = t.type;
    for (int i = 0; i < 4; ++i) {
      v.ne[i] = t.ne[i];
      v.nb[i] = t.nb[i];
    }
    return v;
  }

  turbo3::attention_params params(bool device) const {
    turbo3::attention_params p;
    p.q = view(q_, device ? d_q_->ptr : q_.host.data());
    p.k = view(k_, device ? d_k_->ptr : k_.host.data());
    if (c_.v_in_k) {
      p.v = p.k;
      p.v.ne[0] = c_.v_head_dim;
    } else {
      p.v = view(v_, device ? d_v_->ptr : v_.host.data());
    }
    if (c_.mask) {
      p.mask = mask_view_;
      p.mask.data = device ? d_mask_->ptr : static_cast<const void*>(mask_host_.data());
    }
    if (c_.sinks) p.sinks = device ? d_sinks_->as<float>() : sinks_host_.data();
    p.out = out_view_;
    p.out.data = device ? d_out_->ptr : nullptr;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
    if (c_.softcap > 0) p.scale *= 4.0f;  // make the cap bite
    p.max_bias = c_.max_bias;
    p.softcap = c_.softcap;
    p.causal = c_.causal;
    p.kv_codebook = c_.cb;
    p.rotate_q = p.unrotate_out = c_.library_rotates;
    return p;
  }

  attention_case c_;
  tensor q_, k_, v_;
  std::vector<uint8_t> mask_host_;
  turbo3::tensor_view mask_view_;
  std::vector<float> sinks_host_;
  turbo3::output_view out_view_;
  size_t out_bytes_ = 0;
  std::unique_ptr<device_buffer> d_q_, d_k_, d_v_, d_mask_, d_sinks_, d_out_;
};

// Worst NMSE seen by a test binary run, per kernel family, printed at exit.
// The NMSE every GPU test holds a route to against ref::attention on the same quantized bytes.
inline constexpr double nmse_limit = 1e-5;

struct nmse_tracker {
  double worst = 0.0;
  std::string worst_case;
  int cases = 0;
  void record(double e, const std::string& what) {
    ++cases;
    if (!(e <= worst)) {  // NaN sticks
      worst = e;
      worst_case = what;
    }
  }
};

// A named worst-NMSE record that prints "<label>: N cases, worst NMSE e (case)" when the test
// program exits, where it recorded anything: one per route or forced kernel form.
struct reported_nmse : nmse_tracker {
  explicit reported_nmse(const char* name) : label(name) {}
  reported_nmse(const reported_nmse&) = delete;
  reported_nmse& operator=(const reported_nmse&) = delete;
  ~reported_nmse() {
    if (cases) std::printf("%s: %d cases, worst NMSE %.3e (%s)\n", label, cases, worst, worst_case.c_str());
  }
  const char* label;
};

// Records e as `what` in `tracker` and checks it against nmse_limit.
inline void check_nmse(nmse_tracker& tracker, double e, const std::string& what) {
  tracker.record(e, what);
  INFO("NMSE " << e);
  CHECK(e <= nmse_limit);
}

// One flash_attention call on the default stream over poisoned output, which must succeed; the
// NMSE of its output against the reference.
template <class Allocator, class = std::enable_if_t<turbo3::is_allocator_v<Allocator>>>
double run_and_compare(attention_problem& prob, Allocator& allocator, const turbo3::launch_options& opt = {}) {
  prob.poison_output();
  REQUIRE(turbo3::flash_attention(prob.device_params(), allocator, nullptr, opt) == turbo3::status::ok);
  TURBO3_CHECK_HIP(hipDeviceSynchronize());
  return prob.compare_with_reference();
}
inline double run_and_compare(attention_problem& prob, const turbo3::launch_options& opt = {}) {
  turbo3::stream_pool_allocator pool;
  return run_and_compare(prob, pool, opt);
}

// Options that force one kernel family.
inline turbo3::launch_options forced(turbo3::kernel_choice k) {
  turbo3::launch_options o;
  o.kernel = k;
  return o;
}

// Captures one flash_attention call (hipStreamCaptureModeGlobal), replays the graph `replays`
// times with new Q/K/V contents, compares every replay with the reference (nmse_limit) and returns
// the worst NMSE.
template <class Allocator>
double capture_and_replay(Allocator& allocator, hipStream_t stream, attention_problem& prob, std::mt19937_64& rng,
                          const turbo3::launch_options& opt, int replays, const std::string& name) {
  hipGraph_t graph = nullptr;
  hipGraphExec_t exec = nullptr;
  TURBO3_CHECK_HIP(hipStreamBeginCapture(stream, hipStreamCaptureModeGlobal));
  const turbo3::status s = turbo3::flash_attention(prob.device_params(), allocator, stream, opt);
  TURBO3_CHECK_HIP(hipStreamEndCapture(stream, &graph));
  REQUIRE(s == turbo3::status::ok);
  TURBO3_CHECK_HIP(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
  double worst = 0;
  for (int replay = 0; replay < replays; ++replay) {
    prob.refill(rng);
    prob.poison_output();
    TURBO3_CHECK_HIP(hipGraphLaunch(exec, stream));
    TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
    const double e = prob.compare_with_reference();
    INFO(name << " replay " << replay << " NMSE " << e);
    REQUIRE(e <= nmse_limit);
    worst = std::max(worst, e);
  }
  TURBO3_CHECK_HIP(hipGraphExecDestroy(exec));
  TURBO3_CHECK_HIP(hipGraphDestroy(graph));
  return worst;
}

}  // namespace turbo3_test
