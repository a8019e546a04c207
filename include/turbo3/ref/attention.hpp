// CPU reference of one flash-attention call (attention_params semantics), accumulated in double.
// Plain C++ (no GPU compiler needed). Every pointer in the params is host memory.
//
// What it computes, for every sequence s, query head h and query i (see attention/params.hpp):
//   kv head  g = h / (n_head / n_head_kv)
//   score    x_j = scale * <q_i, k_j>;  softcap c > 0: x_j = c * tanh(x_j / c);
//            with a mask: x_j += slope(h) * mask[i][j], and a -inf entry hides key j;
//            causal: key j is visible iff j <= i + (n_kv - n_q).
//   softmax  M = max(visible x_j, sink[h] if sinks);
//            out_i = sum_j e^(x_j - M) v_j / (sum_j e^(x_j - M) + e^(sink[h] - M)).
//   A query row that sees no key at all outputs zeros (with or without a sink: the sink joins the
//   denominator only, so the numerator is an empty sum).
//
// Storage: K and V may each be any of f16, turbo3, turbo4, turbo2 and q8_0 (docs/format.md), with
// head dims D_k and D_v of their own (any size here; a block type needs whole blocks per row).
//
// Rotation (docs/format.md §5). Dequantized turbo3, turbo4 and turbo2 values are in the rotated
// domain (stores_rotated_values); f16 and q8_0 values are not.
//   - K of a rotated type and rotate_q: each 128-chunk of the query row is rotated forward before
//     the dot products. V of a rotated type and unrotate_out: each 128-chunk of the output row is
//     rotated back once, at the end. With a flag off the caller has already done that step; for K
//     (resp. V) of another type the flag is ignored.
//   - Both rotations are done here in double: the same orthogonal map R = D(s2) (1/sqrt 128) H D(s1)
//     (same sign tables, same Sylvester-order Hadamard), with 1/sqrt(128) in double instead of the
//     float constant the quantizer uses. The float version of R differs from this by about 1e-7
//     relative, which is far below what any kernel comparison resolves; keeping the reference in
//     double keeps its own error at the reordering level (~1e-15).
//
// Precision: Q, K, V, mask and sinks are read as stored (f16 widened, block types dequantized
// exactly as their ref::dequantize_row does in float, then widened), everything after that is
// double. The result is rounded once to the output type (f16 through float: double -> float -> f16).
//
// Preconditions (asserted):
//   q, k, v, out non-null; q f32/f16; k, v f16/turbo3/turbo4/turbo2/q8_0; out f32/f16; mask (if
//   any) f16; all sizes >= 1; k.ne[0] == q.ne[0]; v.ne[1..3] == k.ne[1..3]; k.ne[3] == q.ne[3];
//   n_head % n_head_kv == 0; a K (V) head dim is a multiple of values_per_block of its type (128
//   for the turbo types, 32 for q8_0);
//   out.ne == {D_v, n_q, n_head, n_seq}; mask.ne[0] >= n_kv, mask.ne[1] >= n_q, mask.ne[2..3] >= 1.
//   Strides are taken as given (no alignment is needed: rows are read through memcpy).
#pragma once

#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "turbo3/attention/params.hpp"
#include "turbo3/format/block.hpp"
#include "turbo3/format/codebook.hpp"
#include "turbo3/format/fp16.hpp"
#include "turbo3/format/rotation.hpp"
#include "turbo3/ref/storage.hpp"
#include "turbo3/types.hpp"

namespace turbo3 {
namespace ref {
namespace detail {

// Address of row (i1, i2, i3) of a strided view.
inline const unsigned char* row_address(const void* data, const size_t nb[4], int64_t i1, int64_t i2,
                                        int64_t i3) {
  return static_cast<const unsigned char*>(data) + static_cast<size_t>(i1) * nb[1] +
         static_cast<size_t>(i2) * nb[2] + static_cast<size_t>(i3) * nb[3];
}

inline float load_f16(const unsigned char* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return fp16_to_float(bits);
}

// Reads one stored row of n values of any storage type into doubles: turbo values come out in the
// rotated domain, every type exactly as ref::load_row reads it. Keeps its scratch between rows.
class row_reader {
 public:
  row_reader(data_type type, int64_t n, codebook cb) : type_(type), n_(n), cb_(cb), values_(static_cast<size_t>(n)) {}

  void read(const unsigned char* src, double* dst) {
    load_row(type_, src, values_.data(), n_, cb_);
    for (int64_t d = 0; d < n_; ++d) dst[d] = values_[static_cast<size_t>(d)];
  }

 private:
  data_type type_;
  int64_t n_;
  codebook cb_;
  std::vector<float> values_;
};

// Reads n_kv consecutive-index rows (j = 0..n_kv-1) of K or V for one (kv head, seq) into a dense
// row-major [n_kv][D] matrix.
inline void read_kv_rows(const tensor_view& t, int64_t head, int64_t seq, codebook cb, std::vector<double>& dst) {
  const int64_t d = t.ne[0], n = t.ne[1];
  dst.resize(static_cast<size_t>(n * d));
  row_reader reader(t.type, d, cb);
  for (int64_t j = 0; j < n; ++j) reader.read(row_address(t.data, t.nb, j, head, seq), dst.data() + j * d);
}

// R and R^T of the format (format/rotation.hpp) on each 128-chunk of n doubles, in place.
inline void rotate_forward_f64(double* x, int64_t n) {
  for (int64_t b = 0; b < n; b += block_values) rotate_forward_group(x + b);
}
inline void rotate_inverse_f64(double* x, int64_t n) {
  for (int64_t b = 0; b < n; b += block_values) rotate_inverse_group(x + b);
}

inline void store_row(const output_view& out, int64_t i, int64_t h, int64_t s, const double* x, int64_t n) {
  unsigned char* dst = static_cast<unsigned char*>(out.data) + static_cast<size_t>(i) * out.nb[1] +
                       static_cast<size_t>(h) * out.nb[2] + static_cast<size_t>(s) * out.nb[3];
  for (int64_t d = 0; d < n; ++d) {
    const float f = static_cast<float>(x[d]);
    if (out.type == data_type::f16) {
      const uint16_t bits = fp16_from_float(f);
      std::memcpy(dst + 2 * d, &bits, sizeof bits);
    } else {
      std::memcpy(dst + 4 * d, &f, sizeof f);
    }
  }
}

inline bool is_kv_type(data_type t) {
  return t == data_type::f16 || t == data_type::turbo3 || t == data_type::turbo4 || t == data_type::turbo2 ||
         t == data_type::q8_0;
}
inline bool is_float_type(data_type t) { return t == data_type::f32 || t == data_type::f16; }

// The preconditions listed at the top of this header.
inline void assert_preconditions(const attention_params& p) {
  const int64_t n_kv = p.n_kv(), n_head = p.n_head(), n_head_kv = p.n_head_kv();
  assert(p.q.data != nullptr && p.k.data != nullptr && p.v.data != nullptr && p.out.data != nullptr);
  assert(is_float_type(p.q.type) && is_kv_type(p.k.type) && is_kv_type(p.v.type) && is_float_type(p.out.type));
  assert(p.head_dim_k() >= 1 && p.head_dim_v() >= 1 && p.n_q() >= 1 && n_head >= 1 && p.n_seq() >= 1);
  assert(n_kv >= 1 && n_head_kv >= 1);
  assert(p.k.ne[0] == p.head_dim_k() && p.k.ne[3] == p.n_seq());
  assert(p.v.ne[1] == n_kv && p.v.ne[2] == n_head_kv && p.v.ne[3] == p.n_seq());
  assert(n_head % n_head_kv == 0);
  assert(p.head_dim_k() % values_per_block(p.k.type) == 0);
  assert(p.head_dim_v() % values_per_block(p.v.type) == 0);
  assert(p.out.ne[0] == p.head_dim_v() && p.out.ne[1] == p.n_q() && p.out.ne[2] == n_head &&
         p.out.ne[3] == p.n_seq());
  assert(p.mask.data == nullptr || (p.mask.type == data_type::f16 && p.mask.ne[0] >= n_kv &&
                                    p.mask.ne[1] >= p.n_q() && p.mask.ne[2] >= 1 && p.mask.ne[3] >= 1));
  (void)p; (void)n_kv; (void)n_head; (void)n_head_kv;
}

// Softmax-weighted sum of the V rows for one query row, given its scores. visible[j] == 0 hides
// key j. Writes D_v values to out (zeros when no key is visible).
inline void softmax_weighted_sum(const std::vector<double>& score, const std::vector<unsigned char>& visible,
                                 const float* sink, const std::vector<double>& v, int64_t d_v, double* out) {
  const int64_t n_kv = static_cast<int64_t>(score.size());
  for (int64_t d = 0; d < d_v; ++d) out[d] = 0.0;

  bool any = false;
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n_kv; ++j) {
    if (visible[static_cast<size_t>(j)]) {
      any = true;
      max = std::fmax(max, score[static_cast<size_t>(j)]);
    }
  }
  if (!any) return;  // nothing to attend to: zeros, sink or not
  if (sink != nullptr) max = std::fmax(max, static_cast<double>(*sink));

  double sum = sink != nullptr ? std::exp(static_cast<double>(*sink) - max) : 0.0;
  for (int64_t j = 0; j < n_kv; ++j) {
    if (!visible[static_cast<size_t>(j)]) continue;
    const double w = std::exp(score[static_cast<size_t>(j)] - max);
    sum += w;
    const double* vj = v.data() + j * d_v;
    for (int64_t d = 0; d < d_v; ++d) out[d] += w * vj[d];
  }
  for (int64_t d = 0; d < d_v; ++d) out[d] /= sum;
}

}  // namespace detail

// The output rows of the (sequence, query head) pairs u = s * n_head + h in [begin, end), with the
// semantics at the top of this header: a caller can share one call among threads in disjoint
// ranges (each holds its own dense K/V rows in double, 2 x n_kv x D x 8 bytes). A KV head's rows
// are read once per run of its query heads; every row is computed the same way whatever the
// range, so the bytes do not depend on how the pairs are split.
inline void attention_pairs(const attention_params& p, int64_t begin, int64_t end) {
  detail::assert_preconditions(p);
  assert(0 <= begin && begin <= end && end <= p.n_seq() * p.n_head());

  const int64_t d_k = p.head_dim_k(), d_v = p.head_dim_v();
  const int64_t n_q = p.n_q(), n_head = p.n_head();
  const int64_t n_kv = p.n_kv(), n_head_kv = p.n_head_kv();
  const int64_t group = n_head / n_head_kv;
  const bool rotate_q = stores_rotated_values(p.k.type) && p.rotate_q;
  const bool unrotate_out = stores_rotated_values(p.v.type) && p.unrotate_out;
  const bool has_mask = p.mask.data != nullptr;
  const double scale = p.scale;
  const double softcap = p.softcap;

  std::vector<double> k_rows, v_rows;  // [n_kv][D] for the (kv head, seq) of `loaded`
  std::vector<double> q_row(static_cast<size_t>(d_k)), out_row(static_cast<size_t>(d_v));
  std::vector<double> score(static_cast<size_t>(n_kv));
  std::vector<unsigned char> visible(static_cast<size_t>(n_kv));
  detail::row_reader q_reader(p.q.type, d_k, p.kv_codebook);
  int64_t loaded = -1;  // s * n_head_kv + g of the rows in k_rows / v_rows
  for (int64_t u = begin; u < end; ++u) {
    const int64_t s = u / n_head, h = u % n_head, g = h / group;
    if (s * n_head_kv + g != loaded) {
      detail::read_kv_rows(p.k, g, s, p.kv_codebook, k_rows);
      detail::read_kv_rows(p.v, g, s, p.kv_codebook, v_rows);
      loaded = s * n_head_kv + g;
    }
    const double slope =
        std::exp2(static_cast<double>(alibi_slope_log2(p.max_bias, static_cast<int>(h), static_cast<int>(n_head))));
    const float* sink = p.sinks != nullptr ? p.sinks + h : nullptr;

    for (int64_t i = 0; i < n_q; ++i) {
      q_reader.read(detail::row_address(p.q.data, p.q.nb, i, h, s), q_row.data());
      if (rotate_q) detail::rotate_forward_f64(q_row.data(), d_k);

      const unsigned char* mask_row =
          has_mask ? detail::row_address(p.mask.data, p.mask.nb, i, h % p.mask.ne[2], s % p.mask.ne[3]) : nullptr;
      for (int64_t j = 0; j < n_kv; ++j) {
        const size_t js = static_cast<size_t>(j);
        visible[js] = 0;
        if (p.causal && j > i + (n_kv - n_q)) continue;
        double m = 0.0;
        if (has_mask) {
          m = detail::load_f16(mask_row + 2 * j);
          if (std::isinf(m) && m < 0) continue;
        }
        const double* kj = k_rows.data() + j * d_k;
        double dot = 0.0;
        for (int64_t d = 0; d < d_k; ++d) dot += q_row[static_cast<size_t>(d)] * kj[d];
        double x = scale * dot;
        if (softcap > 0.0) x = softcap * std::tanh(x / softcap);
        if (has_mask) x += slope * m;
        score[js] = x;
        visible[js] = 1;
      }

      detail::softmax_weighted_sum(score, visible, sink, v_rows, d_v, out_row.data());
      if (unrotate_out) detail::rotate_inverse_f64(out_row.data(), d_v);
      detail::store_row(p.out, i, h, s, out_row.data(), d_v);
    }
  }
}

// Attention over host memory, in double, with the semantics at the top of this header.
inline void attention(const attention_params& p) { attention_pairs(p, 0, p.n_seq() * p.n_head()); }

}  // namespace ref
}  // namespace turbo3
