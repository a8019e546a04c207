// write_rows on the device against ref::quantize_row: identical bytes expected.
#include "gpu_common.hpp"

#include <algorithm>
#include <cmath>

#include "turbo3/ref/quantize.hpp"
#include "turbo3/ref/storage.hpp"
#include "turbo3/write.hpp"

using namespace turbo3;
using turbo3_test::device_buffer;

namespace {

enum class row_kind { random, outliers, tiny, huge, zero, mixed };

std::vector<float> make_rows(row_kind kind, int64_t n_rows, int64_t n_cols, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_rows * n_cols));
  for (size_t i = 0; i < x.size(); ++i) {
    float v = normal(rng);
    switch (kind) {
      case row_kind::random: break;
      case row_kind::outliers: v *= unit(rng) < 0.02f ? 200.0f : 1.0f; break;
      case row_kind::tiny: v *= 1e-6f; break;
      case row_kind::huge: v *= 1e3f; break;
      case row_kind::zero: v = 0.0f; break;
      case row_kind::mixed: v = (i / 128) % 5 == 0 ? 0.0f : v * std::exp2(static_cast<float>((i / 128) % 9) * 2 - 8); break;
    }
    x[i] = v;
  }
  return x;
}

struct compare_result {
  int64_t blocks = 0, differing = 0, norm_last_bit_only = 0;
};

compare_result compare_blocks(const std::vector<block_turbo3>& got, const std::vector<block_turbo3>& want) {
  compare_result r;
  r.blocks = static_cast<int64_t>(want.size());
  for (size_t b = 0; b < want.size(); ++b) {
    if (std::memcmp(&got[b], &want[b], sizeof(block_turbo3)) == 0) continue;
    ++r.differing;
    const bool same_indices = std::memcmp(got[b].qs, want[b].qs, sizeof(want[b].qs)) == 0 &&
                              std::memcmp(got[b].signs, want[b].signs, sizeof(want[b].signs)) == 0;
    const int norm_diff = std::abs(int(got[b].norm) - int(want[b].norm));
    if (same_indices && norm_diff == 1) ++r.norm_last_bit_only;
  }
  return r;
}

// Row ids scattering n_rows source rows over a cache of twice as many rows (a permutation).
template <class Index>
std::vector<Index> scattered_ids(int64_t n_rows, std::mt19937_64& rng) {
  const int64_t cap = 2 * n_rows;
  std::vector<int64_t> perm(static_cast<size_t>(cap));
  for (int64_t i = 0; i < cap; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<Index> ids(static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) ids[r] = static_cast<Index>(perm[r]);
  return ids;
}

// The source rows as the device reads them: src_type values, rows padded by 64 bytes.
struct padded_rows {
  std::vector<uint8_t> bytes;
  size_t stride = 0;
};
padded_rows padded_source(data_type src_type, const std::vector<float>& x, int64_t n_rows, int64_t n_cols) {
  padded_rows rows;
  rows.stride = row_bytes(src_type, n_cols) + 64;
  rows.bytes.assign(rows.stride * n_rows, 0);
  for (int64_t r = 0; r < n_rows; ++r) ref::store_row(src_type, &x[r * n_cols], &rows.bytes[r * rows.stride], n_cols);
  return rows;
}

template <class Index>
compare_result run_turbo3_case(row_kind kind, data_type src_type, int64_t n_rows, int64_t n_cols, codebook cb,
                               std::mt19937_64& rng) {
  std::vector<float> x = make_rows(kind, n_rows, n_cols, rng);
  if (src_type == data_type::f16)  // the reference sees exactly the values the device reads
    for (float& v : x) v = fp16_to_float(fp16_from_float(v));
  // Destination: twice as many rows as written, rows scattered by a permutation.
  const int64_t cap = 2 * n_rows;
  const std::vector<Index> ids = scattered_ids<Index>(n_rows, rng);
  const padded_rows source = padded_source(src_type, x, n_rows, n_cols);
  const std::vector<uint8_t>& src_host = source.bytes;
  const size_t src_stride = source.stride;
  const size_t dst_stride = row_bytes(data_type::turbo3, n_cols);
  device_buffer d_src(src_host.size()), d_ids(ids.size() * sizeof(Index)), d_dst(dst_stride * cap);
  d_src.upload(src_host.data(), src_host.size());
  d_ids.upload(ids.data(), ids.size() * sizeof(Index));
  d_dst.poison(0xA5);

  row_source src{d_src.ptr, src_type, n_cols, n_rows, src_stride};
  cache_view dst{d_dst.ptr, data_type::turbo3, n_cols, cap, dst_stride};
  REQUIRE(write_rows(src, d_ids.as<Index>(), dst, nullptr, cb) == status::ok);
  TURBO3_CHECK_HIP(hipDeviceSynchronize());

  std::vector<uint8_t> dst_host(dst_stride * cap);
  d_dst.download(dst_host.data(), dst_host.size());
  const int64_t bpr = n_cols / block_values;
  std::vector<block_turbo3> got(static_cast<size_t>(n_rows * bpr)), want(got.size());
  for (int64_t r = 0; r < n_rows; ++r) {
    std::memcpy(&got[r * bpr], &dst_host[ids[r] * dst_stride], dst_stride);
    ref::quantize_row(&x[r * n_cols], &want[r * bpr], n_cols, cb);
  }
  // Rows not written keep the poison.
  std::vector<bool> written(static_cast<size_t>(cap), false);
  for (int64_t r = 0; r < n_rows; ++r) written[ids[r]] = true;
  for (int64_t r = 0; r < cap; ++r)
    if (!written[r])
      for (size_t b = 0; b < dst_stride; ++b) REQUIRE(dst_host[r * dst_stride + b] == 0xA5);
  return compare_blocks(got, want);
}

// The same for a turbo4, turbo2 or q8_0 cache against ref::store_row, block by block as bytes: a
// block differs only in its norm's last bit (the turbo types' first two bytes), or not at all.
template <class Index>
compare_result run_block_case(data_type dst_type, row_kind kind, data_type src_type, int64_t n_rows, int64_t n_cols,
                              std::mt19937_64& rng) {
  std::vector<float> x = make_rows(kind, n_rows, n_cols, rng);
  if (src_type == data_type::f16)
    for (float& v : x) v = fp16_to_float(fp16_from_float(v));
  const int64_t cap = 2 * n_rows;
  const std::vector<Index> ids = scattered_ids<Index>(n_rows, rng);
  const padded_rows source = padded_source(src_type, x, n_rows, n_cols);
  const std::vector<uint8_t>& src_host = source.bytes;
  const size_t src_stride = source.stride;
  const size_t dst_stride = row_bytes(dst_type, n_cols) + 2;  // rows 2-byte aligned only
  device_buffer d_src(src_host.size()), d_ids(ids.size() * sizeof(Index)), d_dst(dst_stride * cap);
  d_src.upload(src_host.data(), src_host.size());
  d_ids.upload(ids.data(), ids.size() * sizeof(Index));
  d_dst.poison(0xA5);
  row_source src{d_src.ptr, src_type, n_cols, n_rows, src_stride};
  cache_view dst{d_dst.ptr, dst_type, n_cols, cap, dst_stride};
  REQUIRE(write_rows(src, d_ids.as<Index>(), dst, nullptr) == status::ok);
  TURBO3_CHECK_HIP(hipDeviceSynchronize());
  std::vector<uint8_t> dst_host(dst_stride * cap);
  d_dst.download(dst_host.data(), dst_host.size());
  const size_t bb = bytes_per_block(dst_type);
  const int64_t bpr = n_cols / values_per_block(dst_type);
  const bool has_norm = dst_type != data_type::q8_0;
  compare_result res;
  std::vector<uint8_t> want(row_bytes(dst_type, n_cols));
  std::vector<bool> written(static_cast<size_t>(cap), false);
  for (int64_t r = 0; r < n_rows; ++r) {
    written[ids[r]] = true;
    ref::store_row(dst_type, &x[r * n_cols], want.data(), n_cols);
    const uint8_t* got = &dst_host[ids[r] * dst_stride];
    for (int64_t b = 0; b < bpr; ++b) {
      ++res.blocks;
      const uint8_t* g = got + b * bb;
      const uint8_t* w = want.data() + b * bb;
      if (std::memcmp(g, w, bb) == 0) continue;
      ++res.differing;
      uint16_t gn, wn;
      std::memcpy(&gn, g, 2);
      std::memcpy(&wn, w, 2);
      if (has_norm && std::memcmp(g + 2, w + 2, bb - 2) == 0 && std::abs(int(gn) - int(wn)) == 1) ++res.norm_last_bit_only;
    }
    REQUIRE(dst_host[ids[r] * dst_stride + dst_stride - 1] == 0xA5);  // the row's padding
  }
  for (int64_t r = 0; r < cap; ++r)
    if (!written[r])
      for (size_t b = 0; b < dst_stride; ++b) REQUIRE(dst_host[r * dst_stride + b] == 0xA5);
  return res;
}

}  // namespace

TEST_CASE("write_rows turbo4, turbo2 and q8_0 bytes equal ref::store_row", "[write]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x5717f);
  const row_kind kinds[] = {row_kind::random, row_kind::outliers, row_kind::tiny,
                            row_kind::huge,   row_kind::zero,     row_kind::mixed};
  for (data_type t : {data_type::turbo4, data_type::turbo2, data_type::q8_0}) {
    compare_result total;
    for (row_kind kind : kinds)
      for (data_type st : {data_type::f32, data_type::f16}) {
        const compare_result r = kind == row_kind::random
                                     ? run_block_case<int64_t>(t, kind, st, 512, 1024, rng)
                                     : run_block_case<int32_t>(t, kind, st, 129, 256, rng);
        INFO(to_string(t) << " kind " << static_cast<int>(kind) << " src " << to_string(st) << ": " << r.differing
                          << " of " << r.blocks << " blocks differ");
        CHECK(r.differing == r.norm_last_bit_only);  // q8_0: none at all
        total.blocks += r.blocks;
        total.differing += r.differing;
        total.norm_last_bit_only += r.norm_last_bit_only;
      }
    std::printf("write_rows %s: %lld of %lld blocks differ from ref::store_row (%lld only in the norm's last bit)\n",
                to_string(t), static_cast<long long>(total.differing), static_cast<long long>(total.blocks),
                static_cast<long long>(total.norm_last_bit_only));
    CHECK(total.differing * 1000 <= total.blocks);
  }
}

TEST_CASE("write_rows turbo3 bytes equal ref::quantize_row", "[write]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x5717e);
  struct kind_case { row_kind kind; const char* name; };
  const kind_case kinds[] = {{row_kind::random, "random"}, {row_kind::outliers, "outliers"},
                             {row_kind::tiny, "tiny"},     {row_kind::huge, "huge"},
                             {row_kind::zero, "zero"},     {row_kind::mixed, "mixed"}};
  compare_result total;
  for (const auto& k : kinds) {
    for (codebook cb : {codebook::lloyd_max, codebook::legacy}) {
      for (data_type st : {data_type::f32, data_type::f16}) {
        const compare_result r = k.kind == row_kind::random
                                     ? run_turbo3_case<int64_t>(k.kind, st, 1024, 1024, cb, rng)
                                     : run_turbo3_case<int32_t>(k.kind, st, 257, 256, cb, rng);
        INFO(k.name << " " << to_string(cb) << " src " << to_string(st) << ": " << r.differing << " of "
                    << r.blocks << " blocks differ");
        CHECK(r.differing == r.norm_last_bit_only);  // any difference is the norm's last bit only
        total.blocks += r.blocks;
        total.differing += r.differing;
        total.norm_last_bit_only += r.norm_last_bit_only;
      }
    }
  }
  std::printf("write_rows: %lld of %lld blocks differ from ref::quantize_row (%lld only in the norm's last bit)\n",
              static_cast<long long>(total.differing), static_cast<long long>(total.blocks),
              static_cast<long long>(total.norm_last_bit_only));
  CHECK(total.differing * 1000 <= total.blocks);  // at most 0.1%
}

TEST_CASE("write_rows f16 cache copies rows with round-to-nearest-even", "[write]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xf16);
  const int64_t n_rows = 33, n_cols = 192, cap = 40;
  std::vector<float> x = make_rows(row_kind::random, n_rows, n_cols, rng);
  std::vector<int32_t> ids(n_rows);
  for (int64_t r = 0; r < n_rows; ++r) ids[r] = static_cast<int32_t>((r * 7) % cap);
  device_buffer d_src(x.size() * 4), d_ids(ids.size() * 4), d_dst(cap * n_cols * 2);
  d_src.upload(x.data(), x.size() * 4);
  d_ids.upload(ids.data(), ids.size() * 4);
  d_dst.poison();
  row_source src{d_src.ptr, data_type::f32, n_cols, n_rows, static_cast<size_t>(n_cols * 4)};
  cache_view dst{d_dst.ptr, data_type::f16, n_cols, cap, static_cast<size_t>(n_cols * 2)};
  REQUIRE(write_rows(src, d_ids.as<int32_t>(), dst, nullptr) == status::ok);
  std::vector<uint16_t> out(cap * n_cols);
  d_dst.download(out.data(), out.size() * 2);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < n_cols; ++c) REQUIRE(out[ids[r] * n_cols + c] == fp16_from_float(x[r * n_cols + c]));
}

TEST_CASE("write_rows rejects bad arguments without touching the cache", "[write]") {
  device_buffer d_src(128 * 4 * 2), d_dst(100);
  d_dst.poison(0x3C);
  row_source src{d_src.ptr, data_type::f32, 128, 2, 512};
  cache_view dst{d_dst.ptr, data_type::turbo3, 128, 2, 50};
  const int32_t* ids = nullptr;
  CHECK(write_rows(src, ids, dst, nullptr) == status::ok);
  TURBO3_CHECK_HIP(hipDeviceSynchronize());
  d_dst.poison(0x3C);
  auto expect = [&](row_source s, cache_view d, status want) {
    CHECK(write_rows(s, ids, d, nullptr) == want);
  };
  { auto s = src; s.data = nullptr; expect(s, dst, status::invalid_argument); }
  { auto d = dst; d.data = nullptr; expect(src, d, status::invalid_argument); }
  { auto s = src; s.n_cols = 100; auto d = dst; d.n_cols = 100; expect(s, d, status::invalid_argument); }  // not 128k
  { auto s = src; s.n_cols = 0; expect(s, dst, status::invalid_argument); }
  { auto s = src; s.n_rows = -1; expect(s, dst, status::invalid_argument); }
  { auto d = dst; d.n_cols = 256; expect(src, d, status::invalid_argument); }  // widths disagree
  { auto s = src; s.type = data_type::turbo3; expect(s, dst, status::unsupported); }
  { auto d = dst; d.type = data_type::f32; expect(src, d, status::unsupported); }
  { auto s = src; s.row_stride = 256; expect(s, dst, status::invalid_argument); }  // rows overlap
  { auto d = dst; d.row_stride = 40; expect(src, d, status::invalid_argument); }
  { auto s = src; s.data = static_cast<char*>(d_src.ptr) + 2; expect(s, dst, status::invalid_argument); }  // misaligned
  std::vector<uint8_t> out(100);
  d_dst.download(out.data(), out.size());
  for (uint8_t b : out) REQUIRE(b == 0x3C);
}
