// The one translation unit of the GPU tests that compiles the kernels behind the launchers; the
// others include the library with TURBO3_KERNELS_EXTERN (tests/CMakeLists.txt) and link to these.
#define TURBO3_KERNELS_DEFINE
#include "turbo3/turbo3.hpp"
