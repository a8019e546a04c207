// rotate_groups: the format's 128-point rotation R (docs/format.md §3) applied on the device to
// consecutive f32 groups, forward (y = R x) or inverse (x = R^T y). For engines that rotate Q and
// un-rotate the attention output themselves (rotate_q = unrotate_out = false), as the TurboQuant
// llama.cpp forks do in their graphs. Bit-exact with rotate_forward_group / rotate_inverse_group:
// every value sees the same multiplies and adds in the same order, each rounded on its own.
#pragma once

#include <cstdint>

#include "turbo3/attention/validate.hpp"
#include "turbo3/format/block.hpp"
#include "turbo3/format/rotation.hpp"
#include "turbo3/platform/device.hpp"
#include "turbo3/platform/device_state.hpp"
#include "turbo3/status.hpp"
#include "turbo3/types.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {

enum class rotation_direction { forward, inverse };

namespace detail {

// 32 lanes share a group, each holding 4 consecutive values: the butterfly's first two stages stay
// in a lane, the other five pair lanes by shuffles. Memory-bound, against one work-group and seven
// barriers per group for a shared-memory butterfly. A wave64 holds two groups.
inline constexpr int rotate_lanes_per_group = 32;
inline constexpr int rotate_values_per_lane = block_values / rotate_lanes_per_group;
inline constexpr int rotate_threads = 256;
static_assert(rotate_values_per_lane == 4, "one float4 per lane");

TURBO3_DEVICE TURBO3_FORCEINLINE float flip_if(float v, bool negative) { return negative ? -v : v; }

// The sign of value i of a group for the first (before the butterfly) or last (after) step.
TURBO3_DEVICE TURBO3_FORCEINLINE bool rotation_sign_negative(rotation_direction dir, bool first, int i) {
  const bool s1 = (dir == rotation_direction::forward) == first;
  return s1 ? rotation_s1_negative(i) : rotation_s2_negative(i);
}

// The rotation of one group held by 32 lanes, value 4 lane + k in v[k]: the first signs, the
// butterfly (the lower value of a pair becomes a + b, the upper a - b; stages h = 1, 2 inside the
// lane, h = 4 .. 64 with lane ^ (h / 4) holding the partner of the same slot), the scale and the
// last signs. Every add and multiply rounded on its own, in the order of rotate_forward_group.
TURBO3_DEVICE TURBO3_FORCEINLINE void rotate_lane_values(float (&v)[rotate_values_per_lane], int lane,
                                                         rotation_direction dir) {
  const int first = lane * rotate_values_per_lane;
TURBO3_UNROLL
  for (int k = 0; k < rotate_values_per_lane; ++k) v[k] = flip_if(v[k], rotation_sign_negative(dir, true, first + k));
  for (int h = 1; h < rotate_values_per_lane; h <<= 1) {
TURBO3_UNROLL
    for (int k = 0; k < rotate_values_per_lane; ++k) {
      if ((k & h) == 0) {
        const float a = v[k], b = v[k + h];
        v[k] = platform::add_rn(a, b);
        v[k + h] = platform::add_rn(a, -b);
      }
    }
  }
TURBO3_UNROLL
  for (int lane_mask = 1; lane_mask < rotate_lanes_per_group; lane_mask <<= 1) {
    const bool upper = (lane & lane_mask) != 0;
TURBO3_UNROLL
    for (int k = 0; k < rotate_values_per_lane; ++k) {
      const float partner = platform::shfl_xor(v[k], lane_mask, rotate_lanes_per_group);
      v[k] = upper ? platform::add_rn(partner, -v[k]) : platform::add_rn(v[k], partner);
    }
  }
TURBO3_UNROLL
  for (int k = 0; k < rotate_values_per_lane; ++k)
    v[k] = flip_if(platform::mul_rn(v[k], rotation_scale), rotation_sign_negative(dir, false, first + k));
}

template <bool Aligned>
TURBO3_GLOBAL void TURBO3_LAUNCH_BOUNDS(rotate_threads)
rotate_groups_kernel(const float* src, float* dst, int64_t n_groups, rotation_direction dir, const float* channel_scale) {
  const int lane = static_cast<int>(threadIdx.x) % rotate_lanes_per_group;
  const int first = lane * rotate_values_per_lane;
  const int64_t groups_per_block = rotate_threads / rotate_lanes_per_group;
  const int64_t group_stride = static_cast<int64_t>(gridDim.x) * groups_per_block;
  for (int64_t g = blockIdx.x * groups_per_block + threadIdx.x / rotate_lanes_per_group; g < n_groups; g += group_stride) {
    const float* in = src + g * block_values + first;
    float v[rotate_values_per_lane];
    if (Aligned) {
      const float4 x = *reinterpret_cast<const float4*>(in);
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else {
TURBO3_UNROLL
      for (int k = 0; k < rotate_values_per_lane; ++k) v[k] = in[k];
    }
    // The channel scale comes before the forward rotation and after the inverse one.
    if (channel_scale && dir == rotation_direction::forward)
TURBO3_UNROLL
      for (int k = 0; k < rotate_values_per_lane; ++k) v[k] = platform::mul_rn(v[k], channel_scale[first + k]);
    rotate_lane_values(v, lane, dir);
    if (channel_scale && dir == rotation_direction::inverse)
TURBO3_UNROLL
      for (int k = 0; k < rotate_values_per_lane; ++k) v[k] = platform::mul_rn(v[k], channel_scale[first + k]);
    float* out = dst + g * block_values + first;
    if (Aligned) {
      *reinterpret_cast<float4*>(out) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
TURBO3_UNROLL
      for (int k = 0; k < rotate_values_per_lane; ++k) out[k] = v[k];
    }
  }
}

}  // namespace detail

// Checks arguments without touching the device: null pointers, a negative count, f32 alignment,
// a byte count within 2^63 - 1, and src and dst either the same (in place) or disjoint.
inline status validate_rotate(const float* src, float* dst, int64_t n_groups) {
  if (!src || !dst || n_groups < 0) return status::invalid_argument;
  if (!detail::is_aligned(src, alignof(float)) || !detail::is_aligned(dst, alignof(float))) return status::invalid_argument;
  if (n_groups > INT64_MAX / (block_values * static_cast<int64_t>(sizeof(float)))) return status::invalid_argument;
  const size_t bytes = static_cast<size_t>(n_groups) * block_values * sizeof(float);
  if (src != dst && detail::ranges_overlap(src, bytes, dst, bytes)) return status::invalid_argument;
  return status::ok;
}

// dst[g] = R src[g] (forward) or R^T src[g] (inverse) for n_groups groups of 128 floats, back to
// back; src == dst rotates in place. channel_scale, when not null, holds 128 device floats that
// multiply each value before the forward rotation and after the inverse one (the forks' InnerQ
// factors). One kernel on `stream`; no allocation, no synchronization (graph-capture safe).
inline status rotate_groups(const float* src, float* dst, int64_t n_groups, rotation_direction dir,
                            const float* channel_scale, hipStream_t stream) {
  const status s = validate_rotate(src, dst, n_groups);
  if (s != status::ok) return s;
  if (dir != rotation_direction::forward && dir != rotation_direction::inverse) return status::invalid_argument;
  if (channel_scale && !detail::is_aligned(channel_scale, alignof(float))) return status::invalid_argument;
  if (n_groups == 0) return status::ok;
  const platform::error_scope errors;
  constexpr int64_t groups_per_block = detail::rotate_threads / detail::rotate_lanes_per_group;
  constexpr int64_t max_blocks = 65535;
  const int64_t blocks = (n_groups + groups_per_block - 1) / groups_per_block;
  const unsigned grid = static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
  if (detail::is_aligned(src, 16) && detail::is_aligned(dst, 16))
    detail::rotate_groups_kernel<true><<<grid, detail::rotate_threads, 0, stream>>>(src, dst, n_groups, dir, channel_scale);
  else
    detail::rotate_groups_kernel<false><<<grid, detail::rotate_threads, 0, stream>>>(src, dst, n_groups, dir, channel_scale);
  return errors.launches_ok() ? status::ok : status::runtime_error;
}

}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
