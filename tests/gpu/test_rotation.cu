// The work-group rotations in shared memory (attention/rotate_smem.hpp: two register passes, and one
// whole group per thread) against
// the host rotation of docs/format.md §3 (ref::rotate_forward / rotate_inverse): the same float
// operations in the same order, so identical bits are expected, for padded rows of one and two
// 128-value groups and for any thread count.
#include "gpu_common.hpp"

#include <cstring>

#include "turbo3/attention/rotate_smem.hpp"
#include "turbo3/ref/quantize.hpp"

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
