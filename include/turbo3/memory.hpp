// Allocators for the library's temporary device memory (split-KV partials, materialized K/V).
//
// The allocator concept (what flash_attention<Allocator> needs):
//
//   void* allocate(size_t bytes, hipStream_t stream);   // nullptr on failure, never throws
//   void  deallocate(void* p, size_t bytes, hipStream_t stream);   // same bytes and stream
//   static constexpr bool capture_safe;   // true: never calls a capture-forbidden runtime function
//                                         // while `stream` is capturing
//
// Memory handed out for `stream` may be used by work queued on that stream until the matching
// deallocate(); stream-ordered allocators release it in stream order, so the caller may call
// deallocate() right after queueing the last kernel that reads it. No alignment is required: the
// library's requests include the slack to align inside them.
//
// Provided:
//   arena_allocator        bump allocator over caller memory; no allocation calls (it asks only
//                          whether a stream captures); capture-safe.
//   stream_pool_allocator  hipMallocAsync / hipMallocFromPoolAsync + hipFreeAsync; capture-safe.
//   device_allocator       hipMalloc / hipFree; NOT capture-safe (hipFree synchronizes).
//   adaptive_allocator     pool while capturing or for small requests, hipMalloc/hipFree for
//                          large eager requests so VRAM stays bounded; capture-safe.
//
// hipMalloc and hipFree run with this thread's capture mode relaxed (relaxed_capture_mode): while
// another thread captures in global mode they are otherwise refused and invalidate that capture.
// They are never called for memory a capture in progress on the call's stream may use: memory
// deallocated while its stream captures belongs to the graph and is freed only when the caller
// says the graphs are gone (release_deferred / release_held) or by the allocator's destructor.
// Helpers:
//   stream_is_capturing(stream, capturing)  hipStreamIsCapturing, as a status.
//   check_capture(allocator, stream)        capture_unsafe if the stream captures and the
//                                           allocator is not capture-safe (launchers call it first).
//   scoped_allocation<A>                    RAII: deallocates on scope exit on its stream.
//   is_allocator_v<A>                       compile-time check of the concept.
//
// None of the allocators is thread-safe: use one per thread (or per stream), or lock around it.
// A request of 0 bytes is served as 1 byte, so every success is a distinct non-null pointer.
// Failed runtime calls are reported through the return value; the runtime's "last error" they set
// is cleared so an engine's own error checks are not misled, unless the engine had left an error
// of its own pending there, which stays (platform::error_scope).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "turbo3/platform/device_state.hpp"
#include "turbo3/platform/runtime.hpp"
#include "turbo3/status.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {

// ---- capture state -------------------------------------------------------------------------------

// Sets `capturing` to whether work queued on `stream` now would be captured (status active or
// invalidated). A legacy-default-stream query while another stream captures in a mode that forbids
// touching it (hipErrorStreamCaptureImplicit) also counts as capturing: using that stream is just
// as forbidden. Any other failure: runtime_error, capturing = false.
inline status stream_is_capturing(hipStream_t stream, bool& capturing) {
  const platform::error_scope errors;
  hipStreamCaptureStatus cs = hipStreamCaptureStatusNone;
  const hipError_t e = hipStreamIsCapturing(stream, &cs);
  if (e == hipSuccess) {
    capturing = cs != hipStreamCaptureStatusNone;
    return status::ok;
  }
  errors.clear_own();
  if (e == hipErrorStreamCaptureImplicit) {
    capturing = true;
    return status::ok;
  }
  capturing = false;
  return status::runtime_error;
}

// Compile-time check of the allocator concept.
template <class A, class = void>
struct is_allocator : std::false_type {};
template <class A>
struct is_allocator<
    A, std::void_t<decltype(static_cast<void*>(std::declval<A&>().allocate(size_t{}, hipStream_t{}))),
                   decltype(std::declval<A&>().deallocate(static_cast<void*>(nullptr), size_t{},
                                                          hipStream_t{})),
                   decltype(static_cast<bool>(A::capture_safe))>> : std::true_type {};
template <class A>
inline constexpr bool is_allocator_v = is_allocator<A>::value;

// ok when the allocator may be used on `stream` now: it is capture-safe (no runtime query is made
// then), or the stream is not capturing. capture_unsafe when the stream captures and A is not
// capture-safe; runtime_error when the capture state cannot be read.
template <class A>
status check_capture(const A&, hipStream_t stream) {
  static_assert(is_allocator_v<A>, "check_capture: A does not model the allocator concept");
  if constexpr (A::capture_safe) {
    return status::ok;
  } else {
    bool capturing = false;
    const status s = stream_is_capturing(stream, capturing);
    if (s != status::ok) return s;
    return capturing ? status::capture_unsafe : status::ok;
  }
}

// ---- arena ---------------------------------------------------------------------------------------

// Bump allocator over memory the caller owns (device memory, normally). No allocation calls, hence
// capture-safe. Every sub-allocation starts on a 256-byte boundary (absolute address: the base is
// rounded up, which may cost up to 255 bytes of capacity) and occupies a multiple of 256 bytes.
// allocate() returns nullptr when the rest does not fit.
//
// deallocate() is LIFO: freeing the most recent live allocation rolls the top back, so a
// stack-like sequence (a, b, free b, free a) returns everything; freeing anything else is a no-op
// and the memory returns on reset(). Reuse is made safe by stream order only where there is one:
//  - Bytes a roll-back gave back are handed out again only on the stream that gave them back (its
//    later work runs after the work that used them). An allocation on another stream starts above
//    them (the bytes skipped return on reset()), so two streams, or two forked branches of one
//    capture (each branch is a stream), never share bytes.
//  - While the stream captures, deallocate() does not roll back: a graph may replay at any time,
//    on any stream, so every captured call keeps its own region until reset(). An arena that serves
//    a captured call next to eager ones needs room for both.
// reset() hands everything out again: call it only when no queued work and no graph that will
// replay again uses the arena's memory.
class arena_allocator {
 public:
  static constexpr bool capture_safe = true;
  static constexpr size_t alignment = 256;

  arena_allocator() = default;
  arena_allocator(void* memory, size_t bytes) noexcept {
    if (!memory) return;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(memory);
    const uintptr_t aligned = round_up(begin);
    if (aligned < begin || aligned - begin >= bytes) return;  // wrapped, or nothing left
    base_ = reinterpret_cast<unsigned char*>(aligned);
    capacity_ = (bytes - (aligned - begin)) / alignment * alignment;
  }

  void* allocate(size_t bytes, hipStream_t stream = nullptr) noexcept {
    const size_t need = footprint(bytes);
    const bool given_back_above = given_back_end_ > top_;
    const size_t start = given_back_above && (given_back_by_several_ || stream != given_back_by_) ? given_back_end_ : top_;
    if (need == 0 || start > capacity_ || need > capacity_ - start) return nullptr;  // 0: overflowed
    void* p = base_ + start;
    top_ = start + need;
    if (top_ >= given_back_end_) given_back_by_several_ = false;  // nothing given back above the top
    if (top_ > high_water_) high_water_ = top_;
    return p;
  }

  void deallocate(void* p, size_t bytes, hipStream_t stream = nullptr) noexcept {
    if (!p || !base_) return;
    const uintptr_t at = reinterpret_cast<uintptr_t>(p);
    const uintptr_t b = reinterpret_cast<uintptr_t>(base_);
    if (at < b || at - b >= top_) return;
    const size_t offset = static_cast<size_t>(at - b);
    if (offset + footprint(bytes) != top_) return;
    bool capturing = true;  // a failed query keeps the region, as under capture
    if (stream_is_capturing(stream, capturing) != status::ok || capturing) return;
    if (given_back_end_ > top_) {  // bytes given back above: now from this stream too
      if (stream != given_back_by_) given_back_by_several_ = true;
    } else {
      given_back_end_ = top_;
      given_back_by_ = stream;
      given_back_by_several_ = false;
    }
    top_ = offset;
  }

  void reset() noexcept {
    top_ = 0;
    given_back_end_ = 0;
    given_back_by_several_ = false;
  }

  void* base() const noexcept { return base_; }        // 256-aligned start of the usable range
  size_t capacity() const noexcept { return capacity_; }
  size_t used() const noexcept { return top_; }        // offset of the top: live, kept and skipped bytes
  size_t available() const noexcept { return capacity_ - top_; }
  size_t high_water() const noexcept { return high_water_; }  // most ever used since construction

  // Bytes a request occupies (0 when it would overflow). Use it to size the caller's buffer:
  // the sum of footprints plus alignment - 1 for an unaligned base.
  static constexpr size_t footprint(size_t bytes) noexcept {
    const size_t b = bytes == 0 ? 1 : bytes;
    return b > SIZE_MAX - (alignment - 1) ? 0 : (b + alignment - 1) / alignment * alignment;
  }

 private:
  static constexpr uintptr_t round_up(uintptr_t x) noexcept {
    return (x + (alignment - 1)) & ~static_cast<uintptr_t>(alignment - 1);
  }

  unsigned char* base_ = nullptr;
  size_t capacity_ = 0;
  size_t top_ = 0;
  size_t high_water_ = 0;
  // Bytes [top_, given_back_end_) were given back by roll-backs while work queued on
  // given_back_by_ (or, given_back_by_several_, on several streams) may still use them.
  size_t given_back_end_ = 0;
  hipStream_t given_back_by_ = nullptr;
  bool given_back_by_several_ = false;
};

// ---- stream-ordered pool -------------------------------------------------------------------------

// hipMallocAsync / hipFreeAsync on the given stream. Default-constructed it allocates from the
// current memory pool of the current device (the device's default pool unless the application
// replaced it with hipDeviceSetMemPool); given a pool it uses hipMallocFromPoolAsync. Both are
// stream-ordered and legal under capture (they become graph alloc/free nodes), so capture-safe.
// How much freed memory the pool keeps cached is the pool's release threshold (the caller's).
class stream_pool_allocator {
 public:
  static constexpr bool capture_safe = true;

  stream_pool_allocator() = default;
  explicit stream_pool_allocator(hipMemPool_t pool) noexcept : pool_(pool) {}

  void* allocate(size_t bytes, hipStream_t stream) noexcept {
    const platform::error_scope errors;
    void* p = nullptr;
    const size_t b = bytes == 0 ? 1 : bytes;
    const hipError_t e = pool_ ? hipMallocFromPoolAsync(&p, b, pool_, stream)
                               : hipMallocAsync(&p, b, stream);
    if (e != hipSuccess) {
      errors.clear_own();
      return nullptr;
    }
    return p;
  }

  void deallocate(void* p, size_t, hipStream_t stream) noexcept {
    if (!p) return;
    const platform::error_scope errors;
    if (hipFreeAsync(p, stream) != hipSuccess) errors.clear_own();
  }

  hipMemPool_t pool() const noexcept { return pool_; }  // nullptr: the device's current pool

 private:
  hipMemPool_t pool_ = nullptr;
};

// ---- plain device memory -------------------------------------------------------------------------

namespace detail {

// hipMalloc with this thread's capture mode relaxed (another thread's global-mode capture neither
// refuses it nor is invalidated by it); nullptr on failure, the library's own error cleared.
inline void* plain_malloc(size_t bytes) noexcept {
  const platform::error_scope errors;
  const platform::relaxed_capture_mode relaxed;
  void* p = nullptr;
  if (hipMalloc(&p, bytes == 0 ? 1 : bytes) != hipSuccess) {
    errors.clear_own();
    return nullptr;
  }
  return p;
}

// hipFree likewise; false when it failed (the pointer is still allocated).
inline bool plain_free(void* p) noexcept {
  const platform::error_scope errors;
  const platform::relaxed_capture_mode relaxed;
  if (hipFree(p) != hipSuccess) {
    errors.clear_own();
    return false;
  }
  return true;
}

// Device pointers an allocator could not hipFree yet, each either held for a graph (deallocated
// while its stream captured: the graph may read it on every replay, and only the caller knows when
// the graph is gone) or waiting for a retry (hipFree failed). At most `capacity`; past that a
// pointer is dropped and counted in dropped(), so nothing goes unreported.
class unfreed_pointers {
 public:
  static constexpr int capacity = 16;

  void add(void* p, bool graph_held) noexcept {
    for (entry& e : entries_)
      if (!e.ptr) {
        e = entry{p, graph_held};
        return;
      }
    ++dropped_;
  }
  // hipFree the pointers waiting for a retry (with graph_held too, every pointer).
  void free(bool graph_held) noexcept {
    for (entry& e : entries_)
      if (e.ptr && (graph_held || !e.graph_held) && plain_free(e.ptr)) e = entry{};
  }
  int count(bool graph_held) const noexcept {
    int n = 0;
    for (const entry& e : entries_) n += e.ptr && e.graph_held == graph_held;
    return n;
  }
  size_t dropped() const noexcept { return dropped_; }
  void take(unfreed_pointers& o) noexcept {
    for (int i = 0; i < capacity; ++i) {
      entries_[i] = o.entries_[i];
      o.entries_[i] = entry{};
    }
    dropped_ = o.dropped_;
    o.dropped_ = 0;
  }

 private:
  struct entry {
    void* ptr = nullptr;
    bool graph_held = false;
  };
  entry entries_[capacity];
  size_t dropped_ = 0;
};

}  // namespace detail

// hipMalloc / hipFree. Not capture-safe: hipFree synchronizes the device, so memory is never
// released under a running kernel, and it cannot run while the deallocating stream captures. A
// pointer deallocated then is held for the graph (held()) until release_held() or the destructor;
// a pointer whose hipFree fails is kept (retrying()) and freed again by the next allocate() or
// deallocate() on a stream that is not capturing, by release_held() or by the destructor. Movable,
// not copyable (it owns the pointers it keeps); destroy it after the graphs that hold its memory.
class device_allocator {
 public:
  static constexpr bool capture_safe = false;

  device_allocator() = default;
  device_allocator(const device_allocator&) = delete;
  device_allocator& operator=(const device_allocator&) = delete;
  device_allocator(device_allocator&& o) noexcept { unfreed_.take(o.unfreed_); }
  device_allocator& operator=(device_allocator&& o) noexcept {
    if (this != &o) {
      release_held();
      unfreed_.take(o.unfreed_);
    }
    return *this;
  }
  ~device_allocator() { release_held(); }

  void* allocate(size_t bytes, hipStream_t stream = nullptr) noexcept {
    bool capturing = true;
    if (unfreed_.count(false) > 0 && stream_is_capturing(stream, capturing) == status::ok && !capturing)
      unfreed_.free(false);
    return detail::plain_malloc(bytes);
  }

  void deallocate(void* p, size_t, hipStream_t stream = nullptr) noexcept {
    if (!p) return;
    bool capturing = true;  // a failed query holds the pointer, as under capture
    if (stream_is_capturing(stream, capturing) != status::ok || capturing) {
      unfreed_.add(p, true);
      return;
    }
    unfreed_.free(false);
    if (!detail::plain_free(p)) unfreed_.add(p, false);
  }

  // hipFree everything kept, held pointers included: call it once every graph captured while one
  // of them was deallocated is destroyed, and while no stream of this thread captures.
  void release_held() noexcept { unfreed_.free(true); }

  int held() const noexcept { return unfreed_.count(true); }        // deallocated under capture
  int retrying() const noexcept { return unfreed_.count(false); }   // hipFree failed, kept
  size_t dropped() const noexcept { return unfreed_.dropped(); }    // could not be kept (table full)

 private:
  detail::unfreed_pointers unfreed_;
};

// ---- adaptive policy -----------------------------------------------------------------------------

enum class alloc_route { none, pool, plain };

inline const char* to_string(alloc_route r) {
  return r == alloc_route::pool ? "pool" : r == alloc_route::plain ? "plain" : "none";
}

// The policy: a request goes to the stream-ordered pool when it is at most `threshold` bytes or
// the stream is capturing; a larger eager request goes to hipMalloc and is released with hipFree,
// which synchronizes the device, so a big workspace never lingers in a pool cache and VRAM stays
// bounded. Capture-safe: the plain route is only taken while the stream is not capturing.
//
// Route memory: the plain pointers live in a fixed table of max_plain entries inside the object
// (no heap allocation, no lookup on the small path except a scan of the live plain entries).
// deallocate() frees a pointer found in the table with hipFree and any other with hipFreeAsync.
// When the table is full, or hipMalloc fails (out of memory), a large request falls back to the
// pool. The capture state is queried only for requests above the threshold and for deallocation of
// plain pointers.
//
// Freeing a plain pointer while its stream captures (allocated eagerly, released inside a capture)
// cannot call hipFree, and the graph being captured may use the memory on every replay: the entry
// is marked deferred and stays until release_deferred() (the caller's word that such graphs are
// destroyed) or the destructor (destroy the allocator after them). A plain pointer whose hipFree
// fails stays in the table too and is freed again by the next eager large request or plain
// deallocation, or by release_deferred(); failed_frees() counts such failures.
//
// Movable, not copyable (the table owns the plain pointers' route).
class adaptive_allocator {
 public:
  static constexpr bool capture_safe = true;
  static constexpr size_t default_threshold = size_t{64} << 20;  // 64 MiB
  static constexpr int max_plain = 16;

  explicit adaptive_allocator(size_t threshold = default_threshold,
                              hipMemPool_t pool = nullptr) noexcept
      : threshold_(threshold), pool_(pool) {}

  adaptive_allocator(const adaptive_allocator&) = delete;
  adaptive_allocator& operator=(const adaptive_allocator&) = delete;
  adaptive_allocator(adaptive_allocator&& o) noexcept { take(o); }
  adaptive_allocator& operator=(adaptive_allocator&& o) noexcept {
    if (this != &o) {
      release_deferred();
      take(o);
    }
    return *this;
  }
  ~adaptive_allocator() { release_deferred(); }

  void* allocate(size_t bytes, hipStream_t stream) noexcept {
    if (bytes > threshold_) {
      bool capturing = true;  // on a failed query, stay on the capture-safe route
      if (stream_is_capturing(stream, capturing) == status::ok && !capturing) {
        retry_failed();
        if (void* p = allocate_plain(bytes)) return p;
      }
    }
    void* p = pool_.allocate(bytes, stream);
    if (p) {
      last_route_ = alloc_route::pool;
      ++pool_count_;
    }
    return p;
  }

  void deallocate(void* p, size_t bytes, hipStream_t stream) noexcept {
    if (!p) return;
    const int i = find_plain(p);
    if (i < 0) {
      pool_.deallocate(p, bytes, stream);
      return;
    }
    bool capturing = true;
    if (stream_is_capturing(stream, capturing) != status::ok || capturing) {
      plain_[i].state = plain_state::deferred;
      return;
    }
    retry_failed();
    free_plain(i);
  }

  // hipFree every plain allocation deallocated inside a capture (and any whose hipFree failed).
  // Call it once every graph captured while one of them was deallocated is destroyed, and while no
  // stream of this thread captures.
  void release_deferred() noexcept {
    for (int i = 0; i < max_plain; ++i)
      if (plain_[i].ptr && plain_[i].state != plain_state::live) free_plain(i);
  }

  size_t threshold() const noexcept { return threshold_; }
  void set_threshold(size_t bytes) noexcept { threshold_ = bytes; }

  // Observation, for tests and statistics: the route of the last successful allocate(), the
  // number of allocations each route served, plain allocations currently live (deferred ones and
  // failed frees included), deferred ones, and hipFree failures so far.
  alloc_route last_route() const noexcept { return last_route_; }
  size_t pool_count() const noexcept { return pool_count_; }
  size_t plain_count() const noexcept { return plain_count_; }
  int live_plain() const noexcept { return live_plain_; }
  int deferred_plain() const noexcept {
    int n = 0;
    for (const plain_entry& e : plain_) n += e.ptr && e.state == plain_state::deferred;
    return n;
  }
  size_t failed_frees() const noexcept { return failed_frees_; }

 private:
  enum class plain_state { live, deferred, free_failed };
  struct plain_entry {
    void* ptr = nullptr;
    plain_state state = plain_state::live;
  };

  void* allocate_plain(size_t bytes) noexcept {
    if (live_plain_ == max_plain) return nullptr;
    void* p = detail::plain_malloc(bytes);
    if (!p) return nullptr;
    for (int i = 0; i < max_plain; ++i) {
      if (!plain_[i].ptr) {
        plain_[i] = plain_entry{p, plain_state::live};
        break;
      }
    }
    ++live_plain_;
    ++plain_count_;
    last_route_ = alloc_route::plain;
    return p;
  }

  int find_plain(const void* p) const noexcept {
    if (live_plain_ == 0) return -1;
    for (int i = 0; i < max_plain; ++i)
      if (plain_[i].ptr == p && plain_[i].state != plain_state::free_failed) return i;
    return -1;
  }

  // hipFree of entries whose free failed before (never of deferred ones: a graph may use them).
  void retry_failed() noexcept {
    for (int i = 0; i < max_plain; ++i)
      if (plain_[i].ptr && plain_[i].state == plain_state::free_failed) free_plain(i);
  }

  void free_plain(int i) noexcept {
    if (!detail::plain_free(plain_[i].ptr)) {
      plain_[i].state = plain_state::free_failed;
      ++failed_frees_;
      return;
    }
    plain_[i] = plain_entry{};
    --live_plain_;
  }

  void take(adaptive_allocator& o) noexcept {
    threshold_ = o.threshold_;
    pool_ = o.pool_;
    for (int i = 0; i < max_plain; ++i) {
      plain_[i] = o.plain_[i];
      o.plain_[i] = plain_entry{};
    }
    live_plain_ = o.live_plain_;
    last_route_ = o.last_route_;
    pool_count_ = o.pool_count_;
    plain_count_ = o.plain_count_;
    failed_frees_ = o.failed_frees_;
    o.live_plain_ = 0;
  }

  size_t threshold_ = default_threshold;
  stream_pool_allocator pool_;
  plain_entry plain_[max_plain];
  int live_plain_ = 0;
  alloc_route last_route_ = alloc_route::none;
  size_t pool_count_ = 0;
  size_t plain_count_ = 0;
  size_t failed_frees_ = 0;
};

// ---- RAII ----------------------------------------------------------------------------------------

// Owns one allocation from an allocator (which must outlive it) and deallocates it on scope exit,
// on the stream it was allocated for. Check get() (or operator bool) for failure. Move-only.
template <class A>
class scoped_allocation {
  static_assert(is_allocator_v<A>, "scoped_allocation: A does not model the allocator concept");

 public:
  scoped_allocation() = default;
  scoped_allocation(A& allocator, size_t bytes, hipStream_t stream) noexcept
      : alloc_(&allocator), ptr_(allocator.allocate(bytes, stream)), bytes_(bytes),
        stream_(stream) {}

  scoped_allocation(const scoped_allocation&) = delete;
  scoped_allocation& operator=(const scoped_allocation&) = delete;
  scoped_allocation(scoped_allocation&& o) noexcept
      : alloc_(o.alloc_), ptr_(o.ptr_), bytes_(o.bytes_), stream_(o.stream_) {
    o.ptr_ = nullptr;
  }
  scoped_allocation& operator=(scoped_allocation&& o) noexcept {
    if (this != &o) {
      reset();
      alloc_ = o.alloc_;
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      stream_ = o.stream_;
      o.ptr_ = nullptr;
    }
    return *this;
  }
  ~scoped_allocation() { reset(); }

  void* get() const noexcept { return ptr_; }
  template <class T>
  T* as() const noexcept { return static_cast<T*>(ptr_); }
  size_t size() const noexcept { return bytes_; }
  hipStream_t stream() const noexcept { return stream_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }

  // Deallocate now (stream-ordered for the pool allocators).
  void reset() noexcept {
    if (ptr_) alloc_->deallocate(ptr_, bytes_, stream_);
    ptr_ = nullptr;
  }
  // Give up ownership; the caller deallocates.
  void* release() noexcept {
    void* p = ptr_;
    ptr_ = nullptr;
    return p;
  }

 private:
  A* alloc_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  hipStream_t stream_ = nullptr;
};

}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
