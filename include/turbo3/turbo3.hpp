// turbo3: flash attention over a 3-bit TurboQuant KV cache. Umbrella header.
//
// Plain C++ gets the format, the host quantizer and the CPU reference. Compiled as HIP (or CUDA
// through nvcc) it also gets the device kernels, the allocators and the launchers.
#pragma once

#include "turbo3/version.hpp"
#include "turbo3/status.hpp"
#include "turbo3/types.hpp"
#include "turbo3/format/block.hpp"
#include "turbo3/format/block_q8_0.hpp"
#include "turbo3/format/block_turbo2.hpp"
#include "turbo3/format/block_turbo4.hpp"
#include "turbo3/format/codebook.hpp"
#include "turbo3/format/codebook_turbo2.hpp"
#include "turbo3/format/codebook_turbo4.hpp"
#include "turbo3/format/fp16.hpp"
#include "turbo3/format/packing.hpp"
#include "turbo3/format/packing_turbo2.hpp"
#include "turbo3/format/packing_turbo4.hpp"
#include "turbo3/format/rotation.hpp"
#include "turbo3/attention/params.hpp"
#include "turbo3/attention/validate.hpp"
#include "turbo3/ref/quantize.hpp"
#include "turbo3/ref/quantize_q8_0.hpp"
#include "turbo3/ref/quantize_turbo2.hpp"
#include "turbo3/ref/quantize_turbo4.hpp"
#include "turbo3/ref/storage.hpp"
#include "turbo3/ref/attention.hpp"

#if TURBO3_HAS_RUNTIME
#include "turbo3/memory.hpp"
#include "turbo3/write.hpp"
#include "turbo3/rotate.hpp"
#include "turbo3/attention/launch.hpp"
#endif
