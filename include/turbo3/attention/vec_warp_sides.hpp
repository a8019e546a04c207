// The K and V "sides" of the warp decode kernel (vec_warp.hpp): per storage type, how a staged row
// of 128-value groups is read and decoded into the kernel's fragments. Every side decodes a chunk
// (16 values of one group) into fp16 pairs of adjacent slots (decode_half2) in its own slot order
// (value_of_slot), which the Q fragments (K side) and the output rows (V side) follow; the group's
// fp16 norm is scale_bits. load<UNIT> reads a chunk's packed bits from a row staged in UNIT-byte
// copies: rows staged in 16-byte units start 4-byte aligned (vec_warp_config), every other row
// only 2-byte aligned. Sides with i8_scores also decode to signed bytes (decode_i8) for the
// integer score form (vec_warp_config::integer_scores). The level tables of turbo2 and turbo4
// (fixed codebooks) are constants; turbo3's come from the call's codebook (turbo3_lut). A side
// whose decode of arbitrary bytes may be inf or NaN (q8_0) is a K side only (finite_decode): the
// value phase cancels the stale keys of a partial group with a zero weight, which cancels only
// finite values; a stale key's score is replaced by -inf whatever it is.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turbo3/format/block.hpp"
#include "turbo3/format/block_q8_0.hpp"
#include "turbo3/format/block_turbo2.hpp"
#include "turbo3/format/block_turbo4.hpp"
#include "turbo3/format/codebook_turbo2.hpp"
#include "turbo3/format/codebook_turbo4.hpp"
#include "turbo3/kv/loaders.hpp"
#include "turbo3/platform/fragment.hpp"
#include "turbo3/platform/bits.hpp"
#include "turbo3/types.hpp"

namespace turbo3 {
namespace detail {

// ---- compile-time level tables -------------------------------------------------------------------

// IEEE fp16 bits of a normal-range float (2^-14 <= |x| < 65504), rounded to nearest even: the
// bits fp16_from_float gives, at compile time.
constexpr uint16_t fp16_bits_constexpr(float f) {
  const bool neg = f < 0.0f;
  double x = neg ? -static_cast<double>(f) : static_cast<double>(f);
  int e = 0;
  while (x >= 2.0) x /= 2.0, ++e;
  while (x < 1.0) x *= 2.0, --e;
  const double m = x * 1024.0;  // in [1024, 2048): exact (power-of-two scaling)
  long long n = static_cast<long long>(m);
  const double frac = m - static_cast<double>(n);
  if (frac > 0.5 || (frac == 0.5 && (n & 1))) ++n;
  if (n == 2048) n = 1024, ++e;
  return static_cast<uint16_t>((neg ? 0x8000u : 0u) | static_cast<unsigned>(e + 15) << 10 |
                               static_cast<unsigned>(n - 1024));
}

// byte `which` (0: low, 1: high) of the fp16 bits of levels[0..3], as a 4-byte lookup table
// (byte i: level i).
constexpr uint32_t fp16_byte_plane(const float (&levels)[4], int which) {
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<uint32_t>((fp16_bits_constexpr(levels[i]) >> (8 * which)) & 0xffu) << (8 * i);
  return r;
}

// The integer form of a level table (as make_turbo3_lut builds turbo3's): level / unit =
// 128 * hi + lo, rounded half away from zero as std::lround, unit = max |level| / i8_pair_max.
struct i8_level_planes {
  uint32_t hi, lo;
  float unit;
};
constexpr i8_level_planes i8_planes_of(const float (&levels)[4]) {
  float max_level = 0.0f;
  for (int i = 0; i < 4; ++i) {
    const float m = levels[i] < 0.0f ? -levels[i] : levels[i];
    max_level = m > max_level ? m : max_level;
  }
  const float scale = i8_pair_max / max_level;
  i8_level_planes p{0u, 0u, 1.0f / scale};
  for (int i = 0; i < 4; ++i) {
    const float v = levels[i] * scale;
    const int q = static_cast<int>(v < 0.0f ? v - 0.5f : v + 0.5f);
    const int hi = (q + 64) >> 7, lo = q - 128 * hi;  // split_i8_pair
    p.hi |= (static_cast<uint32_t>(hi) & 0xffu) << (8 * i);
    p.lo |= (static_cast<uint32_t>(lo) & 0xffu) << (8 * i);
  }
  return p;
}

struct turbo2_levels {
  float level[4];
};
constexpr turbo2_levels turbo2_level_array() {
  const turbo2_codebook_table cb = turbo2_codebook();
  return turbo2_levels{{cb.level[0], cb.level[1], cb.level[2], cb.level[3]}};
}
inline constexpr turbo2_levels turbo2_warp_levels = turbo2_level_array();
inline constexpr uint32_t turbo2_lo_plane = fp16_byte_plane(turbo2_warp_levels.level, 0);
inline constexpr uint32_t turbo2_hi_plane = fp16_byte_plane(turbo2_warp_levels.level, 1);
inline constexpr i8_level_planes turbo2_i8_planes = i8_planes_of(turbo2_warp_levels.level);

// turbo4's magnitudes |level(8 + m)|, m = 0..7 (the table is symmetric: turbo4_levels_symmetric),
// as two 4-byte planes per fp16 byte: {lo0, lo1} low bytes, {hi0, hi1} high bytes.
struct turbo4_magnitude_planes {
  uint32_t lo[2], hi[2];
};
constexpr turbo4_magnitude_planes turbo4_planes_of() {
  const turbo4_codebook_table cb = turbo4_codebook();
  turbo4_magnitude_planes p{{0u, 0u}, {0u, 0u}};
  for (int m = 0; m < 8; ++m) {
    const uint16_t h = fp16_bits_constexpr(cb.level[8 + m]);
    p.lo[m / 4] |= static_cast<uint32_t>(h & 0xffu) << (8 * (m % 4));
    p.hi[m / 4] |= static_cast<uint32_t>(h >> 8) << (8 * (m % 4));
  }
  return p;
}
inline constexpr turbo4_magnitude_planes turbo4_warp_planes = turbo4_planes_of();

#if TURBO3_HAS_RUNTIME

// ---- turbo3: kv::turbo3_loader as it is -----------------------------------------------------------
// 50-byte blocks: norm, 32 bytes of low index bits (qs), 16 of high bits (signs). A chunk's qs word
// sits at 50 b + 2 + 4 q: 4-byte aligned in the odd blocks of a 4-byte aligned row.
struct turbo3_warp_side {
  using loader = kv::turbo3_loader;
  static constexpr data_type type = data_type::turbo3;
  static constexpr int group_bytes = static_cast<int>(block_bytes);
  static constexpr bool i8_scores = true;
  static constexpr bool finite_decode = true;
  using raw_chunk = loader::raw_chunk;
  TURBO3_HD static constexpr int value_of_slot(int s) { return loader::value_of_slot(s); }
  template <int UNIT>
  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load(const char* row, int b, int q) {
    if (UNIT == 16 && (b & 1)) return loader::template load_raw<true>(row, b, q);
    return loader::load_raw(row, b, q);
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static uint16_t scale_bits(const char* row, int b) {
    return loader::scale_bits(row, b);
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float scale(const char* row, int b) { return loader::scale(row, b); }
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_half2(const raw_chunk& raw, const turbo3_lut& lut,
                                                            uint32_t out[8]) {
    loader::decode_half2(raw, lut, out);
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_i8(const raw_chunk& raw, const turbo3_lut& lut, uint32_t hi[4],
                                                        uint32_t lo[4]) {
    loader::decode_i8(raw, lut, hi, lo);
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float i8_unit(const turbo3_lut& lut) { return lut.i8_unit; }
};

// ---- turbo2 ----------------------------------------------------------------------------------------
// 34-byte blocks (block_turbo2): the fp16 norm, then qs, index j at bits 2 (j % 4) of byte j / 4.
// Chunk q's 16 indices are the word at 34 b + 2 + 4 q, value e at bits 2e: turbo3's qs word without
// the sign plane, so the decode is turbo3's with 2-bit indices (nibbles 0..3 of the even / odd
// words, a 4-entry table in one register) and turbo3's slot order (even values, then odd). 34 b + 2
// is 4-byte aligned exactly where 50 b + 2 is: in the odd blocks of a 4-byte aligned row.
struct turbo2_warp_side {
  static constexpr data_type type = data_type::turbo2;
  static constexpr int group_bytes = static_cast<int>(turbo2_block_bytes);
  static constexpr bool i8_scores = true;
  static constexpr bool finite_decode = true;
  struct raw_chunk {
    uint32_t qs;
  };
  TURBO3_HD static constexpr int value_of_slot(int s) { return kv::turbo3_loader::value_of_slot(s); }
  template <int UNIT>
  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load(const char* row, int b, int q) {
    const char* p = row + b * group_bytes + offsetof(block_turbo2, qs) + 4 * q;
    if (UNIT == 16 && (b & 1)) return {*reinterpret_cast<const uint32_t*>(p)};
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return {platform::join_halves(h[0], h[1])};
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static uint16_t scale_bits(const char* row, int b) {
    return reinterpret_cast<const uint16_t*>(row + b * group_bytes + offsetof(block_turbo2, norm))[0];
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float scale(const char* row, int b) {
    return platform::half_bits_to_float(scale_bits(row, b));
  }
  // The index words of slots 0-3, 4-7 (even values) and 8-11, 12-15 (odd values): nibble n of
  // word w holds the index of slot 4w + n (bits 16-31 ignored by the lookups).
  TURBO3_DEVICE TURBO3_FORCEINLINE static void index_words(const raw_chunk& raw, uint32_t (&words)[4]) {
    const uint32_t even = raw.qs & 0x33333333u, odd = (raw.qs >> 2) & 0x33333333u;
    words[0] = even, words[1] = platform::upper_half(even), words[2] = odd, words[3] = platform::upper_half(odd);
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_half2(const raw_chunk& raw, const turbo3_lut&, uint32_t out[8]) {
    uint32_t words[4];
    index_words(raw, words);
    TURBO3_UNROLL
    for (int w = 0; w < 4; ++w) {
      const uint32_t lo = platform::lookup_bytes4(turbo2_lo_plane, 0u, words[w]);
      const uint32_t hi = platform::lookup_bytes4(turbo2_hi_plane, 0u, words[w]);
      out[2 * w] = platform::permute_bytes<0, 4, 1, 5>(lo, hi);
      out[2 * w + 1] = platform::permute_bytes<2, 6, 3, 7>(lo, hi);
    }
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_i8(const raw_chunk& raw, const turbo3_lut&, uint32_t hi[4],
                                                        uint32_t lo[4]) {
    uint32_t words[4];
    index_words(raw, words);
    TURBO3_UNROLL
    for (int w = 0; w < 4; ++w) {
      hi[w] = platform::lookup_bytes4(turbo2_i8_planes.hi, 0u, words[w]);
      lo[w] = platform::lookup_bytes4(turbo2_i8_planes.lo, 0u, words[w]);
    }
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float i8_unit(const turbo3_lut&) { return turbo2_i8_planes.unit; }
};

// ---- turbo4 ----------------------------------------------------------------------------------------
// 68-byte blocks (block_turbo4): the fp16 norm, 2 reserved bytes, then qs, index j in nibble j % 2
// of byte j / 2. Chunk q's 16 indices are the words at 68 b + 4 + 8 q (values 0-7, value e in
// nibble e) and + 4 (values 8-15): every one 4-byte aligned in a 4-byte aligned row. Slot order is
// value order. level(i) = level(8 + m) for i >= 8 and -level(8 + m') for i < 8 with m' = 7 - i
// (the table is symmetric), so m = (i >= 8 ? i : ~i) & 7 looks up an 8-entry table of magnitudes
// and bit 3 of i, clear, sets the fp16 sign. No integer decode (i8_scores false): in the signed
// byte pair (hi, lo) the sign negates both bytes (a 16-entry table or byte arithmetic), not one OR
// as in fp16; turbo4 K scores in fp16 with 4 warps (vec_warp_warps).
struct turbo4_warp_side {
  static constexpr data_type type = data_type::turbo4;
  static constexpr int group_bytes = static_cast<int>(turbo4_block_bytes);
  static constexpr bool i8_scores = false;
  static constexpr bool finite_decode = true;
  struct raw_chunk {
    uint32_t w[2];
  };
  TURBO3_HD static constexpr int value_of_slot(int s) { return s; }
  template <int UNIT>
  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load(const char* row, int b, int q) {
    const char* p = row + b * group_bytes + offsetof(block_turbo4, qs) + 8 * q;
    if (UNIT == 16) {
      const uint32_t* w = reinterpret_cast<const uint32_t*>(p);
      return {{w[0], w[1]}};
    }
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return {{platform::join_halves(h[0], h[1]), platform::join_halves(h[2], h[3])}};
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static uint16_t scale_bits(const char* row, int b) {
    return reinterpret_cast<const uint16_t*>(row + b * group_bytes + offsetof(block_turbo4, norm))[0];
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float scale(const char* row, int b) {
    return platform::half_bits_to_float(scale_bits(row, b));
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_half2(const raw_chunk& raw, const turbo3_lut&, uint32_t out[8]) {
    constexpr turbo4_magnitude_planes t = turbo4_warp_planes;
    TURBO3_UNROLL
    for (int h = 0; h < 2; ++h) {
      const uint32_t w = raw.w[h];
      // nibble: 7 where bit 3 of the index is clear, 0 where set; m = index ^ that, low 3 bits
      const uint32_t m = (w ^ (((~w) >> 3) & 0x11111111u) * 7u) & 0x77777777u;
      // nibble: 4 where bit 3 is set (byte 0 of the sign table's zero word), 0 where clear (0x80)
      const uint32_t s = (w >> 1) & 0x44444444u;
      const uint32_t mw[2] = {m, platform::upper_half(m)}, sw[2] = {s, platform::upper_half(s)};
      TURBO3_UNROLL
      for (int k = 0; k < 2; ++k) {
        const uint32_t lo = platform::lookup_bytes4(t.lo[0], t.lo[1], mw[k]);
        const uint32_t hi =
            platform::lookup_bytes4(t.hi[0], t.hi[1], mw[k]) | platform::lookup_bytes4(0x80808080u, 0u, sw[k]);
        out[4 * h + 2 * k] = platform::permute_bytes<0, 4, 1, 5>(lo, hi);
        out[4 * h + 2 * k + 1] = platform::permute_bytes<2, 6, 3, 7>(lo, hi);
      }
    }
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float i8_unit(const turbo3_lut&) { return 0.0f; }
};

// ---- q8_0 (K only) ---------------------------------------------------------------------------------
// 34-byte blocks (block_q8_0): the fp16 scale d, then 32 int8 values q (value j = d q_j); a
// 128-value group is 4 blocks (136 bytes) and chunk c is half (c % 2) of block c / 2. The decode
// folds d into the operand: fp16(q d) per value (one rounding, 2^-11 relative; the scores
// accumulate in fp32), so scale_bits is fp16 1 for every group. Slot order is value order. A block
// starts 0 or 2 bytes into a 4-byte word (34-byte blocks of a 2-byte aligned row): load reads the
// aligned words around the chunk and shifts by that offset (one byte permute per word, its selector
// from the address): 5 32-bit loads and the word with d, not 9 16-bit loads. The words read may
// reach 2 bytes before the block (a 2-byte offset: the row starts at least 2 bytes into its slot,
// or the block is not the row's first) or after it (inside the slot: a slot's pitch leaves more
// than 2 bytes after a row, and a span run's tile as much after its last row). decode_half2: q as
// fp16 from 0x6400 | (q ^ 0x80) = 1024 + q + 128 less 1152 (exact), times (d, d). The decode of
// stale bytes may be inf or NaN (finite_decode false): K only. No integer decode (i8_scores false).
struct q8_0_warp_side {
  static constexpr data_type type = data_type::q8_0;
  static constexpr int group_bytes = block_values / q8_0_block_values * static_cast<int>(q8_0_block_bytes);
  static constexpr bool i8_scores = false;
  static constexpr bool finite_decode = false;
  struct raw_chunk {
    uint32_t d2;     // (d, d) as fp16
    uint32_t qs[4];  // value e in byte e % 4 of qs[e / 4]
  };
  TURBO3_HD static constexpr int value_of_slot(int s) { return s; }
  template <int UNIT>
  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load(const char* row, int b, int q) {
    const char* block = row + b * group_bytes + (q / 2) * static_cast<int>(q8_0_block_bytes);
    const uint32_t offset = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(block)) & 2u;  // 0 or 2
    const uint32_t* w = reinterpret_cast<const uint32_t*>(block - offset);
    // d: bytes offset, offset + 1 of w[0]; half h's qs: from byte offset + 2 of w[4 h] on
    const uint32_t d_sel = 0x1010u + 0x1111u * offset, qs_sel = 0x5432u + 0x1111u * offset;
    const uint32_t* x = w + 4 * (q % 2);
    uint32_t xs[5];
    TURBO3_UNROLL
    for (int i = 0; i < 5; ++i) xs[i] = x[i];
    raw_chunk r;
    r.d2 = platform::lookup_bytes4(w[0], 0u, d_sel);
    TURBO3_UNROLL
    for (int i = 0; i < 4; ++i) r.qs[i] = platform::lookup_bytes4(xs[i], xs[i + 1], qs_sel);
    return r;
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static uint16_t scale_bits(const char*, int) { return 0x3c00u; }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float scale(const char*, int) { return 1.0f; }
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_half2(const raw_chunk& raw, const turbo3_lut&, uint32_t out[8]) {
    constexpr uint32_t bias = 0x64806480u;  // (1152, 1152) as fp16
    TURBO3_UNROLL
    for (int i = 0; i < 4; ++i) {
      const uint32_t u = raw.qs[i] ^ 0x80808080u;
      const uint32_t lo = platform::permute_bytes<0, 4, 1, 4>(u, 0x64646464u);
      const uint32_t hi = platform::permute_bytes<2, 4, 3, 4>(u, 0x64646464u);
      out[2 * i] = platform::mul_half2_bits(platform::sub_half2_bits(lo, bias), raw.d2);
      out[2 * i + 1] = platform::mul_half2_bits(platform::sub_half2_bits(hi, bias), raw.d2);
    }
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float i8_unit(const turbo3_lut&) { return 0.0f; }
};

#endif  // TURBO3_HAS_RUNTIME

// Whether the warp decode kernel has a side for storage type t (q8_0: K only), and whether K of
// type t takes the integer score form (vec_warp_warps).
TURBO3_HD constexpr bool vec_warp_side_type(data_type t) {
  return t == data_type::turbo3 || t == data_type::turbo2 || t == data_type::turbo4 || t == data_type::q8_0;
}
TURBO3_HD constexpr bool vec_warp_i8_type(data_type t) { return t == data_type::turbo3 || t == data_type::turbo2; }

}  // namespace detail
}  // namespace turbo3
