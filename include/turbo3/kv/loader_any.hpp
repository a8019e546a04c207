// kv::any_loader: a K/V loader whose storage type is chosen at run time (one uniform branch per
// load and decode), for the scalar VEC kernel over pairs with a turbo4, turbo2 or q8_0 side. One
// kernel per head dim and row count serves all 21 such pairs of the five K/V types, where a kernel
// per pair would be 21 (compile time: docs/performance.md, decode over turbo4, turbo2 and q8_0). loader_for<L>(type) makes the loader object a kernel calls;
// the per-type loaders are stateless and ignore the type.
#pragma once

#include <type_traits>

#include "turbo3/kv/loader_q8_0.hpp"
#include "turbo3/kv/loader_turbo2.hpp"
#include "turbo3/kv/loader_turbo4.hpp"
#include "turbo3/kv/loaders.hpp"

#if TURBO3_HAS_RUNTIME

namespace turbo3 {
namespace kv {

// The scale of chunk c (16 values) of a row under loader L.
template <class L>
TURBO3_DEVICE TURBO3_FORCEINLINE float chunk_scale(const char* row, int c) {
  return L::scale(row, c * chunk_values / L::values_per_scale);
}

struct any_loader {
  data_type t;  // f16, turbo3, turbo4, turbo2 or q8_0 (vec_supported)
  // One scale per chunk (scale(row, c) of chunk c): a q8_0 row has one per 32 values, and the
  // kernel cannot know at compile time which type it reads.
  static constexpr int values_per_scale = chunk_values;
  static constexpr bool may_rotate = true;
  TURBO3_HD static constexpr int slot(int e) { return e; }  // every type decodes in value order here
  TURBO3_HD static constexpr int value_of_slot(int s) { return s; }

  // Large enough for every type's chunk (f16: 32 bytes); the others use the first words.
  struct raw_chunk {
    uint32_t w[8];
  };

  TURBO3_DEVICE TURBO3_FORCEINLINE float scale(const char* row, int c) const {
    switch (t) {
      case data_type::turbo3: return chunk_scale<turbo3_loader>(row, c);
      case data_type::turbo4: return chunk_scale<turbo4_loader>(row, c);
      case data_type::turbo2: return chunk_scale<turbo2_loader>(row, c);
      case data_type::q8_0: return chunk_scale<q8_0_loader>(row, c);
      default: return 1.0f;
    }
  }

  TURBO3_DEVICE TURBO3_FORCEINLINE raw_chunk load_raw(const char* row, int c) const {
    raw_chunk r{};
    switch (t) {
      case data_type::turbo3: {
        const turbo3_loader::raw_chunk x = turbo3_loader::load_raw(row, c);
        r.w[0] = x.qs;
        r.w[1] = x.signs;
        break;
      }
      case data_type::turbo4: {
        const turbo4_loader::raw_chunk x = turbo4_loader::load_raw(row, c);
        r.w[0] = x.w[0];
        r.w[1] = x.w[1];
        break;
      }
      case data_type::turbo2: r.w[0] = turbo2_loader::load_raw(row, c).qs; break;
      case data_type::q8_0: {
        const q8_0_loader::raw_chunk x = q8_0_loader::load_raw(row, c);
        TURBO3_UNROLL
        for (int i = 0; i < 4; ++i) r.w[i] = x.w[i];
        break;
      }
      default: {
        const f16_loader::raw_chunk x = f16_loader::load_raw(row, c);
        r.w[0] = x.lo.x; r.w[1] = x.lo.y; r.w[2] = x.lo.z; r.w[3] = x.lo.w;
        r.w[4] = x.hi.x; r.w[5] = x.hi.y; r.w[6] = x.hi.z; r.w[7] = x.hi.w;
        break;
      }
    }
    return r;
  }

  TURBO3_DEVICE TURBO3_FORCEINLINE void decode(const raw_chunk& raw, const turbo3_lut& lut, float out[chunk_values]) const {
    switch (t) {
      case data_type::turbo3: {
        float x[chunk_values];
        turbo3_loader::decode16(raw.w[0], raw.w[1], lut, x);
        TURBO3_UNROLL
        for (int e = 0; e < chunk_values; ++e) out[e] = x[turbo3_loader::slot(e)];  // back to value order
        break;
      }
      case data_type::turbo4: turbo4_loader::decode({{raw.w[0], raw.w[1]}}, lut, out); break;
      case data_type::turbo2: turbo2_loader::decode({raw.w[0]}, lut, out); break;
      case data_type::q8_0: q8_0_loader::decode({{raw.w[0], raw.w[1], raw.w[2], raw.w[3]}}, lut, out); break;
      default:
        TURBO3_UNROLL
        for (int i = 0; i < 8; ++i) platform::half2_bits_to_float2(raw.w[i], out[2 * i], out[2 * i + 1]);
        break;
    }
  }
};

// The loader object of a kernel over storage type t: any_loader carries t, the others nothing.
template <class L>
TURBO3_HD constexpr L loader_for(data_type t) {
  if constexpr (std::is_same<L, any_loader>::value) return L{t};
  else {
    (void)t;
    return L{};
  }
}

}  // namespace kv
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
