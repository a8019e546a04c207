// AMD ISA compile check of the MMA prefill kernels: every instantiation the launcher can reach on
// the target being compiled (head dim x K loader x V loader, with the tile shape of the target's
// architecture family from mma_table). Never launched; amd_check.py reads the resources and fails
// on unresolved calls or broken assertions below. The kernels' shared memory is dynamic
// (mma_config::smem_bytes, at most 64 KB on AMD: mma.hpp asserts it), so the LDS column reads 0.
#include "turbo3/attention/mma.hpp"

namespace turbo3 {
namespace detail {
using T3 = kv::turbo3_loader;
using F16 = kv::f16_loader;
template <int D>
using native = mma_config_for<D, platform::compiled_family>;
#define TURBO3_MMA(D, K, V) template __global__ void mma_kernel<D, K, V, native<D>>(prefill_args);
TURBO3_MMA(128, T3, T3) TURBO3_MMA(128, T3, F16) TURBO3_MMA(128, F16, T3) TURBO3_MMA(128, F16, F16)
TURBO3_MMA(256, T3, T3) TURBO3_MMA(256, T3, F16) TURBO3_MMA(256, F16, T3) TURBO3_MMA(256, F16, F16)
#undef TURBO3_MMA
}  // namespace detail
}  // namespace turbo3

// The matrix instructions are emitted on every target (WMMA on RDNA3 / RDNA4, MFMA on CDNA3).
// Only the configuration of the target's own family has a body (the launcher's dispatch references
// the other families' kernels too; they compile to a trap): wave 32 on RDNA, wave 64 on CDNA3.
// amd-check: mma_kernel*,?32,?1,?false,?[12],?false,?false,?false>>@gfx1201 require \bv_wmma_f32_16x16x16_f16\b
// amd-check: mma_kernel*,?32,?1,?false,?[12],?false,?false,?false>>@gfx1100 require \bv_wmma_f32_16x16x16_f16\b
// amd-check: mma_kernel*,?64,?1,?false,?[12],?false,?false,?false>>@gfx942 require \bv_mfma_f32_16x16x16_?f16\b

// No spills and no scratch anywhere, D = 256 included: on RDNA a wave holds 16 rows x 256 f32
// accumulators (128 VGPRs per lane), which leaves room only because the mask is read from a
// per-tile base and the P V loop has a scheduling barrier per 16-dimension slice (without them the
// D = 256 kernels spilled 5-46 VGPRs).
// amd-check: mma_kernel*,?32,?1,?false,?[12],?false,?false,?false>>@gfx1201 max vgpr_spill 0
// amd-check: mma_kernel*,?32,?1,?false,?[12],?false,?false,?false>>@gfx1201 max sgpr_spill 0
// amd-check: mma_kernel*,?32,?1,?false,?[12],?false,?false,?false>>@gfx1201 max scratch 0
// amd-check: mma_kernel*,?32,?1,?false,?[12],?false,?false,?false>>@gfx1100 max vgpr_spill 0
// amd-check: mma_kernel*,?32,?1,?false,?[12],?false,?false,?false>>@gfx1100 max sgpr_spill 0
// amd-check: mma_kernel*,?32,?1,?false,?[12],?false,?false,?false>>@gfx1100 max scratch 0
// amd-check: mma_kernel*,?64,?1,?false,?[12],?false,?false,?false>>@gfx942 max vgpr_spill 0
// amd-check: mma_kernel*,?64,?1,?false,?[12],?false,?false,?false>>@gfx942 max sgpr_spill 0
// amd-check: mma_kernel*,?64,?1,?false,?[12],?false,?false,?false>>@gfx942 max scratch 0
