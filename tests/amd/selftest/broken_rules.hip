// Self-test of amd_check.py: ISA assertions that do not hold must be reported.
// amd-check-expect: rule=5
#include "turbo3/platform/device.hpp"

// A plain multiply-add contracts into an FMA under HIP's default -ffp-contract=fast-honor-pragmas.
// amd-check: contracted no-fma
// amd-check: contracted require v_turbo3_no_such_instruction
// amd-check: no_such_kernel require s_endpgm
TURBO3_GLOBAL void contracted(const float* a, const float* b, float* c) {
  c[threadIdx.x] = a[threadIdx.x] * b[threadIdx.x] + c[threadIdx.x];
}

// Metadata limits, one per target family, and a malformed one.
// amd-check: limited@gfx9* max vgpr 1
// amd-check: limited@gfx1[12]* max lds 100
// amd-check: limited max bananas 3
TURBO3_GLOBAL void limited(float* x) {
  __shared__ float tile[64];
  tile[threadIdx.x % 64] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = tile[(threadIdx.x + 1) % 64] * x[threadIdx.x + 7];
}
