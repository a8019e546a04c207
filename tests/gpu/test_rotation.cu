// The work-group rotations in shared memory (attention/rotate_smem.hpp: two register passes, and one
// whole group per thread) and rotate_groups (rotate.hpp) against the host rotation of
// docs/format.md §3 (ref::rotate_forward / rotate_inverse): the same float operations in the same
// order, so identical bits are expected, for padded rows of one and two 128-value groups, for any
// thread count, with and without per-channel factors, in place and from unaligned rows.
#include "gpu_common.hpp"

#include <cmath>
#include <cstring>

#include "turbo3/attention/rotate_smem.hpp"
#include "turbo3/ref/quantize.hpp"
#include "turbo3/rotate.hpp"

using namespace turbo3;
using turbo3_test::device_buffer;

namespace {

// Rows of GROUPS 128-value groups, `stride` floats apart in shared memory (as the prefill kernels
// keep them); rows in global memory are packed. WHOLE: rotate_groups_in_place, else rotate_rows_shared.
template <bool Inverse, int GROUPS, bool WHOLE>
__global__ void rotate_rows_kernel(const float* in, float* out, int n_rows, int stride) {
  extern __shared__ float4 rotation_smem4[];
  float* x = reinterpret_cast<float*>(rotation_smem4);
  const int tid = static_cast<int>(threadIdx.x), n_threads = static_cast<int>(blockDim.x);
  constexpr int row_values = GROUPS * block_values;
  for (int i = tid; i < n_rows * row_values; i += n_threads) x[(i / row_values) * stride + i % row_values] = in[i];
  platform::sync_threads();
  if constexpr (WHOLE) {
    detail::rotate_groups_in_place<Inverse, GROUPS>(x, n_rows, stride, tid, n_threads);
  } else {
    detail::rotate_rows_shared<Inverse, GROUPS>(x, n_rows, stride, tid, n_threads);
  }
  for (int i = tid; i < n_rows * row_values; i += n_threads) out[i] = x[(i / row_values) * stride + i % row_values];
}

template <bool Inverse, int GROUPS, bool WHOLE>
void check_rows_as(int n_rows, int stride, int threads, std::mt19937_64& rng) {
  const size_t n = static_cast<size_t>(n_rows) * GROUPS * block_values;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng) * 3.0f;
  x[0] = -0.0f;  // signs of zeros travel too
  std::vector<float> want = x;
  if (Inverse) ref::rotate_inverse(want.data(), static_cast<int64_t>(n));
  else ref::rotate_forward(want.data(), static_cast<int64_t>(n));

  device_buffer d_in(n * sizeof(float)), d_out(n * sizeof(float));
  d_in.upload(x.data(), n * sizeof(float));
  d_out.poison();
  const size_t smem = sizeof(float) * static_cast<size_t>(n_rows) * stride;
  rotate_rows_kernel<Inverse, GROUPS, WHOLE><<<1, threads, smem>>>(d_in.as<float>(), d_out.as<float>(), n_rows, stride);
  TURBO3_CHECK_HIP(hipGetLastError());
  TURBO3_CHECK_HIP(hipDeviceSynchronize());
  std::vector<float> got(n);
  d_out.download(got.data(), n * sizeof(float));
  size_t differing = 0;
  for (size_t i = 0; i < n; ++i) differing += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
  INFO((WHOLE ? "whole groups " : "two passes ") << (Inverse ? "inverse" : "forward") << " rows=" << n_rows << " groups=" << GROUPS << " stride=" << stride
                                         << " threads=" << threads);
  CHECK(differing == 0);
}

template <bool Inverse, int GROUPS>
void check_rows(int n_rows, int stride, int threads, std::mt19937_64& rng) {
  check_rows_as<Inverse, GROUPS, false>(n_rows, stride, threads, rng);
  check_rows_as<Inverse, GROUPS, true>(n_rows, stride, threads, rng);
}

// rotate_groups over n_groups groups starting `offset` floats into the buffers; channel factors
// (applied as the device applies them: before the forward rotation, after the inverse one).
void check_rotate_groups(rotation_direction dir, int64_t n_groups, bool scaled, bool in_place, int offset,
                         std::mt19937_64& rng) {
  const size_t n = static_cast<size_t>(n_groups) * block_values;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n), scale(block_values);
  for (size_t i = 0; i < n; ++i) x[i] = normal(rng) * std::exp2(static_cast<float>(static_cast<int>(i / 128 % 7) - 3));
  if (n > 0) x[0] = -0.0f;
  for (float& v : scale) v = 0.5f + std::fabs(normal(rng));
  std::vector<float> want = x;
  if (dir == rotation_direction::forward) {
    if (scaled) for (size_t i = 0; i < n; ++i) want[i] *= scale[i % block_values];
    ref::rotate_forward(want.data(), static_cast<int64_t>(n));
  } else {
    ref::rotate_inverse(want.data(), static_cast<int64_t>(n));
    if (scaled) for (size_t i = 0; i < n; ++i) want[i] *= scale[i % block_values];
  }
  const size_t bytes = (n + offset) * sizeof(float);
  device_buffer d_in(bytes), d_out(bytes), d_scale(block_values * sizeof(float));
  d_in.poison();
  d_out.poison();
  if (n > 0) TURBO3_CHECK_HIP(hipMemcpy(d_in.as<float>() + offset, x.data(), n * sizeof(float), hipMemcpyHostToDevice));
  d_scale.upload(scale.data(), block_values * sizeof(float));
  float* src = d_in.as<float>() + offset;
  float* dst = in_place ? src : d_out.as<float>() + offset;
  REQUIRE(rotate_groups(src, dst, n_groups, dir, scaled ? d_scale.as<float>() : nullptr, nullptr) == status::ok);
  TURBO3_CHECK_HIP(hipDeviceSynchronize());
  std::vector<float> got(n + offset);
  (in_place ? d_in : d_out).download(got.data(), bytes);
  size_t differing = 0;
  for (size_t i = 0; i < n; ++i) differing += std::memcmp(&got[offset + i], &want[i], sizeof(float)) != 0;
  for (int i = 0; i < offset; ++i) differing += std::isnan(got[i]) ? 0 : 1;  // nothing before the groups written
  INFO((dir == rotation_direction::forward ? "forward" : "inverse") << " groups=" << n_groups << " scaled=" << scaled
       << " in_place=" << in_place << " offset=" << offset);
  CHECK(differing == 0);
}

}  // namespace

TEST_CASE("rotation in shared memory equals the host rotation bit for bit", "[rotation]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x707);
  for (int threads : {32, 128, 256}) {
    check_rows<false, 1>(1, 128, threads, rng);
    check_rows<true, 1>(3, 132, threads, rng);
    check_rows<false, 2>(5, 260, threads, rng);
    check_rows<true, 2>(32, 260, threads, rng);
    check_rows<false, 2>(32, 264, threads, rng);
    check_rows<true, 4>(8, 516, threads, rng);
  }
}

TEST_CASE("rotate_groups equals the host rotation bit for bit", "[rotation]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x708);
  for (rotation_direction dir : {rotation_direction::forward, rotation_direction::inverse})
    for (bool scaled : {false, true})
      for (bool in_place : {false, true})
        for (int offset : {0, 1, 4}) {
          check_rotate_groups(dir, 1, scaled, in_place, offset, rng);
          check_rotate_groups(dir, 9, scaled, in_place, offset, rng);
        }
  // More groups than the grid's blocks times groups per block: the grid-stride loop.
  check_rotate_groups(rotation_direction::forward, 65535 * 8 + 37, true, false, 0, rng);
  check_rotate_groups(rotation_direction::inverse, 0, false, false, 0, rng);
}
