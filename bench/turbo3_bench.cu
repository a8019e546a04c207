// turbo3 benchmark: Google Benchmark with GPU-event manual timing.
//
// Families (16 query heads over 8 KV heads unless --heads / --kv-heads say otherwise):
//   prefill/<kernel>/<kv>/pp<L>[/mask]   n_q = n_kv = L, D = 256 (--prefill-head-dims; another D
//                                        adds /d<D> before pp<L>), causal; /mask: a full additive
//                                        f16 mask [n_kv, n_q] with the causal pattern (0 or -inf) and
//                                        the causal flag off, as ggml engines pass it (--mask).
//                                        kernel: vec (the decode kernels forced for prefill), vec-scalar
//                                        (the FMA decode kernel forced), materialize, tile, and mma once
//                                        launch.hpp has kernel_choice::mma.
//   decode/<kernel>/<kv>/d<D>/depth<N>   one query row; kernel vec (the launcher's default choice),
//                                        vec-counters (the same with caller-owned counters,
//                                        launch_options::counters), vec-scalar (FMA) and vec-mma
//                                        (matrix instructions) forced.
//   verify/<kernel>/<kv>/d<D>/nq<R>/depth<N>
//                                        R new query rows over N cached keys and themselves (a
//                                        speculative-decoding verify step), causal by the flag, or
//                                        with --mask by ggml's causal mask (suffix /mask, as an
//                                        engine calls it); kernel auto (the launcher's choice),
//                                        mma-nosplit (kv_splits = 1) and vec (the decode kernels
//                                        forced).
//   ubatch/<kernel>/<kv>/d<D>/q<U>/depth<N>
//                                        an engine's prompt ubatch: U queries over N cached keys and
//                                        themselves with ggml's causal mask; kernel auto, mma-nosplit.
// kv: the K/V types of --kv (default f16 and turbo3, each for both K and V), named by the type when
// K and V share it, K-V otherwise (e.g. q8_0-turbo3). Q and out are f32, token-major as an engine
// lays them out.
//
// Method, the same for every family:
// - Enough copies of the inputs are rotated that every timed working set (Q, K, V, mask, out of
//   all copies) is at least 4x the device's L2 read at run time, so the numbers are the memory's.
// - Every copy runs once eagerly (first-use setup happens there, outside any capture) into an
//   output poisoned with NaN; the output of the first and the last copy must then be finite.
// - One graph holds one call per copy, back to back. A timed sample is one replay of that graph
//   between two GPU events, divided by the number of calls; a short spin kernel queued first keeps
//   the GPU busy while the replay is submitted, so no launch gap is timed. Warm-up first; the
//   median of the samples is the `median_us` counter (real_time is Google Benchmark's mean).
// - A kernel that returns a status other than ok (e.g. `unsupported` for a prefill kernel not in
//   this build) skips its case with that status in the message; the other cases still run.
// Counters: tokens_per_s; TFLOPs (prefill: 4 * D * n_head * visible query-key pairs, i.e.
// L(L+1)/2 pairs for causal and for the causal-pattern mask: the useful work, not what a kernel
// that ignores causality would do); kv_GBps of the K/V bytes actually stored and copy_GBps, the
// device-to-device copy bandwidth this binary measures at start (bytes read + written) (decode).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <type_traits>
#include <vector>

#include "turbo3/turbo3.hpp"

namespace {

#define BENCH_CHECK(expr)                                                                        \
  do {                                                                                           \
    const hipError_t e_ = (expr);                                                                \
    if (e_ != hipSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, hipGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

struct device_info {
  size_t l2_bytes = 0;
  double copy_gbps = 0;  // measured: (read + written) bytes / s
  std::string name;
};
device_info g_device;

// The cache types of one case: K and V may differ (e.g. q8_0 keys beside turbo values).
struct kv_pair {
  turbo3::data_type k, v;
};

struct bench_config {
  int n_head = 16, n_head_kv = 8;
  std::vector<int> depths = {4096, 32768, 131072};
  std::vector<int> head_dims = {128, 256};
  std::vector<int> prefill_sizes = {512, 2048, 4096};
  std::vector<int> prefill_head_dims = {256};
  std::vector<kv_pair> kv_types = {{turbo3::data_type::f16, turbo3::data_type::f16},
                                   {turbo3::data_type::turbo3, turbo3::data_type::turbo3}};
  bool prefill_mask = false;  // also register the /mask variants (prefill and verify)
  bool head_major = false;  // K/V layout: head-major instead of token-major
  int kv_splits = 0;        // split-KV count of decode, verify and ubatch (where open); 0: the launcher's choice
  std::vector<int> verify_rows = {2, 4, 8, 16};
  std::vector<int> verify_depths = {32768, 131072};
  std::vector<int> ubatch_depths = {0, 8192, 32768};
  int ubatch = 512;
  // false: the caller rotates Q / un-rotates the output itself (an engine's own graph)
  bool library_rotates_q = true;
  bool library_unrotates_out = true;
} g_config;

double measure_copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a, *b;
  BENCH_CHECK(hipMalloc(&a, bytes));
  BENCH_CHECK(hipMalloc(&b, bytes));
  BENCH_CHECK(hipMemset(a, 1, bytes));
  hipEvent_t e0, e1;
  BENCH_CHECK(hipEventCreate(&e0));
  BENCH_CHECK(hipEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    BENCH_CHECK(hipEventRecord(e0, nullptr));
    BENCH_CHECK(hipMemcpyAsync(b, a, bytes, hipMemcpyDeviceToDevice, nullptr));
    BENCH_CHECK(hipEventRecord(e1, nullptr));
    BENCH_CHECK(hipEventSynchronize(e1));
    float t;
    BENCH_CHECK(hipEventElapsedTime(&t, e0, e1));
    if (i >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  BENCH_CHECK(hipFree(a));
  BENCH_CHECK(hipFree(b));
  BENCH_CHECK(hipEventDestroy(e0));
  BENCH_CHECK(hipEventDestroy(e1));
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

// Pseudo-random values in [-2, 2) generated on the device (a hash of the index and a seed):
// benchmark caches are gigabytes, far too slow to produce on the host.
__global__ void fill_uniform_kernel(float* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b9u ^ seed ^ static_cast<uint32_t>(i >> 32) * 0x85ebca6bu;
    h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
    x[i] = (h >> 8) * (4.0f / 16777216.0f) - 2.0f;
  }
}

// The additive f16 mask of a causal prefill, [n_kv, n_q] with row stride n_kv: 0 where key j is
// visible to query i (j <= i + n_kv - n_q), -inf elsewhere. Written as bits (f16 -inf = 0xfc00).
__global__ void fill_causal_mask_kernel(uint16_t* m, int n_kv, int n_q) {
  const size_t n = static_cast<size_t>(n_kv) * n_q;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int q = static_cast<int>(i / n_kv), j = static_cast<int>(i % n_kv);
    m[i] = j <= q + (n_kv - n_q) ? uint16_t{0} : uint16_t{0xfc00};
  }
}

// Keeps the GPU busy for about `cycles` clocks, so that a replay queued behind it starts without
// a launch gap (the timed interval begins when the spin ends).
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
constexpr long long spin_cycles = 50000;  // about 25 us at 2 GHz: more than the host needs to queue a replay

// Fills `rows` rows of `row_values` values of type t at dev (row stride = row size) with random data,
// quantized on the device by write_rows for turbo3.
void fill_random(void* dev, int64_t rows, int64_t row_values, turbo3::data_type t, uint32_t seed) {
  using namespace turbo3;
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{64} << 20) / row_values);
  float* tmp = nullptr;
  BENCH_CHECK(hipMalloc(&tmp, static_cast<size_t>(std::min(chunk_rows, rows) * row_values) * 4));
  for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
    const int64_t n = std::min(chunk_rows, rows - r0);
    float* dst = t == data_type::f32 ? static_cast<float*>(dev) + r0 * row_values : tmp;
    fill_uniform_kernel<<<1024, 256>>>(dst, static_cast<size_t>(n * row_values), seed + static_cast<uint32_t>(r0));
    BENCH_CHECK(hipGetLastError());
    if (t == data_type::f32) continue;
    const row_source src{tmp, data_type::f32, row_values, n, static_cast<size_t>(row_values) * 4};
    const cache_view view{static_cast<char*>(dev) + r0 * row_bytes(t, row_values), t, row_values, n,
                          row_bytes(t, row_values)};
    if (write_rows<int32_t>(src, nullptr, view, nullptr) != status::ok) {
      std::fprintf(stderr, "write_rows failed\n");
      std::exit(1);
    }
  }
  BENCH_CHECK(hipDeviceSynchronize());
  BENCH_CHECK(hipFree(tmp));
}

// ---- one prepared case: rotated copies, one graph, events ---------------------------------------
// Google Benchmark calls a benchmark function several times (warm-up, then growing iteration
// counts); the case is prepared on the first call and kept until another case needs the memory.
struct prepared_case {
  std::string key;
  std::vector<void*> device;  // every allocation, freed in the destructor
  hipStream_t stream = nullptr;
  hipGraphExec_t exec = nullptr;
  hipEvent_t e0 = nullptr, e1 = nullptr;
  int calls = 0;              // calls per graph replay (= rotated copies)
  double working_set = 0;     // bytes read and written by one replay
  size_t workspace = 0;       // workspace_bytes of one call
  std::string error;          // non-empty: the case is skipped with this message

  void* alloc(size_t bytes) {
    void* p = nullptr;
    BENCH_CHECK(hipMalloc(&p, bytes));
    device.push_back(p);
    return p;
  }
  // Rotated copy i of a master buffer: copy 0 is the master itself, the others are new allocations
  // holding the same bytes (the copies differ in address, which is what defeats the L2).
  void* copy_of(void* master, size_t bytes, int i) {
    if (i == 0) return master;
    void* p = alloc(bytes);
    BENCH_CHECK(hipMemcpy(p, master, bytes, hipMemcpyDeviceToDevice));
    return p;
  }
  ~prepared_case() {
    if (stream) (void)hipStreamSynchronize(stream);
    if (exec) (void)hipGraphExecDestroy(exec);
    if (e0) (void)hipEventDestroy(e0);
    if (e1) (void)hipEventDestroy(e1);
    if (stream) (void)hipStreamDestroy(stream);
    for (void* p : device) (void)hipFree(p);
  }
};
std::unique_ptr<prepared_case> g_case;

// Returns the kept case when the key matches; otherwise frees it and returns nullptr.
prepared_case* kept_case(const std::string& key) {
  if (g_case && g_case->key == key) return g_case.get();
  g_case.reset();
  return nullptr;
}

// Copies needed so that copies * set_bytes >= 4x the L2.
int rotation_copies(double set_bytes) {
  return static_cast<int>(std::max(1.0, std::ceil(4.0 * static_cast<double>(g_device.l2_bytes) / set_bytes)));
}

// Eager run of every copy (poisoned outputs, NaN/Inf check on the first and last), then one graph
// with a call per copy. Sets c.error instead of timing when anything but ok comes back.
void build_case(prepared_case& c, const std::vector<turbo3::attention_params>& sets,
                const turbo3::launch_options& opt) {
  using namespace turbo3;
  c.calls = static_cast<int>(sets.size());
  BENCH_CHECK(hipStreamCreateWithFlags(&c.stream, hipStreamNonBlocking));
  BENCH_CHECK(hipEventCreate(&c.e0));
  BENCH_CHECK(hipEventCreate(&c.e1));
  // Slack over workspace_bytes() for the alignment of several allocations in one call.
  const size_t ws = workspace_bytes(sets[0], opt);
  c.workspace = ws;
  const size_t arena_bytes = arena_allocator::footprint(ws) + (size_t{64} << 10);
  arena_allocator arena(c.alloc(arena_bytes), arena_bytes);

  const auto out_elems = [](const attention_params& p) {
    return static_cast<size_t>(p.out.ne[0] * p.out.ne[1] * p.out.ne[2] * p.out.ne[3]);
  };
  for (const attention_params& p : sets)
    BENCH_CHECK(hipMemset(p.out.data, 0xff, out_elems(p) * 4));  // f32 NaN
  BENCH_CHECK(hipDeviceSynchronize());
  for (const attention_params& p : sets) {
    arena.reset();
    const status st = flash_attention(p, arena, c.stream, opt);
    if (st != status::ok) {
      c.error = std::string("flash_attention returned ") + to_string(st) +
                (st == status::unsupported ? " (this kernel does not cover this case in this build)" : "");
      return;
    }
  }
  BENCH_CHECK(hipStreamSynchronize(c.stream));
  for (const attention_params* p : {&sets.front(), &sets.back()}) {
    std::vector<float> out(out_elems(*p));
    BENCH_CHECK(hipMemcpy(out.data(), p->out.data, out.size() * 4, hipMemcpyDeviceToHost));
    const size_t bad = static_cast<size_t>(std::count_if(out.begin(), out.end(), [](float x) { return !std::isfinite(x); }));
    if (bad) {
      c.error = std::to_string(bad) + " of " + std::to_string(out.size()) +
                " outputs are NaN/Inf (unwritten or wrong)";
      return;
    }
  }
  hipGraph_t graph;
  status st = status::ok;
  BENCH_CHECK(hipStreamBeginCapture(c.stream, hipStreamCaptureModeGlobal));
  for (const attention_params& p : sets) {
    arena.reset();
    const status s = flash_attention(p, arena, c.stream, opt);
    if (s != status::ok && st == status::ok) st = s;
  }
  BENCH_CHECK(hipStreamEndCapture(c.stream, &graph));
  if (st != status::ok) {
    BENCH_CHECK(hipGraphDestroy(graph));
    c.error = std::string("flash_attention under capture returned ") + to_string(st);
    return;
  }
  BENCH_CHECK(hipGraphInstantiate(&c.exec, graph, nullptr, nullptr, 0));
  BENCH_CHECK(hipGraphDestroy(graph));
}

// The timing loop shared by every family. Returns false when the case was skipped.
bool time_case(benchmark::State& state, prepared_case& c) {
  if (!c.error.empty()) {
    state.SkipWithError(c.error.c_str());
    return false;
  }
  for (int w = 0; w < 2; ++w) BENCH_CHECK(hipGraphLaunch(c.exec, c.stream));
  std::vector<double> samples_us;
  for (auto _ : state) {
    spin_kernel<<<1, 1, 0, c.stream>>>(spin_cycles);
    BENCH_CHECK(hipEventRecord(c.e0, c.stream));
    BENCH_CHECK(hipGraphLaunch(c.exec, c.stream));
    BENCH_CHECK(hipEventRecord(c.e1, c.stream));
    BENCH_CHECK(hipEventSynchronize(c.e1));
    float ms = 0;
    BENCH_CHECK(hipEventElapsedTime(&ms, c.e0, c.e1));
    const double per_call_s = ms * 1e-3 / c.calls;
    state.SetIterationTime(per_call_s);
    samples_us.push_back(per_call_s * 1e6);
  }
  BENCH_CHECK(hipGetLastError());
  if (!samples_us.empty()) {
    std::nth_element(samples_us.begin(), samples_us.begin() + samples_us.size() / 2, samples_us.end());
    state.counters["median_us"] = samples_us[samples_us.size() / 2];
  }
  state.counters["copies"] = c.calls;
  state.counters["working_set_MB"] = c.working_set / 1e6;
  return true;
}

// Head dim 640 (--head-dims) is MLA's cache as ggml engines keep it: K rows of 640 values, V a
// view of each row's first 512 (named d640v512); every other head dim is K's and V's.
int v_head_dim_of(int d) { return d == turbo3::mla_head_dim_k ? turbo3::mla_head_dim_v : d; }
// Bytes of one V row stored apart from K: none in MLA's cache, where V is K's bytes.
size_t v_own_row_bytes(turbo3::data_type v_type, int d) {
  return d == turbo3::mla_head_dim_k ? 0 : turbo3::row_bytes(v_type, d);
}
std::string dim_name(int d) {
  return "d" + std::to_string(d) + (d == turbo3::mla_head_dim_k ? "v" + std::to_string(turbo3::mla_head_dim_v) : "");
}

// Q and out: f32, [D, n_q, n_head, 1] stored token-major ([n_q][n_head][D]) as an engine has them
// (out: V's head dim).
void set_q_out(turbo3::attention_params& p, void* q, void* out, int d, int n_q, int h) {
  using namespace turbo3;
  const int dv = v_head_dim_of(d);
  p.q.data = q; p.q.type = data_type::f32;
  p.q.ne[0] = d; p.q.ne[1] = n_q; p.q.ne[2] = h; p.q.ne[3] = 1;
  p.q.nb[1] = static_cast<size_t>(d) * h * 4; p.q.nb[2] = static_cast<size_t>(d) * 4; p.q.nb[3] = p.q.nb[1] * n_q;
  p.out.data = out; p.out.type = data_type::f32;
  p.out.ne[0] = dv; p.out.ne[1] = n_q; p.out.ne[2] = h; p.out.ne[3] = 1;
  p.out.nb[1] = static_cast<size_t>(dv) * h * 4; p.out.nb[2] = static_cast<size_t>(dv) * 4; p.out.nb[3] = p.out.nb[1] * n_q;
}

// V as MLA's view of K (head dim 640): K's bytes and rows, its first 512 values.
bool set_v_in_k(turbo3::attention_params& p, int d) {
  if (d != turbo3::mla_head_dim_k) return false;
  p.v = p.k;
  p.v.ne[0] = turbo3::mla_head_dim_v;
  return true;
}

// K and V: [D, n_kv, n_head_kv, 1] stored token-major ([n_kv][n_head_kv][row]), or head-major
// with --head-major or `head_major`.
void set_kv(turbo3::tensor_view& t, const void* data, turbo3::data_type kv, int d, int n_kv, int hkv,
            bool head_major = false) {
  const size_t row = turbo3::row_bytes(kv, d);
  t.data = data; t.type = kv;
  t.ne[0] = d; t.ne[1] = n_kv; t.ne[2] = hkv; t.ne[3] = 1;
  if (head_major || g_config.head_major) {  // each head's rows contiguous
    t.nb[1] = row; t.nb[2] = row * n_kv;
  } else {  // token-major, as engines store a cache: the rows of all KV heads of a token adjacent
    t.nb[1] = row * hkv; t.nb[2] = row;
  }
  t.nb[3] = row * hkv * n_kv;
}

// ---- prefill ------------------------------------------------------------------------------------
// The kernels of the prefill family. A kernel_choice::mma, once launch.hpp has it, joins the list
// by itself; any other variant is one more line here.
struct prefill_kernel {
  std::string name;
  turbo3::launch_options options;
};

// has_<name><E>: whether enum E has the enumerator <name>. The options of the launcher are still
// growing; the benchmark lists whatever the headers it is built with offer.
#define BENCH_HAS_ENUMERATOR(name)                                                  \
  template <class E, class = void>                                                  \
  struct has_##name : std::false_type {};                                           \
  template <class E>                                                                \
  struct has_##name<E, std::void_t<decltype(E::name)>> : std::true_type {};
BENCH_HAS_ENUMERATOR(mma)
#undef BENCH_HAS_ENUMERATOR

template <class E = turbo3::kernel_choice>
std::vector<prefill_kernel> prefill_kernels() {
  const auto with = [](E choice) {
    turbo3::launch_options o;
    o.kernel = choice;
    return o;
  };
  turbo3::launch_options scalar_vec = with(E::vec);
  scalar_vec.vec = turbo3::vec_variant::scalar;
  std::vector<prefill_kernel> k = {
      {"vec", with(E::vec)},                  // the decode kernels forced for prefill, as the launcher picks them
      {"vec-scalar", scalar_vec},             // the FMA decode kernel forced for prefill (the forks' stock path)
      {"materialize", with(E::materialize)},  // dequantize K/V to f16 in workspace, then the f16 kernel
      {"tile", with(E::tile)},                // inline dequant in the shared-memory tile load
  };
  if constexpr (has_mma<E>::value) {
    k.push_back({"mma", with(E::mma)});  // the launcher's pick (warpgroup multiplies where they apply)
    turbo3::launch_options fragment = with(E::mma);
    fragment.mma = turbo3::mma_variant::fragment;
    k.push_back({"mma-fragment", fragment});  // 16x16x16 fragment multiplies forced
    turbo3::launch_options two_warpgroups = with(E::mma);
    two_warpgroups.mma = turbo3::mma_variant::warpgroup;
    k.push_back({"mma-wg", two_warpgroups});  // warpgroup multiplies, two warpgroups filling and multiplying
    turbo3::launch_options specialized = with(E::mma);
    specialized.mma = turbo3::mma_variant::warp_specialized;
    k.push_back({"mma-ws", specialized});  // warpgroup multiplies with a producer warpgroup forced
  }
  return k;
}

// The rotated copies of one case: n_q rows of Q over n_kv keys per head, causal by the flag or
// (mask) by ggml's causal mask [n_kv, n_q]; K and V filled once and copied per set.
std::vector<turbo3::attention_params> attention_sets(prepared_case& c, turbo3::data_type k_type,
                                                     turbo3::data_type v_type, int d, int n_q, int n_kv, bool mask) {
  using namespace turbo3;
  const int H = g_config.n_head, HKV = g_config.n_head_kv;
  const size_t qo_bytes = static_cast<size_t>(d) * n_q * H * 4;
  const size_t k_bytes = row_bytes(k_type, d) * static_cast<size_t>(n_kv) * HKV;
  const size_t v_bytes = v_own_row_bytes(v_type, d) * static_cast<size_t>(n_kv) * HKV;
  const size_t mask_bytes = mask ? static_cast<size_t>(n_kv) * n_q * 2 : 0;
  const double set_bytes = 2.0 * qo_bytes + static_cast<double>(k_bytes + v_bytes) + mask_bytes;
  const int copies = rotation_copies(set_bytes);
  c.working_set = set_bytes * copies;
  void* k_master = c.alloc(k_bytes);
  void* v_master = v_bytes > 0 ? c.alloc(v_bytes) : nullptr;
  fill_random(k_master, static_cast<int64_t>(n_kv) * HKV, d, k_type, 1u);
  if (v_master) fill_random(v_master, static_cast<int64_t>(n_kv) * HKV, d, v_type, 2u);
  void* m_master = nullptr;
  if (mask) {
    m_master = c.alloc(mask_bytes);
    fill_causal_mask_kernel<<<1024, 256>>>(static_cast<uint16_t*>(m_master), n_kv, n_q);
    BENCH_CHECK(hipGetLastError());
  }
  std::vector<attention_params> sets(static_cast<size_t>(copies));
  for (int i = 0; i < copies; ++i) {
    attention_params& p = sets[static_cast<size_t>(i)];
    void* q = c.alloc(qo_bytes);
    void* out = c.alloc(qo_bytes);
    fill_random(q, static_cast<int64_t>(n_q) * H, d, data_type::f32, 100u + static_cast<uint32_t>(i));
    set_q_out(p, q, out, d, n_q, H);
    set_kv(p.k, c.copy_of(k_master, k_bytes, i), k_type, d, n_kv, HKV);
    if (!set_v_in_k(p, d)) set_kv(p.v, c.copy_of(v_master, v_bytes, i), v_type, d, n_kv, HKV);
    if (mask) {
      p.mask.data = c.copy_of(m_master, mask_bytes, i); p.mask.type = data_type::f16;
      p.mask.ne[0] = n_kv; p.mask.ne[1] = n_q; p.mask.ne[2] = 1; p.mask.ne[3] = 1;
      p.mask.nb[1] = static_cast<size_t>(n_kv) * 2; p.mask.nb[2] = p.mask.nb[1] * n_q; p.mask.nb[3] = p.mask.nb[2];
    } else {
      p.causal = true;
    }
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    p.rotate_q = g_config.library_rotates_q;
    p.unrotate_out = g_config.library_unrotates_out;
  }
  BENCH_CHECK(hipDeviceSynchronize());
  return sets;
}

void prefill_benchmark(benchmark::State& state, const std::string& key, const prefill_kernel& kernel,
                       turbo3::data_type k_type, turbo3::data_type v_type, int d, int len, bool mask) {
  using namespace turbo3;
  const int H = g_config.n_head, HKV = g_config.n_head_kv;
  prepared_case* c = kept_case(key);
  if (!c) {
    g_case = std::make_unique<prepared_case>();
    c = g_case.get();
    c->key = key;
    const std::vector<attention_params> sets = attention_sets(*c, k_type, v_type, d, len, len, mask);
    build_case(*c, sets, kernel.options);
  }
  if (!time_case(state, *c)) return;
  const double pairs = 0.5 * static_cast<double>(len) * (len + 1);  // visible query-key pairs
  const double flops = 4.0 * d * H * pairs;
  state.counters["tokens_per_s"] = benchmark::Counter(len, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOPs"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flop_per_call"] = flops;
  state.counters["head_dim"] = d;
  state.counters["n_head"] = H;
  state.counters["n_head_kv"] = HKV;
  state.counters["L"] = len;
}

// ---- decode -------------------------------------------------------------------------------------
// The decode kernels: `vec` is what the launcher picks by default; the others force one variant
// (each falls back to the scalar kernel where it does not apply, e.g. vec-mma at 16 rows).
struct decode_kernel {
  std::string name;
  turbo3::launch_options options;
  bool own_counters = false;  // caller-owned counters (launch_options::counters), zeroed once
  bool head_major = false;    // K/V head-major (PyTorch-style), not an engine's token-major cache
};

std::vector<decode_kernel> decode_kernels() {
  const auto with = [](turbo3::vec_variant v) {
    turbo3::launch_options o;
    o.vec = v;
    return o;
  };
  return {{"vec", turbo3::launch_options{}},
          {"vec-counters", turbo3::launch_options{}, true},  // the default kernel, no zeroing kernel per call
          {"vec-head-major", turbo3::launch_options{}, false, true},  // the default kernel, head-major K/V
          {"vec-scalar", with(turbo3::vec_variant::scalar)},
          {"vec-mma", with(turbo3::vec_variant::matrix)}};
}

void decode_benchmark(benchmark::State& state, const std::string& key, const decode_kernel& kernel,
                      turbo3::data_type k_type, turbo3::data_type v_type, int d, int depth) {
  using namespace turbo3;
  const int H = g_config.n_head, HKV = g_config.n_head_kv;
  const size_t k_bytes = row_bytes(k_type, d) * static_cast<size_t>(depth) * HKV;
  const size_t v_bytes = v_own_row_bytes(v_type, d) * static_cast<size_t>(depth) * HKV;
  const double set_bytes = static_cast<double>(k_bytes + v_bytes);
  prepared_case* c = kept_case(key);
  if (!c) {
    g_case = std::make_unique<prepared_case>();
    c = g_case.get();
    c->key = key;
    const int copies = rotation_copies(set_bytes);
    c->working_set = set_bytes * copies;
    void* k_master = c->alloc(k_bytes);
    void* v_master = v_bytes > 0 ? c->alloc(v_bytes) : nullptr;
    fill_random(k_master, static_cast<int64_t>(depth) * HKV, d, k_type, 1u);
    if (v_master) fill_random(v_master, static_cast<int64_t>(depth) * HKV, d, v_type, 2u);
    std::vector<attention_params> sets(static_cast<size_t>(copies));
    for (int i = 0; i < copies; ++i) {
      attention_params& p = sets[static_cast<size_t>(i)];
      void* q = c->alloc(static_cast<size_t>(d) * H * 4);
      void* out = c->alloc(static_cast<size_t>(v_head_dim_of(d)) * H * 4);
      fill_random(q, H, d, data_type::f32, 3u + static_cast<uint32_t>(i));
      set_q_out(p, q, out, d, 1, H);
      set_kv(p.k, c->copy_of(k_master, k_bytes, i), k_type, d, depth, HKV, kernel.head_major);
      if (!set_v_in_k(p, d)) set_kv(p.v, c->copy_of(v_master, v_bytes, i), v_type, d, depth, HKV, kernel.head_major);
      p.scale = 1.0f / std::sqrt(static_cast<float>(d));
      p.rotate_q = g_config.library_rotates_q;
      p.unrotate_out = g_config.library_unrotates_out;
    }
    BENCH_CHECK(hipDeviceSynchronize());
    turbo3::launch_options options = kernel.options;
    options.kv_splits = g_config.kv_splits;
    if (kernel.own_counters) {
      options.counters_bytes = counter_bytes(sets[0], options);
      if (options.counters_bytes > 0) {
        options.counters = c->alloc(options.counters_bytes);  // 256-aligned
        BENCH_CHECK(hipMemset(options.counters, 0, options.counters_bytes));
        BENCH_CHECK(hipDeviceSynchronize());
      }
    }
    build_case(*c, sets, options);
  }
  if (!time_case(state, *c)) return;
  state.counters["tokens_per_s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["kv_GBps"] = benchmark::Counter(set_bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["kv_MB"] = set_bytes / 1e6;
  state.counters["copy_GBps"] = g_device.copy_gbps;
  state.counters["head_dim"] = d;
  state.counters["n_head"] = H;
  state.counters["n_head_kv"] = HKV;
  state.counters["depth"] = depth;
}

// ---- verify and ubatch: new query rows over a deep cache -------------------------------------------
struct chunk_kernel {
  std::string name;
  turbo3::launch_options options;
};

std::vector<chunk_kernel> chunk_kernels(bool with_vec) {
  turbo3::launch_options no_split;
  no_split.kv_splits = 1;
  turbo3::launch_options vec;
  vec.kernel = turbo3::kernel_choice::vec;
  std::vector<chunk_kernel> k = {{"auto", turbo3::launch_options{}}, {"mma-nosplit", no_split}};
  if (with_vec) k.push_back({"vec", vec});
  return k;
}

// n_q new rows over depth cached keys and themselves (n_kv = depth + n_q): causal by the flag, or
// (mask) by ggml's causal mask [n_kv, n_q].
void chunk_benchmark(benchmark::State& state, const std::string& key, const turbo3::launch_options& options,
                     turbo3::data_type k_type, turbo3::data_type v_type, int d, int n_q, int depth,
                     bool mask) {
  using namespace turbo3;
  const int H = g_config.n_head, HKV = g_config.n_head_kv;
  const int n_kv = depth + n_q;
  prepared_case* c = kept_case(key);
  if (!c) {
    g_case = std::make_unique<prepared_case>();
    c = g_case.get();
    c->key = key;
    const std::vector<attention_params> sets = attention_sets(*c, k_type, v_type, d, n_q, n_kv, mask);
    turbo3::launch_options o = options;
    if (o.kv_splits == 0) o.kv_splits = g_config.kv_splits;  // --kv-splits where the kernel leaves it open
    build_case(*c, sets, o);
  }
  if (!time_case(state, *c)) return;
  const double pairs = static_cast<double>(n_q) * depth + 0.5 * static_cast<double>(n_q) * (n_q + 1);
  state.counters["tokens_per_s"] = benchmark::Counter(n_q, benchmark::Counter::kIsIterationInvariantRate);
  const double flops = 2.0 * (d + v_head_dim_of(d)) * H * pairs;  // Q K^T over D_k, P V over D_v
  state.counters["TFLOPs"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["kv_GBps"] =
      benchmark::Counter(static_cast<double>(row_bytes(k_type, d) + v_own_row_bytes(v_type, d)) * n_kv * HKV / 1e9,
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["head_dim"] = d;
  state.counters["n_q"] = n_q;
  state.counters["depth"] = depth;
  state.counters["workspace_MB"] = c->workspace / 1e6;
  if (options.kernel != kernel_choice::vec)  // the MMA route: its key splits from its partial rows' bytes
    state.counters["kv_splits"] =
        c->workspace == 0 ? 1.0 : static_cast<double>((c->workspace - 15) / (static_cast<size_t>(n_q) * H * (d + 8) * 4));
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  while (*s) {
    v.push_back(std::atoi(s));
    while (*s && *s != ',') ++s;
    if (*s == ',') ++s;
  }
  return v;
}

// A cache type by the name to_string gives it; false for an unknown name or a non-storage type.
bool parse_type(const std::string& s, turbo3::data_type& t) {
  using turbo3::data_type;
  for (data_type c : {data_type::f16, data_type::turbo3, data_type::turbo4, data_type::turbo2, data_type::q8_0})
    if (s == turbo3::to_string(c)) {
      t = c;
      return true;
    }
  return false;
}

// --kv entries: `T` (K and V of type T) or `K-V`. Prints the offending entry and returns false.
bool parse_kv_list(const char* s, std::vector<kv_pair>& out) {
  out.clear();
  const std::string list = s;
  for (size_t b = 0; b <= list.size();) {
    const size_t e = std::min(list.find(',', b), list.size());
    const std::string entry = list.substr(b, e - b);
    const size_t dash = entry.find('-');
    kv_pair kv{};
    const bool ok = dash == std::string::npos
                        ? parse_type(entry, kv.k) && parse_type(entry, kv.v)
                        : parse_type(entry.substr(0, dash), kv.k) && parse_type(entry.substr(dash + 1), kv.v);
    if (!ok) {
      std::fprintf(stderr, "--kv: '%s' is neither T nor K-V of the types f16, turbo3, turbo4, turbo2, q8_0\n",
                   entry.c_str());
      return false;
    }
    out.push_back(kv);
    b = e + 1;
  }
  return true;
}

// A pair's name in benchmark names: the type alone when K and V share it (the names recorded before
// pairs stay valid), K-V otherwise.
std::string kv_name(const kv_pair& kv) {
  return kv.k == kv.v ? std::string(turbo3::to_string(kv.k))
                      : std::string(turbo3::to_string(kv.k)) + "-" + turbo3::to_string(kv.v);
}

void register_benchmarks() {
  const std::vector<kv_pair>& kv_types = g_config.kv_types;
  const auto setup = [](benchmark::internal::Benchmark* b) {
    b->UseManualTime()->Unit(benchmark::kMicrosecond)->MinWarmUpTime(0.05)->MinTime(0.1);
  };
  static const std::vector<prefill_kernel> kernels = prefill_kernels();
  for (bool mask : {false, true}) {
    if (mask && !g_config.prefill_mask) continue;
    for (const prefill_kernel& kernel : kernels)
      for (const kv_pair& kv : kv_types)
        for (int d : g_config.prefill_head_dims)
          for (int len : g_config.prefill_sizes) {
            const std::string name = "prefill/" + kernel.name + "/" + kv_name(kv) +
                                     (d == 256 ? "" : "/d" + std::to_string(d)) + "/pp" + std::to_string(len) +
                                     (mask ? "/mask" : "");
            const prefill_kernel* k = &kernel;
            setup(benchmark::RegisterBenchmark(name.c_str(), [name, k, kv, d, len, mask](benchmark::State& s) {
              prefill_benchmark(s, name, *k, kv.k, kv.v, d, len, mask);
            }));
          }
  }
  static const std::vector<chunk_kernel> verify_kernels = chunk_kernels(true);
  for (bool mask : {false, true}) {
    if (mask && !g_config.prefill_mask) continue;
    for (int d : g_config.head_dims)
      for (int depth : g_config.verify_depths)
        for (int rows : g_config.verify_rows)
          for (const chunk_kernel& kernel : verify_kernels)
            for (const kv_pair& kv : kv_types) {
              const std::string name = "verify/" + kernel.name + "/" + kv_name(kv) + "/" + dim_name(d) + "/nq" +
                                       std::to_string(rows) + "/depth" + std::to_string(depth) + (mask ? "/mask" : "");
              const turbo3::launch_options* o = &kernel.options;
              const auto run = [name, o, kv, d, rows, depth, mask](benchmark::State& s) {
                chunk_benchmark(s, name, *o, kv.k, kv.v, d, rows, depth, mask);
              };
              setup(benchmark::RegisterBenchmark(name.c_str(), run));
            }
  }
  static const std::vector<chunk_kernel> ubatch_kernels = chunk_kernels(false);
  for (int d : g_config.head_dims)
    for (int depth : g_config.ubatch_depths)
      for (const chunk_kernel& kernel : ubatch_kernels)
        for (const kv_pair& kv : kv_types) {
          const int u = g_config.ubatch;
          const std::string name = "ubatch/" + kernel.name + "/" + kv_name(kv) + "/" + dim_name(d) +
                                   "/q" + std::to_string(u) + "/depth" + std::to_string(depth);
          const turbo3::launch_options* o = &kernel.options;
          setup(benchmark::RegisterBenchmark(name.c_str(), [name, o, kv, d, u, depth](benchmark::State& s) {
            chunk_benchmark(s, name, *o, kv.k, kv.v, d, u, depth, true);
          }));
        }
  static const std::vector<decode_kernel> vec_kernels = decode_kernels();
  for (int d : g_config.head_dims)
    for (int depth : g_config.depths)
      for (const decode_kernel& kernel : vec_kernels)
        for (const kv_pair& kv : kv_types) {
          const std::string name = "decode/" + kernel.name + "/" + kv_name(kv) + "/" + dim_name(d) +
                                   "/depth" + std::to_string(depth);
          const decode_kernel* k = &kernel;
          setup(benchmark::RegisterBenchmark(name.c_str(), [name, k, kv, d, depth](benchmark::State& s) {
            decode_benchmark(s, name, *k, kv.k, kv.v, d, depth);
          }));
        }
}

const char* const usage =
    "turbo3_bench: prefill and decode attention over f16 and quantized K/V (Google Benchmark).\n"
    "Our flags (then any --benchmark_* flag, e.g. --benchmark_filter=prefill/tile):\n"
    "  --heads=H            query heads (default 16)\n"
    "  --kv-heads=H         KV heads (default 8)\n"
    "  --kv=a,b,...         K/V types: T (K and V of type T) or K-V, e.g. q8_0-turbo3; types f16, turbo3,\n"
    "                       turbo4, turbo2, q8_0 (default f16,turbo3)\n"
    "  --pp=a,b,...         prefill sizes n_q = n_kv (default 512,2048,4096)\n"
    "  --prefill-head-dims=a,b  prefill head dims (default 256; 64, 128, 256, 512: TILE has all four,\n"
    "                       MMA 128 and 256, materialize up to 256; a kernel without one is skipped)\n"
    "  --mask               also run prefill and verify with a full additive f16 mask (suffix /mask)\n"
    "  --depths=a,b,...     decode context depths (default 4096,32768,131072)\n"
    "  --head-dims=a,b      decode and verify head dims (default 128,256; 640: MLA's cache, K rows of 640\n"
    "                       values and V a view of their first 512, named d640v512)\n"
    "  --kv-splits=N        split-KV count of decode, and of verify and ubatch where a kernel leaves it open\n"
    "                       (default: the launcher's choice)\n"
    "  --verify-rows=a,b    verify query rows (default 2,4,8,16)\n"
    "  --verify-depths=a,b  verify depths (default 32768,131072)\n"
    "  --ubatch=U           ubatch queries (default 512)\n"
    "  --ubatch-depths=a,b  ubatch depths (default 0,8192,32768)\n"
    "  --head-major         K/V rows of each head contiguous (default: token-major, as engines store them)\n"
    "  --no-rotate          the caller rotates Q and the output itself (default: fused into the kernels)\n"
    "  --no-rotate-q        the caller rotates Q, the library un-rotates the output\n"
    "  --no-unrotate-out    the library rotates Q, the caller un-rotates the output\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* flag) {
      const size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = value("--heads=")) g_config.n_head = std::atoi(v);
    else if (const char* v = value("--kv-heads=")) g_config.n_head_kv = std::atoi(v);
    else if (const char* v = value("--kv=")) {
      if (!parse_kv_list(v, g_config.kv_types)) return 2;
    } else if (const char* v = value("--depths=")) g_config.depths = parse_list(v);
    else if (const char* v = value("--head-dims=")) g_config.head_dims = parse_list(v);
    else if (const char* v = value("--pp=")) g_config.prefill_sizes = parse_list(v);
    else if (const char* v = value("--prefill-head-dims=")) g_config.prefill_head_dims = parse_list(v);
    else if (a == "--mask") g_config.prefill_mask = true;
    else if (a == "--head-major") g_config.head_major = true;
    else if (a == "--no-rotate") g_config.library_rotates_q = g_config.library_unrotates_out = false;
    else if (a == "--no-rotate-q") g_config.library_rotates_q = false;
    else if (a == "--no-unrotate-out") g_config.library_unrotates_out = false;
    else if (const char* v = value("--kv-splits=")) g_config.kv_splits = std::atoi(v);
    else if (const char* v = value("--verify-rows=")) g_config.verify_rows = parse_list(v);
    else if (const char* v = value("--verify-depths=")) g_config.verify_depths = parse_list(v);
    else if (const char* v = value("--ubatch-depths=")) g_config.ubatch_depths = parse_list(v);
    else if (const char* v = value("--ubatch=")) g_config.ubatch = std::atoi(v);
    else if (a == "--help" || a == "-h") {
      std::printf("%s\n", usage);
      rest.push_back(argv[i]);  // Google Benchmark prints its own flags
    } else rest.push_back(argv[i]);
  }
  if (g_config.n_head < 1 || g_config.n_head_kv < 1 || g_config.n_head % g_config.n_head_kv != 0) {
    std::fprintf(stderr, "--heads must be a positive multiple of --kv-heads\n");
    return 2;
  }
  int n = static_cast<int>(rest.size());
  register_benchmarks();
  int devices = 0;
  if (hipGetDeviceCount(&devices) != hipSuccess || devices == 0) {
    // Listing the cases needs no GPU; running them does.
    const bool list = std::any_of(rest.begin(), rest.end(),
                                  [](const char* a) { return std::strncmp(a, "--benchmark_list_tests", 22) == 0; });
    if (list) {
      benchmark::Initialize(&n, rest.data());
      benchmark::RunSpecifiedBenchmarks();
      benchmark::Shutdown();
    } else {
      std::printf("no GPU found: nothing to benchmark\n");
    }
    return 0;
  }
  hipDeviceProp_t prop;
  BENCH_CHECK(hipGetDeviceProperties(&prop, 0));
  g_device.name = prop.name;
  g_device.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  g_device.copy_gbps = measure_copy_bandwidth();
  benchmark::AddCustomContext("gpu", g_device.name);
  benchmark::AddCustomContext("l2_bytes", std::to_string(g_device.l2_bytes));
  benchmark::AddCustomContext("copy_GBps", std::to_string(g_device.copy_gbps));
  benchmark::AddCustomContext("n_head", std::to_string(g_config.n_head));
  benchmark::AddCustomContext("n_head_kv", std::to_string(g_config.n_head_kv));
  benchmark::AddCustomContext("library_rotates",
                              std::string(g_config.library_rotates_q ? "Q" : "no Q") +
                                  (g_config.library_unrotates_out ? ", output" : ", no output"));
  (void)turbo3::init(0);
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  g_case.reset();
  benchmark::Shutdown();
  return 0;
}
