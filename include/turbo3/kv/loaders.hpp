// Per-storage-type K/V loaders. A row of D values is read in chunks of 16 values, decoded to
// float in the loader's own slot order (slot(e) is where value e of a chunk lands). Values are
// left unscaled: a turbo3 row carries one norm per 128-value block, which the kernels apply once
// per block (scores) or fold into the softmax weight (values), never per element; a loader's
// values_per_scale says how many values share one scale(row, group). may_rotate: whether the
// loader can read values stored rotated (docs/format.md §5), so a kernel over it compiles the
// rotation of Q (whether it runs is the call's: attention_views::rotate_q). The turbo4, turbo2 and
// q8_0 loaders and kv::any_loader (the type chosen at run time) are in loader_*.hpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "turbo3/format/block.hpp"
#include "turbo3/format/codebook.hpp"
#include "turbo3/format/fp16.hpp"
#include "turbo3/platform/bits.hpp"
#include "turbo3/types.hpp"

namespace turbo3 {

// The K/V storage types some kernel reads: every K/V type validate() accepts. The scalar VEC
// kernel and the materialize copy read all of them (kv::any_loader, the per-type loaders).
constexpr bool has_kernel_loader(data_type t) {
  return t == data_type::f16 || t == data_type::turbo3 || t == data_type::turbo4 || t == data_type::turbo2 ||
         t == data_type::q8_0;
}

// The K/V storage types the TILE, MMA and matrix VEC kernels read (kv::f16_loader,
// kv::turbo3_loader only: their decode is written for turbo3's bit layout). Their *_supported()
// return unsupported for the others, which the automatic route sends to materialize (prefill) or
// the VEC family's other kernels (decode: the warp kernel reads turbo2, turbo4 and q8_0 K too,
// through its sides, vec_warp_sides.hpp; the scalar kernel reads every type).
constexpr bool has_tile_loader(data_type t) { return t == data_type::f16 || t == data_type::turbo3; }

// The eight codebook levels as fp16 bytes split into two planes (low bytes, high bytes), four
// registers in all: a byte permute with 3-bit indices looks up four levels at once.
// sign_spread: the byte-permute table (NVIDIA) that moves sign bits 2n and 2n+2 of a chunk to bit 2
// of nibbles n and n+1 (platform::even_bits_to_nibble_bit2); carried here so that a kernel can keep
// all of its lookup tables in registers (as immediates they are re-materialized before each use).
// i8_hi_plane / i8_lo_plane: the levels as integers, level / i8_unit = 128 * hi + lo with hi in
// [-127, 127] and lo in [-64, 63] (a byte each, indexed like the fp16 planes): operands of integer
// matrix multiplies, whose byte lanes need no pairing of low and high bytes (decode_i8).
struct turbo3_lut {
  uint32_t lo_plane[2];
  uint32_t hi_plane[2];
  uint32_t sign_spread[2];
  uint32_t i8_hi_plane[2];
  uint32_t i8_lo_plane[2];
  float i8_unit;
};

// The largest magnitude of a level or a query value in the two-byte integer form (128 * hi + lo,
// hi <= 127 once lo is rounded into [-64, 63]).
inline constexpr float i8_pair_max = 16256.0f;

// v (|v| <= i8_pair_max, an integer) as 128 * hi + lo with lo in [-64, 63].
TURBO3_HD inline void split_i8_pair(int v, int& hi, int& lo) {
  hi = (v + 64) >> 7;  // arithmetic shift: floor
  lo = v - 128 * hi;
}

inline turbo3_lut make_turbo3_lut(codebook cb) {
  const codebook_table t = codebook_values(cb);
  turbo3_lut lut{};
  for (int i = 0; i < 8; ++i) {
    const uint32_t h = fp16_from_float(t.level[i]);
    lut.lo_plane[i / 4] |= (h & 0xffu) << (8 * (i % 4));
    lut.hi_plane[i / 4] |= (h >> 8) << (8 * (i % 4));
  }
  lut.sign_spread[0] = 0x00000400u;  // selector nibble s in {0, 1, 4, 5} -> byte (s & 1) << 2 | (s & 4) << 4
  lut.sign_spread[1] = 0x00004440u;
  float max_level = 0.0f;
  for (int i = 0; i < 8; ++i) max_level = std::fabs(t.level[i]) > max_level ? std::fabs(t.level[i]) : max_level;
  const float scale = i8_pair_max / max_level;
  for (int i = 0; i < 8; ++i) {
    int hi = 0, lo = 0;
    split_i8_pair(static_cast<int>(std::lround(t.level[i] * scale)), hi, lo);
    lut.i8_hi_plane[i / 4] |= (static_cast<uint32_t>(hi) & 0xffu) << (8 * (i % 4));
    lut.i8_lo_plane[i / 4] |= (static_cast<uint32_t>(lo) & 0xffu) << (8 * (i % 4));
  }
  lut.i8_unit = 1.0f / scale;
  return lut;
}

#if TURBO3_HAS_RUNTIME

// The tables of a kernel argument, each in a register of its own for the whole kernel: a kernel
// that calls this once at its start does not re-copy them from uniform registers before each byte
// permute (which the compiler otherwise does, about 20 copies per 16-value chunk in the TILE
// kernel). The TILE and MMA kernels take their tables this way (lut_for, below; the warp-specialized
// MMA producers directly); the warp decode kernel reads them from its argument, where keeping them
// in registers saves instructions but no time (vec_warp.hpp).
TURBO3_DEVICE TURBO3_FORCEINLINE turbo3_lut lut_in_registers(const turbo3_lut& in) {
  turbo3_lut lut;
  TURBO3_UNROLL
  for (int i = 0; i < 2; ++i) {
    lut.lo_plane[i] = platform::keep_in_register(in.lo_plane[i]);
    lut.hi_plane[i] = platform::keep_in_register(in.hi_plane[i]);
    lut.sign_spread[i] = platform::keep_in_register(in.sign_spread[i]);
    lut.i8_hi_plane[i] = in.i8_hi_plane[i];  // plain copies: kernels that never read them drop them
    lut.i8_lo_plane[i] = in.i8_lo_plane[i];
  }
  lut.i8_unit = in.i8_unit;
  return lut;
}

namespace kv {

inline constexpr int chunk_values = 16;

struct turbo3_loader {
  static constexpr data_type type = data_type::turbo3;
  static constexpr int values_per_scale = block_values;  // one norm per 128 values
  static constexpr bool may_rotate = true;
  // Decoded chunk order: values 0,2,4,...,14 then 1,3,...,15.
  TURBO3_HD static constexpr int slot(int e) { return (e & 1) * 8 + (e >> 1); }
  // The inverse: the value (0..15 within a chunk) decoded into slot s.
  TURBO3_HD static constexpr int value_of_slot(int s) { return ((s & 7) << 1) | (s >> 3); }

  // Rows are 2-byte aligned (50-byte blocks): every access is a 16-bit load.
  TURBO3_DEVICE TURBO3_FORCEINLINE static uint16_t scale_bits(const char* row, int block) {
    return reinterpret_cast<const uint16_t*>(row + block * block_bytes)[0];
  }
  TURBO3_DEVICE TURBO3_FORCEINLINE static float scale(const char* row, int block) {
    return platform::half_bits_to_float(scale_bits(row, block));
  }

  // The packed bits of one chunk: loads are issued for several chunks before any is decoded, so
  // enough bytes are in flight to cover memory latency.
  struct raw_chunk {
    uint32_t qs;
    uint32_t signs;
  };

  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load_raw(const char* row, int c) {
    const uint16_t* b = reinterpret_cast<const uint16_t*>(row + (c >> 3) * block_bytes);
    const int q = c & 7;
    return {platform::join_halves(b[1 + 2 * q], b[2 + 2 * q]), b[17 + q]};
  }
  // The same for chunk q (0..7) of block `block`, for callers whose q is a lane's small index: the
  // block's offset stays a constant and q's an offset of its own, so the loads of a row share one
  // base address (with c = 8 * block + q the compiler cannot split c and multiplies per load).
  // QS_ALIGNED: the caller knows the chunk's qs word is 4-byte aligned (a row starting 4-byte
  // aligned: block 1, 3, ... of it; 50-byte blocks alternate), so it is read as one word.
  template <bool QS_ALIGNED = false>
  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load_raw(const char* row, int block, int q) {
    const char* b = row + block * static_cast<int>(block_bytes);
    using qs_word = std::conditional_t<QS_ALIGNED, uint32_t, uint16_t>;
    const qs_word* qs = reinterpret_cast<const qs_word*>(b + offsetof(block_turbo3, qs) + 4 * q);
    const uint16_t* signs = reinterpret_cast<const uint16_t*>(b + offsetof(block_turbo3, signs) + 2 * q);
    if constexpr (QS_ALIGNED) return {qs[0], signs[0]};
    else return {platform::join_halves(qs[0], qs[1]), signs[0]};
  }

  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode(const raw_chunk& raw, const turbo3_lut& lut,
                                                     float out[chunk_values]) {
    decode16(raw.qs, raw.signs, lut, out);
  }

  // 16 values from their packed low bits (value e at bits 2e..2e+1) and high bits (bit e): the
  // 3-bit indices of the even and the odd values are gathered into nibbles, then each byte
  // permute looks up four fp16 levels.
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode16(uint32_t qs, uint32_t signs, const turbo3_lut& lut,
                                                       float out[chunk_values]) {
    uint32_t even, odd;
    index_words({qs, signs}, lut, even, odd);
    lookup4(even, lut, out + 0);
    lookup4(platform::upper_half(even), lut, out + 4);
    lookup4(odd, lut, out + 8);
    lookup4(platform::upper_half(odd), lut, out + 12);
  }

  // The nibble words of a chunk: even (values 0,2,..,14 = slots 0..7) and odd (slots 8..15), each
  // nibble a 3-bit index: the value's two low bits from qs, its high bit (sign) moved to bit 2.
  TURBO3_DEVICE TURBO3_FORCEINLINE static void index_words(const raw_chunk& raw, const turbo3_lut& lut, uint32_t& even,
                                                          uint32_t& odd) {
    even = (raw.qs & 0x33333333u) | platform::even_bits_to_nibble_bit2(raw.signs, lut.sign_spread);
    odd = ((raw.qs >> 2) & 0x33333333u) | platform::even_bits_to_nibble_bit2(raw.signs >> 1, lut.sign_spread);
  }

  // fp16 pairs of one row: out[i] = (slot 2i, slot 2i+1). No float conversion at all.
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_half2(const raw_chunk& raw, const turbo3_lut& lut, uint32_t out[8]) {
    uint32_t even, odd;
    index_words(raw, lut, even, odd);
    const uint32_t words[4] = {even, platform::upper_half(even), odd, platform::upper_half(odd)};
    TURBO3_UNROLL
    for (int w = 0; w < 4; ++w) {
      const uint32_t lo = platform::lookup_bytes4(lut.lo_plane[0], lut.lo_plane[1], words[w]);
      const uint32_t hi = platform::lookup_bytes4(lut.hi_plane[0], lut.hi_plane[1], words[w]);
      out[2 * w] = platform::permute_bytes<0, 4, 1, 5>(lo, hi);
      out[2 * w + 1] = platform::permute_bytes<2, 6, 3, 7>(lo, hi);
    }
  }

  // The chunk's 16 levels as signed bytes, for integer matrix multiplies: byte e of hi[w] and lo[w]
  // is slot 4w + e (level / i8_unit = 128 * hi + lo). Two byte permutes per four values, no pairing
  // of low and high bytes.
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_i8(const raw_chunk& raw, const turbo3_lut& lut, uint32_t hi[4],
                                                        uint32_t lo[4]) {
    uint32_t even, odd;
    index_words(raw, lut, even, odd);
    const uint32_t words[4] = {even, platform::upper_half(even), odd, platform::upper_half(odd)};
    TURBO3_UNROLL
    for (int w = 0; w < 4; ++w) {
      hi[w] = platform::lookup_bytes4(lut.i8_hi_plane[0], lut.i8_hi_plane[1], words[w]);
      lo[w] = platform::lookup_bytes4(lut.i8_lo_plane[0], lut.i8_lo_plane[1], words[w]);
    }
  }

  // fp16 pairs across two rows: out[s] = (row a slot s, row b slot s), for the matrix operand
  // whose packed pairs run along keys. Per two slots: one byte permute interleaves the rows'
  // index bytes (nibbles a_s, a_s+1, b_s, b_s+1), two look up their low and high level bytes, two
  // put each slot's pair together.
  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_pairs(const raw_chunk& ra, const raw_chunk& rb,
                                                           const turbo3_lut& lut, uint32_t out[16]) {
    uint32_t ea, oa, eb, ob;
    index_words(ra, lut, ea, oa);
    index_words(rb, lut, eb, ob);
    pairs_of_word<0>(ea, eb, lut, out);
    pairs_of_word<1>(ea, eb, lut, out);
    pairs_of_word<2>(ea, eb, lut, out);
    pairs_of_word<3>(ea, eb, lut, out);
    pairs_of_word<0>(oa, ob, lut, out + 8);
    pairs_of_word<1>(oa, ob, lut, out + 8);
    pairs_of_word<2>(oa, ob, lut, out + 8);
    pairs_of_word<3>(oa, ob, lut, out + 8);
  }

  // Slots 2K and 2K+1 of the nibble words wa, wb (byte K of each) into out[2K], out[2K+1].
  template <int K>
  TURBO3_DEVICE TURBO3_FORCEINLINE static void pairs_of_word(uint32_t wa, uint32_t wb, const turbo3_lut& lut,
                                                            uint32_t* out) {
    const uint32_t sel = platform::permute_bytes<K, 4 + K, K, 4 + K>(wa, wb);
    const uint32_t lo = platform::lookup_bytes4(lut.lo_plane[0], lut.lo_plane[1], sel);
    const uint32_t hi = platform::lookup_bytes4(lut.hi_plane[0], lut.hi_plane[1], sel);
    out[2 * K] = platform::permute_bytes<0, 4, 2, 6>(lo, hi);
    out[2 * K + 1] = platform::permute_bytes<1, 5, 3, 7>(lo, hi);
  }

  TURBO3_DEVICE TURBO3_FORCEINLINE static void lookup4(uint32_t nibbles, const turbo3_lut& lut, float* out) {
    const uint32_t lo = platform::lookup_bytes4(lut.lo_plane[0], lut.lo_plane[1], nibbles);
    const uint32_t hi = platform::lookup_bytes4(lut.hi_plane[0], lut.hi_plane[1], nibbles);
    platform::half2_bits_to_float2(platform::permute_bytes<0, 4, 1, 5>(lo, hi), out[0], out[1]);
    platform::half2_bits_to_float2(platform::permute_bytes<2, 6, 3, 7>(lo, hi), out[2], out[3]);
  }
};

struct f16_loader {
  static constexpr data_type type = data_type::f16;
  static constexpr int values_per_scale = 1 << 30;  // no per-block scale
  static constexpr bool may_rotate = false;
  TURBO3_HD static constexpr int slot(int e) { return e; }
  TURBO3_HD static constexpr int value_of_slot(int s) { return s; }

  TURBO3_DEVICE TURBO3_FORCEINLINE static float scale(const char*, int) { return 1.0f; }

  struct raw_chunk {
    uint4 lo, hi;
  };

  // Rows are 16-byte aligned (the launcher checks): two 16-byte loads per chunk.
  TURBO3_DEVICE TURBO3_FORCEINLINE static raw_chunk load_raw(const char* row, int c) {
    const uint4* p = reinterpret_cast<const uint4*>(row) + 2 * c;
    return {p[0], p[1]};
  }

  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_half2(const raw_chunk& raw, const turbo3_lut&, uint32_t out[8]) {
    const uint32_t w[8] = {raw.lo.x, raw.lo.y, raw.lo.z, raw.lo.w, raw.hi.x, raw.hi.y, raw.hi.z, raw.hi.w};
    TURBO3_UNROLL
    for (int i = 0; i < 8; ++i) out[i] = w[i];
  }

  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode_pairs(const raw_chunk& ra, const raw_chunk& rb, const turbo3_lut&,
                                                           uint32_t out[16]) {
    const uint32_t wa[8] = {ra.lo.x, ra.lo.y, ra.lo.z, ra.lo.w, ra.hi.x, ra.hi.y, ra.hi.z, ra.hi.w};
    const uint32_t wb[8] = {rb.lo.x, rb.lo.y, rb.lo.z, rb.lo.w, rb.hi.x, rb.hi.y, rb.hi.z, rb.hi.w};
    TURBO3_UNROLL
    for (int i = 0; i < 8; ++i) {
      out[2 * i] = platform::permute_bytes<0, 1, 4, 5>(wa[i], wb[i]);
      out[2 * i + 1] = platform::permute_bytes<2, 3, 6, 7>(wa[i], wb[i]);
    }
  }

  TURBO3_DEVICE TURBO3_FORCEINLINE static void decode(const raw_chunk& raw, const turbo3_lut&, float out[chunk_values]) {
    const uint32_t w[8] = {raw.lo.x, raw.lo.y, raw.lo.z, raw.lo.w, raw.hi.x, raw.hi.y, raw.hi.z, raw.hi.w};
    TURBO3_UNROLL
    for (int i = 0; i < 8; ++i) platform::half2_bits_to_float2(w[i], out[2 * i], out[2 * i + 1]);
  }
};

}  // namespace kv

// The tables of a kernel over K loader KL and V loader VL: in registers of their own where either
// side is turbo3 (lut_in_registers), else the argument as it is (nothing reads it).
template <class KL, class VL>
TURBO3_DEVICE TURBO3_FORCEINLINE turbo3_lut lut_for(const turbo3_lut& arg) {
  if constexpr (KL::type == data_type::turbo3 || VL::type == data_type::turbo3) return lut_in_registers(arg);
  else return arg;
}

#endif  // TURBO3_HAS_RUNTIME

}  // namespace turbo3
