// Entry point of the GPU tests: exits 77 (ctest SKIP_RETURN_CODE) where no usable GPU is present,
// or fewer than --min-devices (the multi-device entries pass 2).
#define CATCH_CONFIG_RUNNER
#include "gpu_common.hpp"

#include <cstdlib>
#include <string>

namespace turbo3_test {
static uint64_t g_seed = 0;
uint64_t run_seed() { return g_seed; }
}  // namespace turbo3_test

int main(int argc, char** argv) {
  Catch::Session runner;
  int min_devices = 1;
  runner.cli(runner.cli() | Catch::clara::Opt(min_devices, "count")["--min-devices"](
                                  "skip (exit 77) where fewer GPUs are present (default 1)"));
  const int parsed = runner.applyCommandLine(argc, argv);
  if (parsed != 0) return parsed;
  const Catch::ConfigData& config = runner.configData();
  if (config.listTests || config.listTestNamesOnly || config.listTags || config.listReporters) return runner.run();
  int devices = 0;
  const hipError_t err = hipGetDeviceCount(&devices);
  if (err != hipSuccess || devices < min_devices || devices == 0) {
    std::printf("SKIPPED: %s; %d GPU(s) needed, GPU tests not run\n",
                err != hipSuccess ? hipGetErrorString(err) : (std::to_string(devices) + " GPU(s) present").c_str(),
                min_devices);
    return 77;
  }
  const char* env = std::getenv("TURBO3_TEST_SEED");
  turbo3_test::g_seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  hipDeviceProp_t prop;
  if (hipGetDeviceProperties(&prop, 0) == hipSuccess) std::printf("device: %s\n", prop.name);
  std::printf("seed: %llu (set TURBO3_TEST_SEED to repeat)\n", static_cast<unsigned long long>(turbo3_test::g_seed));
  return runner.run();
}
