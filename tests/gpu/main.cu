// Entry point of the GPU tests: exits 77 (ctest SKIP_RETURN_CODE) where no usable GPU is present.
#define CATCH_CONFIG_RUNNER
#include "gpu_common.hpp"

#include <cstdlib>

namespace turbo3_test {
static uint64_t g_seed = 0;
uint64_t run_seed() { return g_seed; }
}  // namespace turbo3_test

int main(int argc, char** argv) {
  int devices = 0;
  const hipError_t err = hipGetDeviceCount(&devices);
  if (err != hipSuccess || devices == 0) {
    std::printf("SKIPPED: no GPU available (%s); GPU tests not run\n",
                err != hipSuccess ? hipGetErrorString(err) : "0 devices");
    return 77;
  }
  const char* env = std::getenv("TURBO3_TEST_SEED");
  turbo3_test::g_seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  hipDeviceProp_t prop;
  if (hipGetDeviceProperties(&prop, 0) == hipSuccess) std::printf("device: %s\n", prop.name);
  std::printf("seed: %llu (set TURBO3_TEST_SEED to repeat)\n", static_cast<unsigned long long>(turbo3_test::g_seed));
  return Catch::Session().run(argc, argv);
}
