// Self-test of amd_check.py: an indirect call hides the callee's registers (dynamic stack).
// amd-check-expect: dynamic-stack=1
#include "turbo3/platform/device.hpp"

__device__ __noinline__ float selftest_twice(float v) { return 2.0f * v; }
__device__ __noinline__ float selftest_square(float v) { return v * v; }

TURBO3_GLOBAL void calls_indirect(float* x, int which) {
  float (*fns[2])(float) = {selftest_twice, selftest_square};
  x[threadIdx.x] = fns[which & 1](x[threadIdx.x]);
}
