// An engine-style decode loop: every generated token appends its K and V rows to turbo3 caches
// (write_rows) and attends over the cache (flash_attention); both are captured once in a graph and
// replayed per token. The graph's shapes are fixed, as an engine's are: attention runs over the
// cache's whole capacity and an additive mask hides the slots not written yet; the slot id and the
// mask live in device memory and change between replays. At the end the last token's output is
// checked against ref::attention on the same cache bytes.
#include <turbo3/turbo3.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK_HIP(expr)                                                                                  \
  do {                                                                                                   \
    const hipError_t e_ = (expr);                                                                        \
    if (e_ != hipSuccess) {                                                                              \
      std::fprintf(stderr, "%s failed: %s\n", #expr, hipGetErrorString(e_));                             \
      std::exit(1);                                                                                      \
    }                                                                                                    \
  } while (0)

int main() {
  using namespace turbo3;
  constexpr int D = 128, H = 16, HKV = 4, capacity = 1024, steps = 200;
  int devices = 0;
  if (hipGetDeviceCount(&devices) != hipSuccess || devices == 0) {
    std::printf("no GPU found: nothing to run\n");
    return 0;
  }
  const size_t row = row_bytes(data_type::turbo3, D * HKV);  // one token's K (or V) for all KV heads
  void *k_cache, *v_cache, *q, *k_new, *v_new, *mask, *out;
  int32_t* slot;
  CHECK_HIP(hipMalloc(&k_cache, row * capacity));
  CHECK_HIP(hipMalloc(&v_cache, row * capacity));
  CHECK_HIP(hipMalloc(&q, D * H * 4));
  CHECK_HIP(hipMalloc(&k_new, D * HKV * 4));
  CHECK_HIP(hipMalloc(&v_new, D * HKV * 4));
  CHECK_HIP(hipMalloc(&mask, capacity * 2));
  CHECK_HIP(hipMalloc(&out, D * H * 4));
  CHECK_HIP(hipMalloc(reinterpret_cast<void**>(&slot), sizeof(int32_t)));
  CHECK_HIP(hipMemset(k_cache, 0, row * capacity));
  CHECK_HIP(hipMemset(v_cache, 0, row * capacity));

  // The attention call, fixed for the whole generation.
  attention_params p;
  p.q = {q, data_type::f32, {D, 1, H, 1}, {0, D * 4, D * 4, D * H * 4}};
  p.k = {k_cache, data_type::turbo3, {D, capacity, HKV, 1}, {0, row, row / HKV, row * capacity}};
  p.v = {v_cache, data_type::turbo3, {D, capacity, HKV, 1}, {0, row, row / HKV, row * capacity}};
  p.mask = {mask, data_type::f16, {capacity, 1, 1, 1}, {0, capacity * 2, capacity * 2, capacity * 2}};
  p.out = {out, data_type::f32, {D, 1, H, 1}, {0, D * 4, D * 4, D * H * 4}};
  p.scale = 1.0f / std::sqrt(static_cast<float>(D));
  const row_source k_rows{k_new, data_type::f32, D * HKV, 1, D * HKV * 4};
  const row_source v_rows{v_new, data_type::f32, D * HKV, 1, D * HKV * 4};
  const cache_view k_view{k_cache, data_type::turbo3, D * HKV, capacity, row};
  const cache_view v_view{v_cache, data_type::turbo3, D * HKV, capacity, row};

  // Workspace from an arena over memory the engine owns: no allocation at all inside the graph.
  const size_t workspace = workspace_bytes(p);
  void* arena_memory;
  CHECK_HIP(hipMalloc(&arena_memory, arena_allocator::footprint(workspace)));
  arena_allocator arena(arena_memory, arena_allocator::footprint(workspace));
  (void)init(0);

  hipStream_t stream;
  CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  hipGraph_t graph;
  hipGraphExec_t exec;
  CHECK_HIP(hipStreamBeginCapture(stream, hipStreamCaptureModeGlobal));
  status s = write_rows(k_rows, slot, k_view, stream);
  if (s == status::ok) s = write_rows(v_rows, slot, v_view, stream);
  if (s == status::ok) s = flash_attention(p, arena, stream);
  CHECK_HIP(hipStreamEndCapture(stream, &graph));
  if (s != status::ok) {
    std::fprintf(stderr, "capture failed: %s\n", to_string(s));
    return 1;
  }
  CHECK_HIP(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));

  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> qh(D * H), kh(D * HKV), vh(D * HKV);
  std::vector<uint16_t> mask_host(capacity, 0xfc00);  // -inf: nothing written yet
  for (int t = 0; t < steps; ++t) {
    for (auto& x : qh) x = normal(rng);
    for (auto& x : kh) x = normal(rng);
    for (auto& x : vh) x = normal(rng);
    mask_host[t] = 0;  // slot t becomes visible
    CHECK_HIP(hipMemcpyAsync(q, qh.data(), qh.size() * 4, hipMemcpyHostToDevice, stream));
    CHECK_HIP(hipMemcpyAsync(k_new, kh.data(), kh.size() * 4, hipMemcpyHostToDevice, stream));
    CHECK_HIP(hipMemcpyAsync(v_new, vh.data(), vh.size() * 4, hipMemcpyHostToDevice, stream));
    CHECK_HIP(hipMemcpyAsync(mask, mask_host.data(), capacity * 2, hipMemcpyHostToDevice, stream));
    CHECK_HIP(hipMemcpyAsync(slot, &t, sizeof(int32_t), hipMemcpyHostToDevice, stream));
    CHECK_HIP(hipGraphLaunch(exec, stream));
    CHECK_HIP(hipStreamSynchronize(stream));  // the host buffers are rewritten next step
  }

  // The last step against the reference on the cache bytes the device wrote.
  std::vector<uint8_t> k_host(row * capacity), v_host(row * capacity);
  std::vector<float> got(D * H), want(D * H);
  CHECK_HIP(hipMemcpy(k_host.data(), k_cache, k_host.size(), hipMemcpyDeviceToHost));
  CHECK_HIP(hipMemcpy(v_host.data(), v_cache, v_host.size(), hipMemcpyDeviceToHost));
  CHECK_HIP(hipMemcpy(got.data(), out, got.size() * 4, hipMemcpyDeviceToHost));
  attention_params h = p;
  h.q.data = qh.data();
  h.k.data = k_host.data();
  h.v.data = v_host.data();
  h.mask.data = mask_host.data();
  h.out.data = want.data();
  ref::attention(h);
  const double e = ref::nmse(got.data(), want.data(), got.size());
  std::printf("%d decode steps replayed from one graph; last step NMSE against ref::attention: %.3e\n", steps, e);
  CHECK_HIP(hipGraphExecDestroy(exec));
  CHECK_HIP(hipGraphDestroy(graph));
  CHECK_HIP(hipStreamDestroy(stream));
  for (void* ptr : {k_cache, v_cache, q, k_new, v_new, mask, out, arena_memory, static_cast<void*>(slot)})
    CHECK_HIP(hipFree(ptr));
  return e <= 1e-5 ? 0 : 1;
}
