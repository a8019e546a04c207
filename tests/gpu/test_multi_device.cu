// Multi-GPU: every route (decode kernels including the deep-context one with 64.5 KB of shared
// memory, TILE, MMA with the fragment and both warpgroup forms, materialize, write_rows) on device
// 1 after device 0, and in another process the reverse. Per-device state (the raised shared-memory
// limits, occupancy and multiprocessor counts, the device's family) must be set up for each device
// it is used on, not once per process. Hidden from the default run: ctest's gpu_multi_device and
// gpu_multi_device_reverse run one order each with --min-devices 2 (skipped, exit 77, on fewer).
#include <algorithm>

#include "attention_problem.hpp"

using namespace turbo3;
using turbo3_test::attention_case;
using turbo3_test::attention_problem;
using turbo3_test::device_buffer;
using turbo3_test::gqa_case;

namespace {

struct route_case {
  const char* name;
  attention_case c;
  launch_options opt;
};

std::vector<route_case> every_route() {
  std::vector<route_case> routes;
  auto with = [](kernel_choice k, mma_variant m = mma_variant::automatic, vec_variant v = vec_variant::automatic) {
    launch_options o;
    o.kernel = k;
    o.mma = m;
    o.vec = v;
    return o;
  };
  attention_case decode = gqa_case(256, 1, 3000);
  decode.mask = decode.sinks = true;
  routes.push_back({"decode (warp kernel)", decode, {}});
  attention_case deep = gqa_case(256, 1, 65573);  // 6 warps, 64.5 KB of shared memory
  routes.push_back({"deep-context decode", deep, {}});
  attention_case f16_decode = gqa_case(512, 1, 700);
  f16_decode.k_type = f16_decode.v_type = data_type::f16;
  routes.push_back({"decode (scalar kernel, f16, D = 512)", f16_decode, {}});
  routes.push_back({"decode (matrix kernel)", decode, with(kernel_choice::vec, mma_variant::automatic, vec_variant::matrix)});
  attention_case prefill = gqa_case(256, 64, 500);
  prefill.causal = true;
  routes.push_back({"TILE", prefill, with(kernel_choice::tile)});
  routes.push_back({"MMA, fragment", prefill, with(kernel_choice::mma, mma_variant::fragment)});
  routes.push_back({"MMA, warpgroup", prefill, with(kernel_choice::mma, mma_variant::warpgroup)});
  routes.push_back({"MMA, warp-specialized", prefill, with(kernel_choice::mma, mma_variant::warp_specialized)});
  attention_case masked = prefill;
  masked.causal = false;
  masked.mask = true;
  masked.mask_pattern = attention_case::mask_kind::causal;
  routes.push_back({"MMA, warp-specialized, masked", masked, with(kernel_choice::mma, mma_variant::warp_specialized)});
  routes.push_back({"materialize", prefill, with(kernel_choice::materialize)});
  return routes;
}

void run_every_route_on(int device) {
  TURBO3_CHECK_HIP(hipSetDevice(device));
  hipDeviceProp_t prop;
  TURBO3_CHECK_HIP(hipGetDeviceProperties(&prop, device));
  std::printf("device %d: %s\n", device, prop.name);
  std::mt19937_64 rng(turbo3_test::run_seed() ^ (0xd00du + static_cast<unsigned>(device)));
  hipStream_t stream = nullptr;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  stream_pool_allocator pool;
  double worst = 0;
  for (const route_case& r : every_route()) {
    attention_problem prob(r.c, rng);
    prob.poison_output();
    INFO("device " << device << ": " << r.name << ", " << r.c.describe());
    REQUIRE(flash_attention(prob.device_params(), pool, stream, r.opt) == status::ok);
    TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
    const double e = prob.compare_with_reference();
    INFO("NMSE " << e);
    CHECK(e <= turbo3_test::nmse_limit);
    worst = std::max(worst, e);
  }

  // write_rows on this device: the same bytes as ref::quantize_row (the norm's last bit aside).
  constexpr int64_t n_rows = 64, n_cols = 256;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_rows * n_cols));
  for (float& v : x) v = normal(rng);
  const size_t row = row_bytes(data_type::turbo3, n_cols);
  device_buffer d_src(x.size() * 4), d_cache(row * n_rows);
  d_src.upload(x.data(), x.size() * 4);
  const row_source src{d_src.ptr, data_type::f32, n_cols, n_rows, n_cols * 4};
  const cache_view cache{d_cache.ptr, data_type::turbo3, n_cols, n_rows, row};
  REQUIRE(write_rows(src, static_cast<const int32_t*>(nullptr), cache, stream) == status::ok);
  TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
  std::vector<block_turbo3> got(static_cast<size_t>(n_rows * 2)), want(got.size());
  d_cache.download(got.data(), got.size() * sizeof(block_turbo3));
  ref::quantize_row(x.data(), want.data(), n_rows * n_cols);
  int differing = 0;
  for (size_t b = 0; b < want.size(); ++b) {
    if (std::memcmp(&got[b], &want[b], sizeof(block_turbo3)) == 0) continue;
    ++differing;
    CHECK(std::memcmp(got[b].qs, want[b].qs, sizeof(want[b].qs)) == 0);
    CHECK(std::abs(int(got[b].norm) - int(want[b].norm)) == 1);
  }
  std::printf("device %d: every route, worst NMSE %.3e; write_rows: %d of %zu blocks differ in the norm's last bit\n",
              device, worst, differing, want.size());
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
}

int current() {
  int d = -1;
  TURBO3_CHECK_HIP(hipGetDevice(&d));
  return d;
}

}  // namespace

TEST_CASE("multi-device: every route on device 1 after device 0", "[.][multi-device][multi-device-0-1]") {
  run_every_route_on(0);
  run_every_route_on(1);
}

// init(device) sets up `device` and gives the caller back its current device.
TEST_CASE("multi-device: every route on device 0 after device 1; init(device) honours its argument",
          "[.][multi-device][multi-device-1-0]") {
  TURBO3_CHECK_HIP(hipSetDevice(1));
  CHECK(init(0) == status::ok);
  CHECK(current() == 1);
  run_every_route_on(1);
  run_every_route_on(0);
  CHECK(init(1) == status::ok);
  CHECK(current() == 0);
  int devices = 0;
  TURBO3_CHECK_HIP(hipGetDeviceCount(&devices));
  CHECK(init(devices) == status::runtime_error);  // no such device
  CHECK(current() == 0);
  CHECK(hipPeekAtLastError() == hipSuccess);
}
