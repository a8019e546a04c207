// flash_attention: validation, routing, workspace from the caller's allocator, launches on the
// caller's stream. Never allocates on its own, never synchronizes: safe inside graph capture with
// a capture-safe allocator. This header only validates, routes and checks the allocator against
// capture once; each kernel family answers the rest through its entry point (vec_launch.hpp,
// tile.hpp, materialize.hpp, mma_launch.hpp: supported, plan, workspace_bytes, launch).
//
// Compiling the kernels once per program: by default each translation unit that includes this
// header compiles every kernel (header-only). A program with several such units may define
// TURBO3_KERNELS_EXTERN in all of them but one and TURBO3_KERNELS_DEFINE in that one. The first
// kind then sees only declarations of the entry points below (route, supported, workspace_bytes,
// counter_bytes, init and the routed launch behind flash_attention) and none of the kernel headers;
// the second defines them, non-inline. flash_attention stays a template over the allocator and
// reaches the compiled launch through detail::workspace_source.
#pragma once

#include <cstddef>
#include <type_traits>

#include "turbo3/attention/options.hpp"
#include "turbo3/attention/params.hpp"
#include "turbo3/attention/prefill_route.hpp"
#include "turbo3/attention/validate.hpp"
#include "turbo3/memory.hpp"
#include "turbo3/platform/arch.hpp"
#include "turbo3/status.hpp"

#if defined(TURBO3_KERNELS_EXTERN) && defined(TURBO3_KERNELS_DEFINE)
#error "turbo3: define TURBO3_KERNELS_EXTERN or TURBO3_KERNELS_DEFINE in a translation unit, not both"
#endif
#if !defined(TURBO3_KERNELS_EXTERN)
#include "turbo3/attention/materialize.hpp"
#include "turbo3/attention/mma_launch.hpp"
#include "turbo3/attention/tile.hpp"
#include "turbo3/attention/vec_launch.hpp"
#endif
#if defined(TURBO3_KERNELS_DEFINE)
#define TURBO3_KERNEL_ENTRY
#else
#define TURBO3_KERNEL_ENTRY inline
#endif

#if TURBO3_HAS_RUNTIME

namespace turbo3 {

namespace detail {

// validate(p) and validate_options(opt): the checks every public entry point makes first.
inline status validate_call(const attention_params& p, const launch_options& opt) {
  const status s = validate(p);
  return s != status::ok ? s : validate_options(opt);
}

// The caller's allocator as the compiled launch sees it: its capture check and its two calls.
struct workspace_source {
  void* allocator;
  status (*check_capture)(void* allocator, hipStream_t stream);
  void* (*allocate)(void* allocator, size_t bytes, hipStream_t stream);
  void (*deallocate)(void* allocator, void* ptr, size_t bytes, hipStream_t stream);
};

template <class Allocator>
workspace_source workspace_source_of(Allocator& allocator) {
  return {&allocator, [](void* a, hipStream_t s) { return check_capture(*static_cast<Allocator*>(a), s); },
          [](void* a, size_t bytes, hipStream_t s) { return static_cast<Allocator*>(a)->allocate(bytes, s); },
          [](void* a, void* ptr, size_t bytes, hipStream_t s) {
            static_cast<Allocator*>(a)->deallocate(ptr, bytes, s);
          }};
}

#if defined(TURBO3_KERNELS_EXTERN)

// A validated call on `device` (the stream's), routed and run through its family.
status run_routed(const attention_params& p, const launch_options& opt, const workspace_source& source, int device,
                  hipStream_t stream);

}  // namespace detail

// The kernel family flash_attention(p, ..., opt) runs for a valid p on the current device.
kernel_choice route(const attention_params& p, const launch_options& opt = {});

// ok when flash_attention(p, ..., opt) would launch its kernels on the current device: p and opt
// are valid and the kernel family it routes to covers the shape and types; otherwise what
// flash_attention would return (invalid_argument or unsupported) without launching anything.
// Engines ask it to decide, before they plan memory, which nodes go to the library and which stay
// on their own kernels.
status supported(const attention_params& p, const launch_options& opt = {});

// Bytes of workspace flash_attention will ask the allocator for with these params and options on
// the current device (0 for invalid or unsupported input). VEC: the split-KV partials, O(n_seq *
// n_head * n_q * splits * D) floats, independent of n_kv beyond the split count (at most 256
// splits). TILE: none. MMA: with a key split, its partial rows, n_seq * n_head * n_q * splits *
// (D + 8) floats (at most 64 splits); none without. Materialize: the dense f16 copies, n_seq *
// n_head_kv * n_kv * D * 2 bytes per copied view.
size_t workspace_bytes(const attention_params& p, const launch_options& opt = {});

// Bytes of caller-owned counter memory (launch_options::counters) a call needs; 0 where its kernel
// keeps no counters (every route but the warp decode kernel) or the input is invalid.
size_t counter_bytes(const attention_params& p, const launch_options& opt = {});

// One-time setup of `device` outside any capture: caches its properties and the occupancy of every
// VEC kernel the split planner may ask about there (otherwise each is queried on its first use),
// with `device` made current for the queries and the caller's current device restored after.
// Every cache is per device. runtime_error where the device cannot be made current or queried.
status init(int device);

#else  // the entry points, defined

// The route of a call on `device` (its family decides whether MMA is the default prefill route).
inline kernel_choice route_on(const attention_params& p, const launch_options& opt, int device) {
  if (opt.kernel != kernel_choice::automatic) return opt.kernel;
  const bool tile_types = has_tile_loader(p.k.type) && has_tile_loader(p.v.type);
  if (p.n_q() <= 2) {
    // q8_0 at D = 64, which VEC has no kernel for, decodes through materialize.
    if (!tile_types && vec_supported(p) != status::ok && materialize_supported(p) == status::ok)
      return kernel_choice::materialize;
    return kernel_choice::vec;
  }
  const bool nvidia = mma_by_default(platform::device_family(device));
  if (nvidia && vec_takes_verify_batch(p)) return kernel_choice::vec;
  // Verify batches the decode kernel takes: over turbo4, turbo2 or q8_0, materialize would copy the
  // whole cache to f16 for a few rows (n_kv x D x 4 bytes per KV head of workspace); at D = 512,
  // TILE (no MMA kernel has that head dim) has no key split, so a few rows per KV head would walk
  // every key in one or two work-groups, where VEC splits the keys over the device.
  const bool verify_on_vec = !tile_types || p.head_dim_k() == 512;
  if (verify_on_vec && p.n_q() <= vec_verify_max_queries && vec_supported(p) == status::ok) return kernel_choice::vec;
  if (nvidia && mma_supported(p) == status::ok) return kernel_choice::mma;
  if (tile_supported(p) == status::ok) return kernel_choice::tile;
  // turbo4, turbo2 and q8_0 prefill at D = 512 stays on VEC: materialize's dense call there runs
  // TILE, at pp2048 on par for turbo4, 1.15x faster for q8_0 keys and 2.1x slower for turbo2, and
  // its copies take 2 KB per key and KV head (docs/performance.md, materialize).
  if (p.head_dim_k() != 512 && materialize_supported(p) == status::ok) return kernel_choice::materialize;
  return kernel_choice::vec;  // and MLA's cache (D_k 640, D_v 512) at any n_q
}

// f(Family{}) for the family of a route.
template <class F>
auto with_family(kernel_choice k, F&& f) {
  switch (k) {
    case kernel_choice::mma: return f(mma_family{});
    case kernel_choice::tile: return f(tile_family{});
    case kernel_choice::materialize: return f(materialize_family{});
    default: return f(vec_family{});
  }
}

// The plan of a valid call on `device` through its family; unsupported or invalid_argument where
// the family does not take it or refuses its options.
template <class Family>
status plan_call(const attention_params& p, const launch_options& opt, int device, typename Family::plan_type& plan) {
  const status s = Family::supported(p);
  return s != status::ok ? s : Family::plan(p, opt, device, plan);
}

// A validated call through its family: supported and planned, the allocator checked against
// capture, the plan's workspace from the allocator for the launch and back after it.
template <class Family>
status run_family(const attention_params& p, const launch_options& opt, const workspace_source& source, int device,
                  hipStream_t stream) {
  typename Family::plan_type plan{};
  status s = plan_call<Family>(p, opt, device, plan);
  if (s != status::ok) return s;
  s = source.check_capture(source.allocator, stream);
  if (s != status::ok) return s;
  const size_t bytes = Family::workspace_bytes(plan);
  void* workspace = nullptr;
  if (bytes > 0) {
    workspace = source.allocate(source.allocator, bytes, stream);
    if (!workspace) return status::out_of_memory;
  }
  s = Family::launch(p, plan, workspace, device, stream);
  if (workspace) source.deallocate(source.allocator, workspace, bytes, stream);
  return s;
}

// A validated call on `device` (the stream's), routed and run through its family.
TURBO3_KERNEL_ENTRY status run_routed(const attention_params& p, const launch_options& opt,
                                      const workspace_source& source, int device, hipStream_t stream) {
  return with_family(route_on(p, opt, device),
                     [&](auto family) { return run_family<decltype(family)>(p, opt, source, device, stream); });
}

}  // namespace detail

// The kernel family flash_attention(p, ..., opt) runs for a valid p on the current device.
TURBO3_KERNEL_ENTRY kernel_choice route(const attention_params& p, const launch_options& opt = {}) {
  return detail::route_on(p, opt, platform::current_device());
}

// ok when flash_attention(p, ..., opt) would launch its kernels on the current device: p and opt
// are valid and the kernel family it routes to covers the shape and types; otherwise what
// flash_attention would return (invalid_argument or unsupported) without launching anything.
// Engines ask it to decide, before they plan memory, which nodes go to the library and which stay
// on their own kernels.
TURBO3_KERNEL_ENTRY status supported(const attention_params& p, const launch_options& opt = {}) {
  const status s = detail::validate_call(p, opt);
  if (s != status::ok) return s;
  return detail::with_family(route(p, opt), [&](auto family) { return decltype(family)::supported(p); });
}

// Bytes of workspace flash_attention will ask the allocator for with these params and options on
// the current device (0 for invalid or unsupported input). VEC: the split-KV partials, O(n_seq *
// n_head * n_q * splits * D) floats, independent of n_kv beyond the split count (at most 256
// splits). TILE: none. MMA: with a key split, its partial rows, n_seq * n_head * n_q * splits *
// (D + 8) floats (at most 64 splits); none without. Materialize: the dense f16 copies, n_seq *
// n_head_kv * n_kv * D * 2 bytes per copied view.
TURBO3_KERNEL_ENTRY size_t workspace_bytes(const attention_params& p, const launch_options& opt = {}) {
  if (detail::validate_call(p, opt) != status::ok) return 0;
  const int device = platform::current_device();
  return detail::with_family(detail::route_on(p, opt, device), [&](auto family) -> size_t {
    using Family = decltype(family);
    typename Family::plan_type plan{};
    return detail::plan_call<Family>(p, opt, device, plan) == status::ok ? Family::workspace_bytes(plan) : 0;
  });
}

// Bytes of caller-owned counter memory (launch_options::counters) a call needs; 0 where its kernel
// keeps no counters (every route but the warp decode kernel) or the input is invalid.
TURBO3_KERNEL_ENTRY size_t counter_bytes(const attention_params& p, const launch_options& opt = {}) {
  if (detail::validate_call(p, opt) != status::ok) return 0;
  const int device = platform::current_device();
  if (detail::route_on(p, opt, device) != kernel_choice::vec || detail::vec_supported(p) != status::ok) return 0;
  return detail::vec_counter_bytes(detail::make_vec_plan(p, opt, device));
}

// One-time setup of `device` outside any capture: caches its properties and the occupancy of every
// VEC kernel the split planner may ask about there (otherwise each is queried on its first use),
// with `device` made current for the queries and the caller's current device restored after.
// Every cache is per device. runtime_error where the device cannot be made current or queried.
TURBO3_KERNEL_ENTRY status init(int device) {
  const platform::device_guard on_device(device);
  if (!on_device.ok()) return status::runtime_error;
  (void)platform::device_family(device);
  (void)platform::warpgroup_mma_available(device);
  // Scalar kernels: q8_0 stands for every pair with a turbo4, turbo2 or q8_0 side (one kernel per
  // head dim and row count, kv::any_loader, each queried once); warp kernels: a kernel per pair of
  // vec_warp_types (the turbo pairs, q8_0 K with turbo3 V).
  const data_type types[5] = {data_type::f16, data_type::turbo3, data_type::turbo4, data_type::turbo2, data_type::q8_0};
  for (int d : {64, 128, 256, 512})
    for (data_type k : types)
      for (data_type v : types) {
        if (d == 64 && (k != data_type::f16 || v != data_type::f16)) continue;
        detail::vec_plan plan;
        plan.head_dim = d;
        for (vec_variant variant : {vec_variant::scalar, vec_variant::matrix, vec_variant::warp})
          for (int rows : {1, 2, 4, 8, 16})
            for (bool masked : {false, true}) {
              if (variant != vec_variant::scalar && rows != 8) continue;  // their rows are fixed
              if (masked && variant != vec_variant::warp) continue;        // one kernel either way
              plan.variant = variant;
              plan.rows = rows;
              (void)detail::vec_resident_blocks(plan, k, v, masked, device);
            }
      }
  const platform::error_scope errors;
  int multiprocessors = 0;
  if (hipDeviceGetAttribute(&multiprocessors, hipDeviceAttributeMultiprocessorCount, device) != hipSuccess) {
    errors.clear_own();
    return status::runtime_error;
  }
  (void)platform::multiprocessor_count(device);
  return status::ok;
}

#endif  // TURBO3_KERNELS_EXTERN

template <class Allocator>
status flash_attention(const attention_params& p, Allocator& allocator, hipStream_t stream,
                       const launch_options& opt = {}) {
  static_assert(is_allocator_v<Allocator>, "flash_attention: Allocator does not model the allocator concept");
  const status s = detail::validate_call(p, opt);
  if (s != status::ok) return s;
  const int device = platform::stream_device(stream);  // routing and planning are for the stream's device
  return detail::run_routed(p, opt, detail::workspace_source_of(allocator), device, stream);
}

}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
