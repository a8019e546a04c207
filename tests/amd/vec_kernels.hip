// AMD ISA compile check of the VEC decode kernels: every instantiation the launcher's dispatch
// can reach (head dim x K loader x V loader x rows per work-group) and the combine kernels.
// Never launched; amd_check.py reads the resources and fails on unresolved calls or spills.
#include "turbo3/attention/vec.hpp"

namespace turbo3 {
namespace detail {
using T3 = kv::turbo3_loader;
using F16 = kv::f16_loader;
#define TURBO3_VEC(D, K, V, ROWS) template __global__ void vec_kernel<D, K, V, ROWS>(attention_args, int);
TURBO3_VEC(64, F16, F16, 1) TURBO3_VEC(64, F16, F16, 2) TURBO3_VEC(64, F16, F16, 4) TURBO3_VEC(64, F16, F16, 8) TURBO3_VEC(64, F16, F16, 16)
template __global__ void vec_combine_kernel<64>(attention_args, int, int, bool);
TURBO3_VEC(128, T3, T3, 1) TURBO3_VEC(128, T3, T3, 2) TURBO3_VEC(128, T3, T3, 4) TURBO3_VEC(128, T3, T3, 8) TURBO3_VEC(128, T3, T3, 16)
TURBO3_VEC(128, T3, F16, 1) TURBO3_VEC(128, T3, F16, 2) TURBO3_VEC(128, T3, F16, 4) TURBO3_VEC(128, T3, F16, 8) TURBO3_VEC(128, T3, F16, 16)
TURBO3_VEC(128, F16, T3, 1) TURBO3_VEC(128, F16, T3, 2) TURBO3_VEC(128, F16, T3, 4) TURBO3_VEC(128, F16, T3, 8) TURBO3_VEC(128, F16, T3, 16)
TURBO3_VEC(128, F16, F16, 1) TURBO3_VEC(128, F16, F16, 2) TURBO3_VEC(128, F16, F16, 4) TURBO3_VEC(128, F16, F16, 8) TURBO3_VEC(128, F16, F16, 16)
template __global__ void vec_combine_kernel<128>(attention_args, int, int, bool);
TURBO3_VEC(256, T3, T3, 1) TURBO3_VEC(256, T3, T3, 2) TURBO3_VEC(256, T3, T3, 4) TURBO3_VEC(256, T3, T3, 8) TURBO3_VEC(256, T3, T3, 16)
TURBO3_VEC(256, T3, F16, 1) TURBO3_VEC(256, T3, F16, 2) TURBO3_VEC(256, T3, F16, 4) TURBO3_VEC(256, T3, F16, 8) TURBO3_VEC(256, T3, F16, 16)
TURBO3_VEC(256, F16, T3, 1) TURBO3_VEC(256, F16, T3, 2) TURBO3_VEC(256, F16, T3, 4) TURBO3_VEC(256, F16, T3, 8) TURBO3_VEC(256, F16, T3, 16)
TURBO3_VEC(256, F16, F16, 1) TURBO3_VEC(256, F16, F16, 2) TURBO3_VEC(256, F16, F16, 4) TURBO3_VEC(256, F16, F16, 8) TURBO3_VEC(256, F16, F16, 16)
template __global__ void vec_combine_kernel<256>(attention_args, int, int, bool);
TURBO3_VEC(512, T3, T3, 1) TURBO3_VEC(512, T3, T3, 2) TURBO3_VEC(512, T3, T3, 4) TURBO3_VEC(512, T3, T3, 8)
TURBO3_VEC(512, T3, F16, 1) TURBO3_VEC(512, T3, F16, 2) TURBO3_VEC(512, T3, F16, 4) TURBO3_VEC(512, T3, F16, 8)
TURBO3_VEC(512, F16, T3, 1) TURBO3_VEC(512, F16, T3, 2) TURBO3_VEC(512, F16, T3, 4) TURBO3_VEC(512, F16, T3, 8)
TURBO3_VEC(512, F16, F16, 1) TURBO3_VEC(512, F16, F16, 2) TURBO3_VEC(512, F16, F16, 4) TURBO3_VEC(512, F16, F16, 8)
template __global__ void vec_combine_kernel<512>(attention_args, int, int, bool);
// Pairs with a turbo4, turbo2 or q8_0 side: one kernel per head dim and row count, rows 2, 8 and
// 16 (kv::any_loader, vec_any_rows).
using ANY = kv::any_loader;
TURBO3_VEC(128, ANY, ANY, 2) TURBO3_VEC(128, ANY, ANY, 8) TURBO3_VEC(128, ANY, ANY, 16)
TURBO3_VEC(256, ANY, ANY, 2) TURBO3_VEC(256, ANY, ANY, 8) TURBO3_VEC(256, ANY, ANY, 16)
TURBO3_VEC(512, ANY, ANY, 2) TURBO3_VEC(512, ANY, ANY, 8)
#undef TURBO3_VEC
}  // namespace detail
}  // namespace turbo3

// No VEC kernel spills on any target, neither VGPRs nor SGPRs, at any head dim. The per-row
// softmax state lives in shared memory, and no per-row test stays live across the tile loop: 16
// rows of wave-uniform values overflow gfx942's 108 SGPRs (a lane mask takes two there, wave64).
// amd-check: vec_kernel<* max vgpr_spill 0
// amd-check: vec_kernel<* max sgpr_spill 0
