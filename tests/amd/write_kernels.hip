// AMD ISA compile check of the device quantizer (write.hpp) and the group rotation (rotate.hpp):
// every instantiation of the turbo3, turbo4, turbo2, q8_0 and f16 write kernels and of the rotation
// kernel. Never launched; amd_check.py reads the resources and fails on unresolved calls.
#include "turbo3/rotate.hpp"
#include "turbo3/write.hpp"

namespace turbo3 {
namespace detail {
#define TURBO3_WRITE(I)                                                                                         \
  template __global__ void write_rotated_kernel<block_turbo3, codebook_table, I>(row_source, const I*,          \
                                                                                  cache_view, codebook_table); \
  template __global__ void write_rotated_kernel<block_turbo4, turbo4_codebook_table, I>(                       \
      row_source, const I*, cache_view, turbo4_codebook_table);                                                 \
  template __global__ void write_rotated_kernel<block_turbo2, turbo2_codebook_table, I>(                       \
      row_source, const I*, cache_view, turbo2_codebook_table);                                                 \
  template __global__ void write_q8_0_kernel<I>(row_source, const I*, cache_view);                             \
  template __global__ void write_f16_kernel<I>(row_source, const I*, cache_view);
TURBO3_WRITE(int32_t)
TURBO3_WRITE(int64_t)
#undef TURBO3_WRITE
template __global__ void rotate_groups_kernel<true>(const float*, float*, int64_t, rotation_direction, const float*);
template __global__ void rotate_groups_kernel<false>(const float*, float*, int64_t, rotation_direction, const float*);
}  // namespace detail
}  // namespace turbo3

// amd-check: * max vgpr_spill 0
// amd-check: * max sgpr_spill 0
// amd-check: * max scratch 0
