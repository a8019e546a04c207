// AMD ISA compile check of the prefill kernels: every TILE instantiation the launcher can reach on
// the target being compiled (head dim x K loader x V loader, with the tile shape of the target's
// architecture family from tile_table) and the materialize kernels. Never launched; amd_check.py
// reads the resources and fails on unresolved calls or broken assertions below. TILE's shared
// memory is dynamic (tile_config::smem_bytes, at most 64 KB on AMD: tile.hpp asserts it), so the
// report's LDS column reads 0 for it.
#include "turbo3/attention/materialize.hpp"
#include "turbo3/attention/tile.hpp"

namespace turbo3 {
namespace detail {
using T3 = kv::turbo3_loader;
using F16 = kv::f16_loader;
template <int D>
using native = tile_config_for<D, platform::compiled_family>;
#define TURBO3_TILE(D, K, V) template __global__ void tile_kernel<D, K, V, native<D>>(prefill_args);
TURBO3_TILE(64, F16, F16)
TURBO3_TILE(128, T3, T3) TURBO3_TILE(128, T3, F16) TURBO3_TILE(128, F16, T3) TURBO3_TILE(128, F16, F16)
TURBO3_TILE(256, T3, T3) TURBO3_TILE(256, T3, F16) TURBO3_TILE(256, F16, T3) TURBO3_TILE(256, F16, F16)
TURBO3_TILE(512, T3, T3) TURBO3_TILE(512, T3, F16) TURBO3_TILE(512, F16, T3) TURBO3_TILE(512, F16, F16)
#undef TURBO3_TILE
template __global__ void materialize_kernel<false>(materialize_copy, materialize_copy, turbo3_lut);
template __global__ void materialize_kernel<true>(materialize_copy, materialize_copy, turbo3_lut);
}  // namespace detail
}  // namespace turbo3

// The turbo3 D = 256 prefill kernels must not spill on RDNA4 (gfx1201), the first target.
// amd-check: tile_kernel<256,?turbo3::kv::turbo3_loader,*@gfx1201 max vgpr_spill 0
// amd-check: tile_kernel<256,?turbo3::kv::turbo3_loader,*@gfx1201 max sgpr_spill 0
// amd-check: tile_kernel<256,?turbo3::kv::f16_loader,?turbo3::kv::turbo3_loader,*@gfx1201 max vgpr_spill 0
// amd-check: tile_kernel<256,?turbo3::kv::f16_loader,?turbo3::kv::turbo3_loader,*@gfx1201 max sgpr_spill 0
// The D = 512 prefill kernels (every K/V pair) must not spill on gfx1201 either.
// amd-check: tile_kernel<512,*@gfx1201 max vgpr_spill 0
// amd-check: tile_kernel<512,*@gfx1201 max sgpr_spill 0
// amd-check: tile_kernel<512,*@gfx1201 max scratch 0
// amd-check: materialize_kernel* max scratch 0
// No TILE kernel spills on any target.
// amd-check: tile_kernel* max vgpr_spill 0
// amd-check: tile_kernel* max sgpr_spill 0
