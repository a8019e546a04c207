// AMD ISA compile check of the device quantizer (write.hpp) and the group rotation (rotate.hpp):
// every instantiation of the turbo3 and f16 write kernels and of the rotation kernel. Never
// launched; amd_check.py reads the resources and fails on unresolved calls.
#include "turbo3/rotate.hpp"
#include "turbo3/write.hpp"

namespace turbo3 {
namespace detail {
template __global__ void write_turbo3_kernel<int32_t>(row_source, const int32_t*, cache_view, codebook_table);
template __global__ void write_turbo3_kernel<int64_t>(row_source, const int64_t*, cache_view, codebook_table);
template __global__ void write_f16_kernel<int32_t>(row_source, const int32_t*, cache_view);
template __global__ void write_f16_kernel<int64_t>(row_source, const int64_t*, cache_view);
template __global__ void rotate_groups_kernel<true>(const float*, float*, int64_t, rotation_direction, const float*);
template __global__ void rotate_groups_kernel<false>(const float*, float*, int64_t, rotation_direction, const float*);
}  // namespace detail
}  // namespace turbo3

// amd-check: * max vgpr_spill 0
// amd-check: * max sgpr_spill 0
// amd-check: * max scratch 0
