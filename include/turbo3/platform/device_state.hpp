// Host-side state the library reads from the runtime or keeps per device:
//
//   per_device_value      one int per device number (any number), computed on first use, kept only
//                         when the computation succeeds (plain C++: no runtime needed)
//   error_scope           the runtime's per-thread last error, read without clearing one the caller
//                         left pending
//   current_device, stream_device, device_guard
//                         which device a call is for; making a device current for a while
//   relaxed_capture_mode  this thread's capture interaction mode relaxed for one runtime call
//   multiprocessor_count  a device's multiprocessors (compute units), read once per device
//   raise_smem_limit, resident_blocks
//                         a kernel's dynamic shared-memory limit; its work-groups per multiprocessor
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "turbo3/platform/runtime.hpp"

namespace turbo3 {
namespace platform {

// One int per device: get() returns the value kept for the device or asks compute(int&) -> bool
// and keeps its value when it succeeds. A failed computation keeps nothing, so the next call asks
// again (a device that was busy, or not yet set up, is not stuck with a fallback). Any device
// number >= 0 is kept: the first 64 in lock-free slots, others in a map under a mutex. Two
// threads may compute the same value at once; both keep the same value. A function-local static
// per kernel template makes the key (device, kernel).
class per_device_value {
 public:
  template <class Compute>
  bool get(int device, int& value, Compute&& compute) {
    if (device < 0) return false;
    if (find(device, value)) return true;
    int computed = 0;
    if (!compute(computed)) return false;
    keep(device, computed);
    value = computed;
    return true;
  }

  // Whether a value is kept for `device` (for tests).
  bool has(int device) {
    int unused = 0;
    return device >= 0 && find(device, unused);
  }

 private:
  static constexpr int slot_devices = 64;
  static constexpr int64_t known = int64_t{1} << 32;  // slot bit: a value is kept

  bool find(int device, int& value) {
    if (device < slot_devices) {
      const int64_t slot = slots_[device].load(std::memory_order_acquire);
      if ((slot & known) == 0) return false;
      value = static_cast<int32_t>(static_cast<uint32_t>(slot & 0xffffffff));
      return true;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = others_.find(device);
    if (it == others_.end()) return false;
    value = it->second;
    return true;
  }

  void keep(int device, int value) {
    if (device < slot_devices) {
      slots_[device].store(known | static_cast<int64_t>(static_cast<uint32_t>(value)), std::memory_order_release);
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    others_[device] = value;
  }

  std::atomic<int64_t> slots_[slot_devices] = {};
  std::mutex mutex_;
  std::unordered_map<int, int> others_;
};

#if TURBO3_HAS_RUNTIME

// The runtime keeps one "last error" per host thread: a failed call or launch sets it, and
// hipGetLastError reads and clears it. An error the caller left there is the caller's, for its own
// later check: the library never clears it and never takes it for a failure of its own. An
// error_scope peeks at the last error (hipPeekAtLastError does not clear it) where the library
// starts; after its calls and launches, a different error is the library's.
class error_scope {
 public:
  error_scope() noexcept : entry_(hipPeekAtLastError()) {}

  // Whether a call or launch since construction failed: the last error is an error now, and not
  // the one the caller left (a failure with that very code cannot be told apart from it).
  bool failed() const noexcept {
    const hipError_t now = hipPeekAtLastError();
    return now != hipSuccess && now != entry_;
  }

  // Clears the library's own error, once reported through a status, so that it does not surface
  // in an unrelated check of the caller's. Where the caller left one pending nothing is cleared.
  void clear_own() const noexcept {
    if (entry_ == hipSuccess) (void)hipGetLastError();
  }

  // After a run of launches: true when none failed; else the failure is cleared (clear_own).
  bool launches_ok() const noexcept {
    if (!failed()) return true;
    clear_own();
    return false;
  }

 private:
  hipError_t entry_;
};

// The current device of this thread; -1 when the runtime cannot say (no device, no driver).
inline int current_device() noexcept {
  const error_scope errors;
  int device = -1;
  if (hipGetDevice(&device) != hipSuccess) {
    errors.clear_own();
    return -1;
  }
  return device;
}

// Whether `stream` is one of the default streams (legacy or per-thread), which belong to whatever
// device is current when work is queued on them.
inline bool is_default_stream(hipStream_t stream) noexcept {
#if defined(TURBO3_PLATFORM_CUDA)
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
#else
  return stream == nullptr || stream == hipStreamPerThread;
#endif
}

// The device whose work `stream` queues: the runtime's answer where it has the query (CUDA 12.8+,
// HIP 6+) and the stream is neither a default stream nor capturing; else the current device. -1
// when neither can be read. The runtime refuses the query on a capturing stream, and the refusal
// invalidates the capture; a launch into a stream needs its device current anyway, so the current
// device is the stream's there.
inline int stream_device(hipStream_t stream) noexcept {
#if defined(TURBO3_HAS_STREAM_GET_DEVICE)
  if (!is_default_stream(stream)) {
    const error_scope errors;
    hipStreamCaptureStatus capture = hipStreamCaptureStatusNone;
    int device = -1;
    if (hipStreamIsCapturing(stream, &capture) == hipSuccess && capture == hipStreamCaptureStatusNone &&
        hipStreamGetDevice(stream, &device) == hipSuccess && device >= 0)
      return device;
    errors.clear_own();
  }
#else
  (void)stream;
#endif
  return current_device();
}

// Makes `device` current for the guard's lifetime and then restores the caller's current device.
// Where `device` already is current it makes no runtime call at all. ok(): `device` is current.
class device_guard {
 public:
  explicit device_guard(int device) noexcept : previous_(current_device()) {
    if (device < 0) return;
    if (device == previous_) {
      ok_ = true;
      return;
    }
    const error_scope errors;
    if (hipSetDevice(device) != hipSuccess) {
      errors.clear_own();
      return;
    }
    switched_ = ok_ = true;
  }
  ~device_guard() {
    if (!switched_ || previous_ < 0) return;
    const error_scope errors;
    if (hipSetDevice(previous_) != hipSuccess) errors.clear_own();
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

  bool ok() const noexcept { return ok_; }

 private:
  int previous_;
  bool switched_ = false;
  bool ok_ = false;
};

// Sets this thread's stream-capture interaction mode to relaxed for the guard's lifetime. While
// another thread captures in global mode (or this thread captures), hipMalloc and hipFree are
// "potentially unsafe" calls: in the default mode they fail and the capture is invalidated. In
// relaxed mode they are allowed; the allocators use it only around those calls, and only for memory
// that no capture in progress on the call's own stream can refer to (memory.hpp).
class relaxed_capture_mode {
 public:
  relaxed_capture_mode() noexcept {
    const error_scope errors;
    ok_ = hipThreadExchangeStreamCaptureMode(&mode_) == hipSuccess;
    if (!ok_) errors.clear_own();
  }
  ~relaxed_capture_mode() {
    if (!ok_) return;
    const error_scope errors;
    if (hipThreadExchangeStreamCaptureMode(&mode_) != hipSuccess) errors.clear_own();
  }
  relaxed_capture_mode(const relaxed_capture_mode&) = delete;
  relaxed_capture_mode& operator=(const relaxed_capture_mode&) = delete;

 private:
  hipStreamCaptureMode mode_ = hipStreamCaptureModeRelaxed;  // the caller's mode after the exchange
  bool ok_ = false;
};

// Multiprocessor count of a device, read once per device (eagerly, or on first use: the attribute
// query is not a stream operation, so it is legal under capture too). Where the query fails the
// count is not kept and 80 is planned with this time (correctness does not depend on it).
inline int multiprocessor_count(int device) {
  static per_device_value counts;
  int v = 0;
  const bool known = counts.get(device, v, [&](int& count) {
    const error_scope errors;
    if (hipDeviceGetAttribute(&count, hipDeviceAttributeMultiprocessorCount, device) != hipSuccess) {
      errors.clear_own();
      return false;
    }
    return count > 0;
  });
  return known ? v : 80;
}

// Shared memory past the default 48 KB needs a kernel's limit raised on each device it runs on (the
// attribute applies to the current device). Not a stream operation, so legal under capture; the
// callers keep the result per (device, kernel) and call it with that device current.
template <class Kernel>
bool raise_smem_limit(Kernel* kernel, size_t smem_bytes) {
  const error_scope errors;
  if (hipFuncSetAttribute(reinterpret_cast<const void*>(kernel), hipFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(smem_bytes)) == hipSuccess)
    return true;
  errors.clear_own();
  return false;
}

// Work-groups of a kernel resident per multiprocessor on the current device, or -1 where the
// query fails (registers and shared memory decide it, and they differ between architectures).
template <class Kernel>
int resident_blocks(Kernel kernel, int threads, size_t smem_bytes) {
  const error_scope errors;
  int n = 0;
  if (hipOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem_bytes) != hipSuccess || n < 0) {
    errors.clear_own();
    return -1;
  }
  return n;
}

#endif  // TURBO3_HAS_RUNTIME

}  // namespace platform
}  // namespace turbo3
