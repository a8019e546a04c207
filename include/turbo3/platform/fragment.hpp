// Matrix fragments: a warp (wavefront) multiplies a 16x16 f16 tile A (M x K) by a 16x16 f16 tile B
// (K x N) into a 16x16 f32 accumulator, D += A B. Kernels see only these names:
//
//   frag_a, frag_b, frag_acc                     per-lane pieces of A, B and the accumulator
//   frag_load_a(a, p, ld)                        A[m][k] = p[m * ld + k]  (fp16 bits in shared memory)
//   frag_load_b(b, p, ld)                        B[k][n] = p[n * ld + k]  (B stored as its transpose:
//                                                N rows with K contiguous, like A)
//   frag_load_b_rows(b, p, ld)                   B[k][n] = p[k * ld + n]  (B stored as K rows with N
//                                                contiguous: NVIDIA transposes in the load; the
//                                                AMD back-ends read it element by element)
//   frag_mma(c, a, b)                            c += a b
//   frag_acc::elements, frag_acc_row(i), frag_acc_col(i)
//                                                element i of this lane's accumulator is D[row][col]
//   frag_acc_is_a                                true where an accumulator converts lane-locally into
//                                                the A operand of a multiply whose K is its columns
//                                                (NVIDIA); then also:
//     frag_a_from_acc(a, c)                      a = c rounded to f16
//     frag_b_k(e), frag_b_n(e), frag_b_from_halves(b, h)
//                                                B element e (0..7) of this lane is B[k][n]; b from
//                                                those eight fp16 values (a constant matrix in registers)
//     frag_acc_rows, frag_acc_row_slot(i)        rows a lane holds; which of them element i is in
//     frag_row_max(v), frag_row_sum(v)           reduce over the lanes holding the same rows
//     frag_flip_signs, frag_a_butterfly
//                                                sign flips and sum / difference on the f16 pairs
//
// Both operands are read with K contiguous, so a tile of K (or of V transposed) rows and a tile of
// Q (or P) rows load the same way. p must be 16-byte aligned and ld a multiple of 8 halves.
// Every lane of the warp must call the loads and frag_mma together (they are warp-wide).
//
// Back-ends (has_fragment_mma says whether the target being compiled has one):
//   NVIDIA sm_80+     mma.sync m16n8k16 (two per tile), operands loaded with ldmatrix (x4)
//   AMD gfx11         v_wmma_f32_16x16x16_f16 (wave32): a lane holds a whole row of A / column of B
//   AMD gfx12         v_wmma_f32_16x16x16_f16 (wave32): lane halves split K in two runs of 8
//   AMD gfx908-gfx950 v_mfma_f32_16x16x16f16 (wave64): four lane groups split K in runs of 4
// Elsewhere (host passes, other targets) the types exist and the functions trap; kernels check
// has_fragment_mma and never run them there.
//
// Lane layouts (l = lane; verified on hardware: NVIDIA only so far, see tests/gpu/test_fragment.cu):
//   NVIDIA   g = l/4, t = l%4; A regs {A[g][2t..], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..]};
//            acc element i: row g + 8*((i%4)/2), col 8*(i/4) + 2t + i%2
//   gfx11    A: row l%16, k 0..15 (lanes 16-31 repeat lanes 0-15); B: col l%16, k 0..15;
//            acc element i: row 2i + l/16, col l%16
//   gfx12    A: row l%16, k 8*(l/16) + 0..7; B: col l%16, same k; acc i: row i + 8*(l/16), col l%16
//   MFMA     A: row l%16, k 4*(l/16) + 0..3; B: col l%16, same k; acc i: row 4*(l/16) + i, col l%16
#pragma once

#include <cstdint>
#include <type_traits>

#include "turbo3/platform/device.hpp"

#if TURBO3_HAS_RUNTIME

#if defined(TURBO3_PLATFORM_CUDA) && defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 800
#define TURBO3_FRAGMENT_NVIDIA 1
#endif
#elif defined(__HIP_DEVICE_COMPILE__)
#if defined(__GFX12__)
#define TURBO3_FRAGMENT_WMMA12 1
#elif defined(__GFX11__)
#define TURBO3_FRAGMENT_WMMA11 1
#elif defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || \
    defined(__gfx942__) || defined(__gfx950__)
#define TURBO3_FRAGMENT_MFMA 1
#endif
#endif

namespace turbo3 {
namespace platform {

#if defined(TURBO3_FRAGMENT_NVIDIA) || defined(TURBO3_FRAGMENT_WMMA11) || defined(TURBO3_FRAGMENT_WMMA12) || \
    defined(TURBO3_FRAGMENT_MFMA)
inline constexpr bool has_fragment_mma = true;
#else
inline constexpr bool has_fragment_mma = false;
#endif

#if defined(TURBO3_FRAGMENT_NVIDIA)

struct frag_a { uint32_t x[4]; };
struct frag_b { uint32_t x[4]; };  // x[0..1]: columns 0-7, x[2..3]: columns 8-15
struct frag_acc {
  static constexpr int elements = 8;
  float x[8];  // x[0..3]: columns 0-7, x[4..7]: columns 8-15
};

// Four 8x8 b16 matrices; Transposed: each lands transposed (.trans).
template <bool Transposed = false>
TURBO3_DEVICE TURBO3_FORCEINLINE void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row_address) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(row_address));
  if constexpr (Transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
}

// Matrices of the x4 load: lane l gives the address of row l%8 of matrix l/8.
// A: matrix j = rows 8*(j%2).., k 8*(j/2)..  -> {A[g][2t], A[g+8][2t], A[g][2t+8], A[g+8][2t+8]}
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_load_a(frag_a& a, const uint16_t* p, int ld) {
  const int l = lane_id(), j = l / 8;
  ldmatrix_x4(a.x, p + ((j % 2) * 8 + l % 8) * ld + (j / 2) * 8);
}
// B^T rows are N: matrix j = n 8*(j/2).., k 8*(j%2)..  -> {n0-7: k0-7, k8-15; n8-15: k0-7, k8-15}
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_load_b(frag_b& b, const uint16_t* p, int ld) {
  const int l = lane_id(), j = l / 8;
  ldmatrix_x4(b.x, p + ((j / 2) * 8 + l % 8) * ld + (j % 2) * 8);
}
// B rows are K, read transposed: matrix j = k 8*(j%2).., n 8*(j/2)..  -> the same registers as frag_load_b.
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_load_b_rows(frag_b& b, const uint16_t* p, int ld) {
  const int l = lane_id(), j = l / 8;
  ldmatrix_x4<true>(b.x, p + ((j % 2) * 8 + l % 8) * ld + (j / 2) * 8);
}

TURBO3_DEVICE TURBO3_FORCEINLINE void mma_16x8x16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

TURBO3_DEVICE TURBO3_FORCEINLINE void frag_mma(frag_acc& c, const frag_a& a, const frag_b& b) {
  mma_16x8x16(c.x, a.x, b.x[0], b.x[1]);
  mma_16x8x16(c.x + 4, a.x, b.x[2], b.x[3]);
}

TURBO3_DEVICE TURBO3_FORCEINLINE int frag_acc_row(int i) { return lane_id() / 4 + 8 * ((i % 4) / 2); }
TURBO3_DEVICE TURBO3_FORCEINLINE int frag_acc_col(int i) { return 8 * (i / 4) + 2 * (lane_id() % 4) + i % 2; }

// The accumulator's layout is the A operand's: {D[g][2t..], D[g+8][2t..], D[g][2t+8..], D[g+8][2t+8..]}.
inline constexpr bool frag_acc_is_a = true;
inline constexpr int frag_acc_rows = 2;  // rows g and g + 8
TURBO3_HD constexpr int frag_acc_row_slot(int i) { return (i % 4) / 2; }
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_a_from_acc(frag_a& a, const frag_acc& c) {
  TURBO3_UNROLL
  for (int r = 0; r < 4; ++r) {
    const __half2 h = __floats2half2_rn(c.x[2 * r], c.x[2 * r + 1]);
    memcpy(&a.x[r], &h, 4);
  }
}
// B registers {B[2t..][g], B[2t+8..][g], B[2t..][g+8], B[2t+8..][g+8]}, low half first.
TURBO3_DEVICE TURBO3_FORCEINLINE int frag_b_k(int e) { return 2 * (lane_id() % 4) + e % 2 + 8 * ((e / 2) % 2); }
TURBO3_DEVICE TURBO3_FORCEINLINE int frag_b_n(int e) { return lane_id() / 4 + 8 * (e / 4); }
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_b_from_halves(frag_b& b, const uint16_t (&h)[8]) {
  TURBO3_UNROLL
  for (int r = 0; r < 4; ++r) b.x[r] = static_cast<uint32_t>(h[2 * r]) | (static_cast<uint32_t>(h[2 * r + 1]) << 16);
}
// The four lanes t = 0..3 of a group g hold the same rows.
TURBO3_DEVICE TURBO3_FORCEINLINE float frag_row_max(float v) {
  v = fmaxf(v, shfl_xor(v, 1));
  return fmaxf(v, shfl_xor(v, 2));
}
TURBO3_DEVICE TURBO3_FORCEINLINE float frag_row_sum(float v) {
  v += shfl_xor(v, 1);
  return v + shfl_xor(v, 2);
}

#elif defined(TURBO3_FRAGMENT_WMMA11) || defined(TURBO3_FRAGMENT_WMMA12) || defined(TURBO3_FRAGMENT_MFMA)

#if defined(TURBO3_FRAGMENT_WMMA11)
inline constexpr int frag_k_run = 16;  // k values per lane
inline constexpr int frag_acc_n = 8;
#elif defined(TURBO3_FRAGMENT_WMMA12)
inline constexpr int frag_k_run = 8;
inline constexpr int frag_acc_n = 8;
#else
inline constexpr int frag_k_run = 4;
inline constexpr int frag_acc_n = 4;
#endif

typedef _Float16 frag_half_vec __attribute__((ext_vector_type(frag_k_run)));
typedef float frag_float_vec __attribute__((ext_vector_type(frag_acc_n)));

struct frag_a { frag_half_vec x; };
struct frag_b { frag_half_vec x; };
struct frag_acc {
  static constexpr int elements = frag_acc_n;
  frag_float_vec x;
};

// First k of this lane's run (gfx11: every lane holds all 16).
TURBO3_DEVICE TURBO3_FORCEINLINE int frag_k_first() {
#if defined(TURBO3_FRAGMENT_WMMA11)
  return 0;
#else
  return (lane_id() / 16) * frag_k_run;
#endif
}

TURBO3_DEVICE TURBO3_FORCEINLINE void frag_load_run(frag_half_vec& v, const uint16_t* p, int ld) {
  const int l = lane_id();
  v = *reinterpret_cast<const frag_half_vec*>(p + (l % 16) * ld + frag_k_first());
}
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_load_a(frag_a& a, const uint16_t* p, int ld) { frag_load_run(a.x, p, ld); }
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_load_b(frag_b& b, const uint16_t* p, int ld) { frag_load_run(b.x, p, ld); }
// Column l % 16 of B stored as K rows: one 16-bit load per element (correct, not fast).
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_load_b_rows(frag_b& b, const uint16_t* p, int ld) {
  const int n = lane_id() % 16, k0 = frag_k_first();
  TURBO3_UNROLL
  for (int i = 0; i < frag_k_run; ++i) b.x[i] = reinterpret_cast<const _Float16*>(p)[(k0 + i) * ld + n];
}

TURBO3_DEVICE TURBO3_FORCEINLINE void frag_mma(frag_acc& c, const frag_a& a, const frag_b& b) {
#if defined(TURBO3_FRAGMENT_WMMA11)
  c.x = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a.x, b.x, c.x);
#elif defined(TURBO3_FRAGMENT_WMMA12)
  c.x = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a.x, b.x, c.x);
#else
  c.x = __builtin_amdgcn_mfma_f32_16x16x16f16(a.x, b.x, c.x, 0, 0, 0);
#endif
}

TURBO3_DEVICE TURBO3_FORCEINLINE int frag_acc_row(int i) {
#if defined(TURBO3_FRAGMENT_WMMA11)
  return 2 * i + lane_id() / 16;
#elif defined(TURBO3_FRAGMENT_WMMA12)
  return i + 8 * (lane_id() / 16);
#else
  return 4 * (lane_id() / 16) + i;
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE int frag_acc_col(int) { return lane_id() % 16; }

// A lane's accumulator holds a column, its A operand a row: P goes through shared memory.
inline constexpr bool frag_acc_is_a = false;

#else  // no back-end for this pass: types for the compiler's front end, trapping functions

struct frag_a { uint32_t x[4]; };
struct frag_b { uint32_t x[4]; };
struct frag_acc {
  static constexpr int elements = 8;
  float x[8];
};
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_load_a(frag_a& a, const uint16_t*, int) { a = frag_a{}; }
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_load_b(frag_b& b, const uint16_t*, int) { b = frag_b{}; }
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_load_b_rows(frag_b& b, const uint16_t*, int) { b = frag_b{}; }
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_mma(frag_acc&, const frag_a&, const frag_b&) { __builtin_trap(); }
TURBO3_DEVICE TURBO3_FORCEINLINE int frag_acc_row(int) { return 0; }
TURBO3_DEVICE TURBO3_FORCEINLINE int frag_acc_col(int) { return 0; }
inline constexpr bool frag_acc_is_a = false;

#endif

#if !defined(TURBO3_FRAGMENT_NVIDIA)
// Kernels reach these only under `if constexpr (frag_acc_is_a)`; they exist so that the same
// source compiles for every back-end.
inline constexpr int frag_acc_rows = 1;
TURBO3_HD constexpr int frag_acc_row_slot(int) { return 0; }
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_a_from_acc(frag_a&, const frag_acc&) { __builtin_trap(); }
TURBO3_DEVICE TURBO3_FORCEINLINE int frag_b_k(int) { return 0; }
TURBO3_DEVICE TURBO3_FORCEINLINE int frag_b_n(int) { return 0; }
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_b_from_halves(frag_b&, const uint16_t (&)[8]) { __builtin_trap(); }
TURBO3_DEVICE TURBO3_FORCEINLINE float frag_row_max(float v) { __builtin_trap(); return v; }
TURBO3_DEVICE TURBO3_FORCEINLINE float frag_row_sum(float v) { __builtin_trap(); return v; }
#endif

TURBO3_DEVICE TURBO3_FORCEINLINE void frag_zero(frag_acc& c) {
  TURBO3_UNROLL
  for (int i = 0; i < frag_acc::elements; ++i) c.x[i] = 0.0f;
}

// Two fp16 values packed in a word (low half first) as the back-end's pair type and back (the
// casts compile to nothing), and lane-wise a * b, a + b, a - b and a * b + c over such words (round
// to nearest; one instruction each on NVIDIA).
#if defined(TURBO3_PLATFORM_CUDA)
using half2_pair = __half2;
TURBO3_DEVICE TURBO3_FORCEINLINE half2_pair half2_of_bits(uint32_t bits) {
  half2_pair h;
  memcpy(&h, &bits, 4);
  return h;
}
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t bits_of_half2(half2_pair h) {
  uint32_t bits;
  memcpy(&bits, &h, 4);
  return bits;
}
#else
typedef _Float16 half2_pair __attribute__((ext_vector_type(2)));
TURBO3_DEVICE TURBO3_FORCEINLINE half2_pair half2_of_bits(uint32_t bits) { return __builtin_bit_cast(half2_pair, bits); }
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t bits_of_half2(half2_pair h) { return __builtin_bit_cast(uint32_t, h); }
#endif

TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t mul_half2_bits(uint32_t a, uint32_t b) {
#if defined(TURBO3_PLATFORM_CUDA)
  return bits_of_half2(__hmul2(half2_of_bits(a), half2_of_bits(b)));
#else
  return bits_of_half2(half2_of_bits(a) * half2_of_bits(b));
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t add_half2_bits(uint32_t a, uint32_t b) {
#if defined(TURBO3_PLATFORM_CUDA)
  return bits_of_half2(__hadd2(half2_of_bits(a), half2_of_bits(b)));
#else
  return bits_of_half2(half2_of_bits(a) + half2_of_bits(b));
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t sub_half2_bits(uint32_t a, uint32_t b) {
#if defined(TURBO3_PLATFORM_CUDA)
  return bits_of_half2(__hsub2(half2_of_bits(a), half2_of_bits(b)));
#else
  return bits_of_half2(half2_of_bits(a) - half2_of_bits(b));
#endif
}
TURBO3_DEVICE TURBO3_FORCEINLINE uint32_t fma_half2_bits(uint32_t a, uint32_t b, uint32_t c) {
#if defined(TURBO3_PLATFORM_CUDA)
  return bits_of_half2(__hfma2(half2_of_bits(a), half2_of_bits(b), half2_of_bits(c)));
#else
  return bits_of_half2(__builtin_elementwise_fma(half2_of_bits(a), half2_of_bits(b), half2_of_bits(c)));
#endif
}

// Where accumulators are A operands (frag_acc_is_a): element-wise work on the f16 pairs of A and B
// fragments. frag_flip_signs: registers 0, 1 xor lo, registers 2, 3 xor hi (A: columns 2t, 2t + 1
// and 2t + 8, 2t + 9; B: column g and column g + 8); frag_a_butterfly: (u, w) -> (u + w, u - w)
// element by element.
#if defined(TURBO3_FRAGMENT_NVIDIA)
template <class Frag>
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_flip_signs(Frag& f, uint32_t lo, uint32_t hi) {
  static_assert(std::is_same<Frag, frag_a>::value || std::is_same<Frag, frag_b>::value, "an A or B fragment");
  f.x[0] ^= lo;
  f.x[1] ^= lo;
  f.x[2] ^= hi;
  f.x[3] ^= hi;
}
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_a_butterfly(frag_a& u, frag_a& w) {
  TURBO3_UNROLL
  for (int j = 0; j < 4; ++j) {
    const uint32_t a = u.x[j], b = w.x[j];
    u.x[j] = add_half2_bits(a, b);
    w.x[j] = sub_half2_bits(a, b);
  }
}
#else
template <class Frag>
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_flip_signs(Frag&, uint32_t, uint32_t) { __builtin_trap(); }
TURBO3_DEVICE TURBO3_FORCEINLINE void frag_a_butterfly(frag_a&, frag_a&) { __builtin_trap(); }
#endif

}  // namespace platform
}  // namespace turbo3

#endif  // TURBO3_HAS_RUNTIME
