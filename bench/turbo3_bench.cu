// turbo3 benchmark: Google Benchmark with GPU-event manual timing.
//
// decode/vec/<kv>/d<D>/depth<N>: one query row, n_head over n_head_kv heads, timed as CUDA/HIP
// graph replays. Enough copies of the K/V cache are rotated that every timed working set is at
// least 4x the device's L2, so the numbers are the memory's, not the cache's. Each case is run
// once and checked for NaN/Inf before timing. Counters: tokens/s, effective GB/s of the K/V bytes
// actually stored, and its fraction of the device-to-device copy bandwidth this binary measures
// at start (bytes read + written).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
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

struct bench_config {
  int n_head = 16, n_head_kv = 8;
  std::vector<int> depths = {4096, 32768, 131072};
  std::vector<int> head_dims = {128, 256};
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

// One device copy of a decode problem's inputs (Q, K, V, out).
struct decode_buffers {
  void *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  turbo3::attention_params params;
};

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

// Fills `rows` rows of `row_values` values of type t at dev (row stride = row size) with random data,
// quantized on the device by write_rows for turbo3.
void fill_random(void* dev, int64_t rows, int64_t row_values, turbo3::data_type t, uint32_t seed) {
  using namespace turbo3;
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{64} << 20) / row_values);
  float* tmp = nullptr;
  BENCH_CHECK(hipMalloc(&tmp, static_cast<size_t>(chunk_rows * row_values) * 4));
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

void decode_benchmark(benchmark::State& state, turbo3::data_type kv, int head_dim, int depth, bool matrix) {
  using namespace turbo3;
  const int H = g_config.n_head, HKV = g_config.n_head_kv;
  const size_t kv_row = row_bytes(kv, head_dim);
  const size_t kv_bytes = kv_row * static_cast<size_t>(depth) * HKV;  // one of K or V
  const size_t set_bytes = 2 * kv_bytes;
  const int copies = static_cast<int>(std::max<size_t>(1, (4 * g_device.l2_bytes + set_bytes - 1) / set_bytes));

  std::vector<decode_buffers> sets(static_cast<size_t>(copies));
  // One random cache is generated and copied: the copies differ in address, which is what defeats
  // the L2.
  void* k_master = nullptr;
  void* v_master = nullptr;
  BENCH_CHECK(hipMalloc(&k_master, kv_bytes));
  BENCH_CHECK(hipMalloc(&v_master, kv_bytes));
  fill_random(k_master, static_cast<int64_t>(depth) * HKV, head_dim, kv, 1u);
  fill_random(v_master, static_cast<int64_t>(depth) * HKV, head_dim, kv, 2u);
  for (auto& s : sets) {
    BENCH_CHECK(hipMalloc(&s.q, static_cast<size_t>(head_dim) * H * 4));
    BENCH_CHECK(hipMalloc(&s.out, static_cast<size_t>(head_dim) * H * 4));
    BENCH_CHECK(hipMalloc(&s.k, kv_bytes));
    BENCH_CHECK(hipMalloc(&s.v, kv_bytes));
    fill_random(s.q, H, head_dim, data_type::f32, static_cast<uint32_t>(&s - sets.data()) + 3u);
    BENCH_CHECK(hipMemcpy(s.k, k_master, kv_bytes, hipMemcpyDeviceToDevice));
    BENCH_CHECK(hipMemcpy(s.v, v_master, kv_bytes, hipMemcpyDeviceToDevice));
    attention_params& p = s.params;
    p.q.data = s.q; p.q.type = data_type::f32;
    p.q.ne[0] = head_dim; p.q.ne[1] = 1; p.q.ne[2] = H; p.q.ne[3] = 1;
    p.q.nb[1] = head_dim * 4; p.q.nb[2] = p.q.nb[1]; p.q.nb[3] = p.q.nb[2] * H;
    for (tensor_view* t : {&p.k, &p.v}) {
      t->data = t == &p.k ? s.k : s.v;
      t->type = kv;
      t->ne[0] = head_dim; t->ne[1] = depth; t->ne[2] = HKV; t->ne[3] = 1;
      t->nb[1] = kv_row * HKV; t->nb[2] = kv_row; t->nb[3] = kv_bytes;  // token-major, as engines store it
    }
    p.out.data = s.out; p.out.type = data_type::f32;
    p.out.ne[0] = head_dim; p.out.ne[1] = 1; p.out.ne[2] = H; p.out.ne[3] = 1;
    p.out.nb[1] = head_dim * 4; p.out.nb[2] = p.out.nb[1]; p.out.nb[3] = p.out.nb[2] * H;
    p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  BENCH_CHECK(hipFree(k_master));
  BENCH_CHECK(hipFree(v_master));

  hipStream_t stream;
  BENCH_CHECK(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  launch_options opt;
  opt.matrix_cores = matrix;
  const size_t ws = workspace_bytes(sets[0].params, opt);
  void* ws_mem = nullptr;
  BENCH_CHECK(hipMalloc(&ws_mem, arena_allocator::footprint(ws) + 256));
  arena_allocator arena(ws_mem, arena_allocator::footprint(ws) + 256);

  // Eager run of every set, checked for NaN/Inf.
  for (auto& s : sets) {
    arena.reset();
    if (flash_attention(s.params, arena, stream, opt) != status::ok) {
      state.SkipWithError("flash_attention failed");
      return;
    }
  }
  BENCH_CHECK(hipStreamSynchronize(stream));
  {
    std::vector<float> out(static_cast<size_t>(head_dim) * H);
    BENCH_CHECK(hipMemcpy(out.data(), sets[0].out, out.size() * 4, hipMemcpyDeviceToHost));
    for (float x : out)
      if (!std::isfinite(x)) {
        state.SkipWithError("non-finite output");
        return;
      }
  }
  // One graph per set; replays rotate through them.
  std::vector<hipGraphExec_t> execs;
  for (auto& s : sets) {
    hipGraph_t g;
    hipGraphExec_t e;
    arena.reset();
    BENCH_CHECK(hipStreamBeginCapture(stream, hipStreamCaptureModeGlobal));
    const status st = flash_attention(s.params, arena, stream, opt);
    BENCH_CHECK(hipStreamEndCapture(stream, &g));
    if (st != status::ok) {
      state.SkipWithError("capture failed");
      return;
    }
    BENCH_CHECK(hipGraphInstantiate(&e, g, nullptr, nullptr, 0));
    BENCH_CHECK(hipGraphDestroy(g));
    execs.push_back(e);
  }
  hipEvent_t e0, e1;
  BENCH_CHECK(hipEventCreate(&e0));
  BENCH_CHECK(hipEventCreate(&e1));
  for (int w = 0; w < 3 * copies; ++w) BENCH_CHECK(hipGraphLaunch(execs[w % copies], stream));
  size_t iter = 0;
  for (auto _ : state) {
    BENCH_CHECK(hipEventRecord(e0, stream));
    BENCH_CHECK(hipGraphLaunch(execs[iter++ % copies], stream));
    BENCH_CHECK(hipEventRecord(e1, stream));
    BENCH_CHECK(hipEventSynchronize(e1));
    float ms = 0;
    BENCH_CHECK(hipEventElapsedTime(&ms, e0, e1));
    state.SetIterationTime(ms * 1e-3);
  }
  const double kv_total = static_cast<double>(set_bytes);
  state.counters["tokens_per_s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["kv_GBps"] = benchmark::Counter(kv_total / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["kv_MB"] = kv_total / 1e6;
  state.counters["copies"] = copies;
  state.counters["copy_GBps"] = g_device.copy_gbps;
  for (auto e : execs) BENCH_CHECK(hipGraphExecDestroy(e));
  BENCH_CHECK(hipEventDestroy(e0));
  BENCH_CHECK(hipEventDestroy(e1));
  BENCH_CHECK(hipStreamDestroy(stream));
  BENCH_CHECK(hipFree(ws_mem));
  for (auto& s : sets) {
    BENCH_CHECK(hipFree(s.q));
    BENCH_CHECK(hipFree(s.k));
    BENCH_CHECK(hipFree(s.v));
    BENCH_CHECK(hipFree(s.out));
  }
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

}  // namespace

int main(int argc, char** argv) {
  // Our flags first (--heads=H, --kv-heads=H, --depths=a,b, --head-dims=a,b), then Google Benchmark's.
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--heads=", 0) == 0) g_config.n_head = std::atoi(a.c_str() + 8);
    else if (a.rfind("--kv-heads=", 0) == 0) g_config.n_head_kv = std::atoi(a.c_str() + 11);
    else if (a.rfind("--depths=", 0) == 0) g_config.depths = parse_list(a.c_str() + 9);
    else if (a.rfind("--head-dims=", 0) == 0) g_config.head_dims = parse_list(a.c_str() + 12);
    else rest.push_back(argv[i]);
  }
  int n = static_cast<int>(rest.size());
  int devices = 0;
  if (hipGetDeviceCount(&devices) != hipSuccess || devices == 0) {
    std::printf("no GPU found: nothing to benchmark\n");
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
  (void)turbo3::init(0);
  for (int d : g_config.head_dims)
    for (int depth : g_config.depths)
      for (bool matrix : {false, true})
      for (turbo3::data_type kv : {turbo3::data_type::f16, turbo3::data_type::turbo3}) {
        // vec: the default decode kernel (FMA); vec-mma: the matrix-instruction variant (opt-in).
        const std::string name = std::string(matrix ? "decode/vec-mma/" : "decode/vec/") + turbo3::to_string(kv) +
                                 "/d" + std::to_string(d) + "/depth" + std::to_string(depth);
        benchmark::RegisterBenchmark(name.c_str(), [kv, d, depth, matrix](benchmark::State& s) {
          decode_benchmark(s, kv, d, depth, matrix);
        })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->MinWarmUpTime(0.05)
            ->MinTime(0.3);
      }
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
