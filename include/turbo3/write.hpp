// write_rows: quantize f32/f16 rows into a turbo3, turbo4, turbo2 or q8_0 cache, or copy them into
// an f16 cache, on the device. Byte-exact with ref::quantize_row: the reductions the format defines
// as sequential run sequentially, and every multiply and add is rounded on its own (no FMA
// contraction); a norm or q8_0 scale past the largest finite fp16 value is stored as 65504 by both
// (clamp_to_fp16_range).
#pragma once

#include <cstdint>
#include <type_traits>

#include "turbo3/attention/validate.hpp"
#include "turbo3/format/block_q8_0.hpp"
#include "turbo3/format/block_turbo2.hpp"
#include "turbo3/format/block_turbo4.hpp"
#include "turbo3/format/codebook.hpp"
#include "turbo3/format/codebook_turbo2.hpp"
#include "turbo3/format/codebook_turbo4.hpp"
#include "turbo3/format/fp16.hpp"
#include "turbo3/format/rotation.hpp"
#include "turbo3/platform/device.hpp"
#include "turbo3/platform/async_copy.hpp"
#include "turbo3/platform/device_state.hpp"
#include "turbo3/rotate.hpp"
#include "turbo3/status.hpp"
#include "turbo3/types.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {

// n_rows source rows of n_cols values (f32 or f16), row r at data + r * row_stride bytes.
struct row_source {
  const void* data = nullptr;
  data_type type = data_type::f32;
  int64_t n_cols = 0;
  int64_t n_rows = 0;
  size_t row_stride = 0;
};

// A cache of n_rows rows (its capacity), f16, turbo3, turbo4, turbo2 or q8_0, row r at data + r *
// row_stride bytes. A turbo3 row of n_cols values is n_cols/128 consecutive 50-byte blocks (head
// h's blocks follow head h-1's when a row holds several heads); the other block types likewise
// (row_bytes).
struct cache_view {
  void* data = nullptr;
  data_type type = data_type::turbo3;
  int64_t n_cols = 0;
  int64_t n_rows = 0;
  size_t row_stride = 0;
};

namespace detail {

inline constexpr int write_threads = 128;  // q8_0: one thread per 32-value block

TURBO3_DEVICE TURBO3_FORCEINLINE float load_value(const void* row, data_type type, int64_t i) {
  return type == data_type::f16 ? platform::half_to_float(static_cast<const platform::half*>(row)[i])
                                : static_cast<const float*>(row)[i];
}

template <class Index>
TURBO3_DEVICE TURBO3_FORCEINLINE int64_t destination_row(const Index* row_ids, int64_t r) {
  return row_ids ? static_cast<int64_t>(row_ids[r]) : r;
}

// The table a write kernel quantizes with: turbo3's from the argument (the codebook is the
// caller's), turbo4's and turbo2's their constant tables (immediates, not 31 argument registers,
// which spill SGPRs on gfx942).
TURBO3_DEVICE TURBO3_FORCEINLINE codebook_table write_table(const codebook_table& arg) { return arg; }
TURBO3_DEVICE TURBO3_FORCEINLINE turbo4_codebook_table write_table(const turbo4_codebook_table&) { return turbo4_codebook(); }
TURBO3_DEVICE TURBO3_FORCEINLINE turbo2_codebook_table write_table(const turbo2_codebook_table&) { return turbo2_codebook(); }

// 32 lanes quantize one 128-group, 4 consecutive values per lane (a wave64 holds two groups),
// rotating them as rotate_groups does (rotate_lane_values), one load and a few stores per lane: no
// barrier per butterfly stage, which leaves a work-group per group latency-bound
// (docs/performance.md, cache write).
inline constexpr int write_lanes_per_group = rotate_lanes_per_group;
inline constexpr int write_values_per_lane = rotate_values_per_lane;
inline constexpr int write_group_threads = 256;
inline constexpr int write_groups_per_block = write_group_threads / write_lanes_per_group;
static_assert(write_values_per_lane == 4, "4 consecutive values per lane");

// Values c .. c + 3 of a source row: one 16-byte load where an f32 row allows it.
TURBO3_DEVICE TURBO3_FORCEINLINE void load_lane_values(const void* row, data_type type, int64_t c, float (&x)[4]) {
  if (type == data_type::f32) {
    const float* p = static_cast<const float*>(row) + c;
    if ((reinterpret_cast<uintptr_t>(p) & 15u) == 0) {
      const float4 v = *reinterpret_cast<const float4*>(p);
      x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
      return;
    }
  }
TURBO3_UNROLL
  for (int k = 0; k < 4; ++k) x[k] = load_value(row, type, c + k);
}

// A float32 sum of the group's 128 values in index order (§3 steps 1-2 and 6 define it as
// sequential): each lane writes its 4 to the group's shared floats, then every lane adds all 128
// (broadcast reads), so each holds the same sum without a shuffle.
TURBO3_DEVICE TURBO3_FORCEINLINE float sequential_group_sum(float* group_smem, int lane, const float (&v)[4]) {
  *reinterpret_cast<float4*>(group_smem + 4 * lane) = make_float4(v[0], v[1], v[2], v[3]);
  platform::sync_warp();
  float sum = 0.0f;
  // 8 loads ahead of their adds at a time: fully unrolled, every load is hoisted into a register
  // of its own (128 on AMD).
#pragma unroll 1
  for (int i = 0; i < block_values; i += 32) {
    float4 q[8];
TURBO3_UNROLL
    for (int j = 0; j < 8; ++j) q[j] = *reinterpret_cast<const float4*>(group_smem + i + 4 * j);
TURBO3_UNROLL
    for (int j = 0; j < 8; ++j)
      sum = platform::add_rn(platform::add_rn(platform::add_rn(platform::add_rn(sum, q[j].x), q[j].y), q[j].z), q[j].w);
  }
  platform::sync_warp();  // every lane has read before the floats are written again
  return sum;
}

// A lane's 4 indices (values 4 lane .. 4 lane + 3) into the block's bytes.
TURBO3_DEVICE TURBO3_FORCEINLINE void store_lane_indices(block_turbo3* out, int lane, const int (&idx)[4]) {
  out->qs[lane] = static_cast<uint8_t>((idx[0] & 3) | ((idx[1] & 3) << 2) | ((idx[2] & 3) << 4) | ((idx[3] & 3) << 6));
  // sign byte k holds values 8k .. 8k + 7: this lane's nibble and its odd neighbour's
  const int nibble = ((idx[0] >> 2) & 1) | ((idx[1] >> 2) & 1) << 1 | ((idx[2] >> 2) & 1) << 2 | ((idx[3] >> 2) & 1) << 3;
  const int upper = platform::shfl_xor(nibble, 1, write_lanes_per_group);
  if ((lane & 1) == 0) out->signs[lane / 2] = static_cast<uint8_t>(nibble | (upper << 4));
}
TURBO3_DEVICE TURBO3_FORCEINLINE void store_lane_indices(block_turbo4* out, int lane, const int (&idx)[4]) {
  const uint32_t lo = static_cast<uint32_t>((idx[0] & 15) | ((idx[1] & 15) << 4));
  const uint32_t hi = static_cast<uint32_t>((idx[2] & 15) | ((idx[3] & 15) << 4));
  *reinterpret_cast<uint16_t*>(out->qs + 2 * lane) = static_cast<uint16_t>(lo | (hi << 8));  // qs is 2-byte aligned
  if (lane == 1) out->reserved = 0;
}
TURBO3_DEVICE TURBO3_FORCEINLINE void store_lane_indices(block_turbo2* out, int lane, const int (&idx)[4]) {
  out->qs[lane] = static_cast<uint8_t>((idx[0] & 3) | ((idx[1] & 3) << 2) | ((idx[2] & 3) << 4) | ((idx[3] & 3) << 6));
}

// Quantizes the 128-groups of the source (grid-stride, one per 32 lanes) into Blocks (turbo3,
// turbo4, turbo2) with their Table (levels, thresholds, a quantize_index overload): docs/format.md
// §3 with the type's table and packing.
template <class Block, class Table, class Index>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(write_group_threads)
write_rotated_kernel(row_source src, const Index* row_ids, cache_view dst, Table cb_arg) {
  static_assert(sizeof(Block) >= 2 + block_values / 4, "a block holds at least 2 bits per value");
  const Table cb = write_table(cb_arg);
  constexpr int n_levels = static_cast<int>(sizeof(cb.level) / sizeof(cb.level[0]));
  __shared__ float4 group_floats[write_groups_per_block * block_values / 4];
  // The levels in shared memory, read at the index: a select chain over them in registers becomes
  // an indexed copy in local memory (nvcc) or holds the table in scalar registers (gfx942 spills).
  __shared__ float levels[n_levels];
  if (threadIdx.x == 0) {  // one thread, constant indices: no copy of the table in local memory
TURBO3_UNROLL
    for (int l = 0; l < n_levels; ++l) levels[l] = cb.level[l];
  }
  platform::sync_threads();
  const int lane = static_cast<int>(threadIdx.x) % write_lanes_per_group;
  const int group_in_block = static_cast<int>(threadIdx.x) / write_lanes_per_group;
  float* group_smem = reinterpret_cast<float*>(group_floats) + group_in_block * block_values;
  const int first = write_values_per_lane * lane;
  const int64_t groups_per_row = src.n_cols / block_values;
  const int64_t n_groups = src.n_rows * groups_per_row;
  const int64_t group_stride = static_cast<int64_t>(gridDim.x) * write_groups_per_block;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(write_groups_per_block) + group_in_block; g < n_groups;
       g += group_stride) {
    const int64_t r = g / groups_per_row;
    const int64_t c = g % groups_per_row;
    const int64_t out_row = destination_row(row_ids, r);
    if (out_row < 0 || out_row >= dst.n_rows) continue;  // uniform over the group's lanes
    const void* in = static_cast<const char*>(src.data) + r * src.row_stride;
    float x[4], v[4];
    load_lane_values(in, src.type, c * block_values + first, x);
TURBO3_UNROLL
    for (int k = 0; k < 4; ++k) v[k] = platform::mul_rn(x[k], x[k]);
    // §3 steps 1-2: the norm from the sequential sum of squares
    const float norm = platform::sqrt_rn(sequential_group_sum(group_smem, lane, v));
    const float inv = (norm > 1e-10f) ? platform::div_rn(1.0f, norm) : 0.0f;
    // §3 step 3: the normalized values rotated
TURBO3_UNROLL
    for (int k = 0; k < 4; ++k) v[k] = platform::mul_rn(x[k], inv);
    rotate_lane_values(v, lane, rotation_direction::forward);
    int idx[4];
TURBO3_UNROLL
    for (int k = 0; k < 4; ++k) {
      const float y = v[k];
      idx[k] = quantize_index(cb, y);
      const float level = levels[idx[k]];
      v[k] = platform::mul_rn(level, level);
    }
    // §3 step 6: the norm correction from the sequential sum of the squared levels
    const float r2 = platform::sqrt_rn(sequential_group_sum(group_smem, lane, v));
    Block* out = reinterpret_cast<Block*>(static_cast<char*>(dst.data) + out_row * dst.row_stride) + c;
    store_lane_indices(out, lane, idx);
    if (lane == 0)
      out->norm = platform::float_to_half_bits(clamp_to_fp16_range((r2 > 1e-10f) ? platform::div_rn(norm, r2) : norm));
  }
}

// q8_0 (docs/format.md §10): one thread per 32-value block (grid-stride over all blocks), the
// maximum taken in index order as ref::quantize_block takes it. Blocks are 2-byte aligned: the
// scale and the values go out as 16-bit stores.
template <class Index>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(write_threads)
write_q8_0_kernel(row_source src, const Index* row_ids, cache_view dst) {
  const int64_t blocks_per_row = src.n_cols / q8_0_block_values;
  const int64_t n_blocks = src.n_rows * blocks_per_row;
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < n_blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = b / blocks_per_row, c = b % blocks_per_row;
    const int64_t out_row = destination_row(row_ids, r);
    if (out_row < 0 || out_row >= dst.n_rows) continue;
    const void* in = static_cast<const char*>(src.data) + r * src.row_stride;
    float x[q8_0_block_values];
    float amax = 0.0f;
TURBO3_UNROLL
    for (int j = 0; j < q8_0_block_values; ++j) {
      x[j] = load_value(in, src.type, c * q8_0_block_values + j);
      const float a = fabsf(x[j]);
      amax = amax > a ? amax : a;  // ggml's MAX(amax, |x|), NaN handling included
    }
    const float d = platform::div_rn(amax, 127.0f);
    const float id = d != 0.0f ? platform::div_rn(1.0f, d) : 0.0f;
    uint16_t* out = reinterpret_cast<uint16_t*>(static_cast<char*>(dst.data) + out_row * dst.row_stride +
                                                c * static_cast<int64_t>(q8_0_block_bytes));
    out[0] = platform::float_to_half_bits(clamp_to_fp16_range(d));
    uint32_t byte[2];
TURBO3_UNROLL
    for (int j = 0; j < q8_0_block_values; ++j) {
      const float q = roundf(platform::mul_rn(x[j], id));  // halfway cases away from zero
      const int8_t v = (q >= -127.0f && q <= 127.0f) ? static_cast<int8_t>(q) : int8_t{0};
      byte[j & 1] = static_cast<uint8_t>(v);
      if (j & 1) out[1 + j / 2] = static_cast<uint16_t>(byte[0] | (byte[1] << 8));
    }
  }
}

template <class Index>
TURBO3_GLOBAL void write_f16_kernel(row_source src, const Index* row_ids, cache_view dst) {
  const int64_t n = src.n_rows * src.n_cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / src.n_cols, i = e % src.n_cols;
    const int64_t out_row = destination_row(row_ids, r);
    if (out_row < 0 || out_row >= dst.n_rows) continue;
    const void* in = static_cast<const char*>(src.data) + r * src.row_stride;
    platform::half* out = reinterpret_cast<platform::half*>(static_cast<char*>(dst.data) + out_row * dst.row_stride);
    out[i] = platform::float_to_half(load_value(in, src.type, i));
  }
}

}  // namespace detail

namespace detail {

// Bytes from data to the end of row n_rows - 1 of rows of row_bytes bytes, row_stride apart:
// checked unsigned arithmetic against 2^63 - 1 (the kernels offset rows with signed 64-bit
// products), not wrapping the address space from data. false where it does not fit.
inline bool rows_span(const void* data, int64_t n_rows, size_t row_stride, size_t row_bytes, size_t& bytes) {
  constexpr uint64_t limit = static_cast<uint64_t>(INT64_MAX);
  if (n_rows < 1 || row_stride > limit || row_bytes > limit) return false;
  const uint64_t steps = static_cast<uint64_t>(n_rows - 1);
  if (steps != 0 && row_stride > (limit - row_bytes) / steps) return false;
  const uint64_t total = steps * row_stride + row_bytes;
  if (total > UINTPTR_MAX - reinterpret_cast<uintptr_t>(data)) return false;
  bytes = static_cast<size_t>(total);
  return true;
}

}  // namespace detail

// Checks arguments without touching the device: null pointers, types, sizes, strides, alignment;
// n_rows * n_cols and both views' spans within 2^63 - 1 bytes; the source's rows share no byte
// with the cache's (invalid_argument: the kernels would read what they write).
inline status validate_write(const row_source& src, const cache_view& dst) {
  if (!src.data || !dst.data) return status::invalid_argument;
  if (src.n_cols <= 0 || src.n_rows < 0 || dst.n_rows <= 0) return status::invalid_argument;
  if (src.type != data_type::f32 && src.type != data_type::f16) return status::unsupported;
  if (dst.type != data_type::f16 && dst.type != data_type::turbo3 && dst.type != data_type::turbo4 &&
      dst.type != data_type::turbo2 && dst.type != data_type::q8_0)
    return status::unsupported;
  if (dst.n_cols != src.n_cols) return status::invalid_argument;
  if (src.n_cols % values_per_block(dst.type) != 0) return status::invalid_argument;  // whole blocks
  // the kernels count values (f16) and blocks of the source in int64
  if (src.n_rows > 0 && src.n_cols > INT64_MAX / src.n_rows) return status::invalid_argument;
  if (src.n_cols > INT64_MAX / 4) return status::invalid_argument;  // a row's bytes fit
  const size_t src_elem = element_bytes(src.type);
  if (!detail::is_aligned(src.data, src_elem) || src.row_stride % src_elem != 0) return status::invalid_argument;
  if (src.n_rows > 1 && src.row_stride < row_bytes(src.type, src.n_cols)) return status::invalid_argument;
  if (!detail::is_aligned(dst.data, 2) || dst.row_stride % 2 != 0) return status::invalid_argument;
  if (dst.n_rows > 1 && dst.row_stride < row_bytes(dst.type, dst.n_cols)) return status::invalid_argument;
  size_t src_bytes = 0, dst_bytes = 0;
  if (!detail::rows_span(dst.data, dst.n_rows, dst.row_stride, row_bytes(dst.type, dst.n_cols), dst_bytes))
    return status::invalid_argument;
  if (src.n_rows > 0) {
    if (!detail::rows_span(src.data, src.n_rows, src.row_stride, row_bytes(src.type, src.n_cols), src_bytes))
      return status::invalid_argument;
    if (detail::ranges_overlap(src.data, src_bytes, dst.data, dst_bytes)) return status::invalid_argument;
  }
  return status::ok;
}

// Writes source row r into cache row row_ids[r] (row r when row_ids is null). Index is int32_t
// or int64_t; row_ids is device memory. Ids outside [0, dst.n_rows) are skipped on the device.
// Launches one kernel on `stream`; no allocation, no synchronization (graph-capture safe).
// invalid_argument for what validate_write refuses and for a codebook that names no table. cb is
// turbo3's table; turbo4, turbo2 and q8_0 have one table each and ignore it.
template <class Index>
status write_rows(const row_source& src, const Index* row_ids, const cache_view& dst, hipStream_t stream,
                  codebook cb = codebook::lloyd_max) {
  static_assert(std::is_same<Index, int32_t>::value || std::is_same<Index, int64_t>::value,
                "row ids are int32_t or int64_t");
  const status s = validate_write(src, dst);
  if (s != status::ok) return s;
  if (!is_known(cb)) return status::invalid_argument;
  if (src.n_rows == 0) return status::ok;
  const platform::error_scope errors;
  constexpr int64_t max_blocks = 65535;
  const int64_t groups = src.n_rows * (src.n_cols / block_values);  // the turbo types' 128-groups
  const int64_t group_blocks = (groups + detail::write_groups_per_block - 1) / detail::write_groups_per_block;
  const unsigned group_grid = static_cast<unsigned>(group_blocks < max_blocks ? group_blocks : max_blocks);
  if (dst.type == data_type::turbo3) {
    detail::write_rotated_kernel<block_turbo3, codebook_table, Index>
        <<<group_grid, detail::write_group_threads, 0, stream>>>(src, row_ids, dst, codebook_values(cb));
  } else if (dst.type == data_type::turbo4) {
    detail::write_rotated_kernel<block_turbo4, turbo4_codebook_table, Index>
        <<<group_grid, detail::write_group_threads, 0, stream>>>(src, row_ids, dst, turbo4_codebook());
  } else if (dst.type == data_type::turbo2) {
    detail::write_rotated_kernel<block_turbo2, turbo2_codebook_table, Index>
        <<<group_grid, detail::write_group_threads, 0, stream>>>(src, row_ids, dst, turbo2_codebook());
  } else if (dst.type == data_type::q8_0) {
    const int64_t blocks = (src.n_rows * (src.n_cols / q8_0_block_values) + detail::write_threads - 1) /
                           detail::write_threads;
    const unsigned grid = static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
    detail::write_q8_0_kernel<Index><<<grid, detail::write_threads, 0, stream>>>(src, row_ids, dst);
  } else {
    const int64_t blocks = (src.n_rows * src.n_cols + 255) / 256;
    const unsigned grid = static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
    detail::write_f16_kernel<Index><<<grid, 256, 0, stream>>>(src, row_ids, dst);
  }
  return errors.launches_ok() ? status::ok : status::runtime_error;
}

}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
