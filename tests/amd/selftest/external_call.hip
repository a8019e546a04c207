// Self-test of amd_check.py: a kernel that calls a function no library defines must be reported.
// amd-check-expect: undefined-call=1 dynamic-stack=1
#include "turbo3/platform/device.hpp"

extern "C" TURBO3_DEVICE float turbo3_selftest_missing(float);

TURBO3_GLOBAL void calls_external(float* x) { x[threadIdx.x] = turbo3_selftest_missing(x[threadIdx.x]); }
