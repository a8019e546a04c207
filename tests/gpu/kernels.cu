// The one translation unit of the GPU tests that compiles the kernels behind the launchers; the
// others include the library with TURBO3_KERNELS_EXTERN (tests/CMakeLists.txt) and link to these.
#define TURBO3_KERNELS_DEFINE
#include "turbo3/turbo3.hpp"

namespace turbo3_test {

// The VEC family's own plan for p on the current device with its wide form (16 rows a work-group)
// in `warps` warps, launched on the null stream with a workspace of its own: the 4-warp fallback
// where a device cannot hold the 8-warp work-group's shared memory. unsupported where p does not
// take the wide form.
turbo3::status run_vec_wide_in_warps(const turbo3::attention_params& p, int warps) {
  using namespace turbo3::detail;
  const int device = turbo3::platform::current_device();
  vec_plan plan;
  turbo3::status s = vec_family::plan(p, turbo3::launch_options{}, device, plan);
  if (s != turbo3::status::ok) return s;
  if (plan.variant != turbo3::vec_variant::warp || plan.warp_col_blocks != 4) return turbo3::status::unsupported;
  plan.warp_warps = warps;
  void* workspace = nullptr;
  const size_t bytes = vec_family::workspace_bytes(plan);
  if (bytes > 0 && hipMalloc(&workspace, bytes) != hipSuccess) return turbo3::status::out_of_memory;
  s = vec_family::launch(p, plan, workspace, device, nullptr);
  if (hipDeviceSynchronize() != hipSuccess) s = turbo3::status::runtime_error;
  if (workspace) (void)hipFree(workspace);
  return s;
}

}  // namespace turbo3_test
