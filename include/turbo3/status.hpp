// Result codes of every public device-side entry point.
#pragma once

namespace turbo3 {

enum class status {
  ok,
  invalid_argument,  // null pointer, bad size or stride, shapes that disagree
  unsupported,       // valid request this build or kernel does not handle (type, head dim, ...)
  out_of_memory,     // the caller's allocator returned null
  capture_unsafe,    // the stream is capturing and the allocator is not capture-safe
  runtime_error,     // a HIP runtime call or a launch failed
};

inline const char* to_string(status s) {
  switch (s) {
    case status::ok: return "ok";
    case status::invalid_argument: return "invalid_argument";
    case status::unsupported: return "unsupported";
    case status::out_of_memory: return "out_of_memory";
    case status::capture_unsafe: return "capture_unsafe";
    case status::runtime_error: return "runtime_error";
  }
  return "unknown";
}

}  // namespace turbo3
