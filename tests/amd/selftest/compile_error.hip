// Self-test of amd_check.py: a translation unit that does not compile must fail the check.
// amd-check-expect: compile-error
#include "turbo3/platform/device.hpp"

TURBO3_GLOBAL void does_not_compile(float* x) { x[0] = turbo3::platform::no_such_function(); }
