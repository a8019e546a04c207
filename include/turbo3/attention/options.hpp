// The choices a caller can make about how flash_attention runs: which kernel family and variant,
// the split-KV count, caller-owned decode counters. Every choice has one enum.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/status.hpp"

namespace turbo3 {

enum class kernel_choice {
  automatic,    // n_q <= 2 (and turbo3 verify batches of <= 16 rows per KV head on NVIDIA): vec; else mma
                // where the device runs it by default and the shape is covered, else tile where it
                // applies, else materialize, else vec (turbo4, turbo2 or q8_0 K/V: vec up to
                // vec_verify_max_queries rows and at D = 512, else materialize; D = 512 with f16 and
                // turbo3 K/V: vec up to vec_verify_max_queries rows, else tile; MLA's cache: vec)
  vec,          // force the decode kernel for any n_q (the "VEC for prefill" baseline)
  tile,         // force the scalar prefill kernel (D 64/128/256/512)
  materialize,  // force dequantize-to-f16, then the device's default f16 prefill kernel over the copies
                // (mma on NVIDIA at D 128/256, else tile)
  mma,          // force the matrix-core prefill kernel (D 128/256)
};

// Which decode (VEC) kernel runs. Each falls back to `scalar` where it does not apply.
enum class vec_variant {
  automatic,  // `warp` where it applies, else `scalar`
  scalar,     // FMA kernel: every head dim, K/V type pair and row count (the only one for q8_0
              // V, for q8_0 K with other than turbo3 V and for turbo4 with turbo2)
  matrix,     // block-synchronous matrix-instruction kernel (NVIDIA; D 128/256, up to 8 rows)
  warp,       // warp-owned key ranges, asynchronous staging, matrix instructions (NVIDIA; K and
              // V each turbo3, turbo2 or turbo4, one type or turbo3 with another, or q8_0 K with
              // turbo3 V; D 128/256 up to 8 rows a work-group, 16 for turbo3 K and V; D 512 up
              // to 4)
};

// Which matrix-core prefill (MMA) kernel runs. `warpgroup` falls back to `fragment` where it does
// not apply.
enum class mma_variant {
  automatic,  // where warpgroup multiplies apply: `warp_specialized` (the faster form:
              // docs/performance.md, MMA); elsewhere `fragment`
  fragment,   // 16x16x16 fragment multiplies (every matrix-core target)
  warpgroup,  // warpgroup multiplies from shared memory, two warpgroups that fill the K/V tiles and
              // multiply (NVIDIA sm_90 in builds for sm_90a that define TURBO3_WARPGROUP_MMA_BUILT;
              // D 128 or 256, K and V both f16 or both turbo3)
  warp_specialized,  // warpgroup multiplies with producer warpgroups (two for turbo3, one for f16)
                     // that fill the K/V tiles while two others only multiply and run the softmax
                     // (same coverage)
};

struct launch_options {
  kernel_choice kernel = kernel_choice::automatic;
  // Split-KV count of the decode (VEC) and matrix-core prefill (MMA) kernels; 0 chooses from the
  // device's multiprocessor count (MMA: splits only where the call's work-groups leave the device
  // partly idle, mma_kv_splits). Capped at each family's maximum and at one split per key tile.
  int kv_splits = 0;
  vec_variant vec = vec_variant::automatic;
  mma_variant mma = mma_variant::automatic;
  // Optional caller-owned counter memory for the decode kernels that count their splits and hand
  // out their keys at run time (the warp variant): at least counter_bytes(params, options) bytes,
  // 128-byte aligned, all zero before the first call that passes it, and used by one stream at a
  // time. Such a call takes its counters from it and leaves them zero, and queues no zeroing
  // kernel in front of its own (a graph node fewer per call: 1.3-2.3 us on an H200). nullptr: the
  // counters live in the workspace and are zeroed before every launch.
  void* counters = nullptr;
  size_t counters_bytes = 0;
};

namespace detail {

// The most query rows a verify batch over turbo4, turbo2 or q8_0 K/V sends to the decode kernel
// (speculative decoding verifies 2-16 rows); the router's rule, here so that code compiled with
// TURBO3_KERNELS_EXTERN sees it too.
inline constexpr int64_t vec_verify_max_queries = 16;

// launch_options within range: each enum one of its named values (an enum object may hold any
// value of its underlying type), kv_splits >= 0 (0: chosen from the device; above vec_max_splits
// it is capped). invalid_argument otherwise, before anything else happens.
inline status validate_options(const launch_options& opt) {
  switch (opt.kernel) {
    case kernel_choice::automatic: case kernel_choice::vec: case kernel_choice::tile:
    case kernel_choice::materialize: case kernel_choice::mma: break;
    default: return status::invalid_argument;
  }
  switch (opt.vec) {
    case vec_variant::automatic: case vec_variant::scalar: case vec_variant::matrix: case vec_variant::warp: break;
    default: return status::invalid_argument;
  }
  switch (opt.mma) {
    case mma_variant::automatic: case mma_variant::fragment: case mma_variant::warpgroup:
    case mma_variant::warp_specialized: break;
    default: return status::invalid_argument;
  }
  if (opt.kv_splits < 0) return status::invalid_argument;
  return status::ok;
}

}  // namespace detail
}  // namespace turbo3
