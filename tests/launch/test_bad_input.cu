// flash_attention rejects bad input before any runtime call: this binary is built by nvcc but
// needs no GPU (it runs in CI). Every buffer is host memory that a launch would never accept; a
// rejected call must leave the poisoned output untouched.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "turbo3/turbo3.hpp"

using namespace turbo3;

namespace {

// An output a refused call must leave as it was: every bit set.
void poison_floats(std::vector<float>& out) { std::memset(out.data(), 0xff, out.size() * sizeof(float)); }
bool all_poisoned(const std::vector<float>& out) {
  return std::all_of(out.begin(), out.end(), [](float x) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    return b == 0xffffffffu;
  });
}

struct host_problem {
  static constexpr int D = 128, n_q = 1, n_kv = 64, H = 8, HKV = 2;
  std::vector<float> q = std::vector<float>(D * n_q * H, 1.0f);
  // K and V hold the f16 views with_head_dim makes too (D <= 128), so no view spans past its buffer
  // into another (validate() refuses an out that overlaps an input).
  std::vector<uint8_t> k = std::vector<uint8_t>(row_bytes(data_type::f16, D) * n_kv * HKV);
  std::vector<uint8_t> v = std::vector<uint8_t>(k.size());
  std::vector<uint16_t> mask = std::vector<uint16_t>(n_kv * n_q, 0);
  std::vector<float> out = std::vector<float>(D * n_q * H);

  attention_params params() {
    attention_params p;
    p.q.data = q.data(); p.q.type = data_type::f32;
    p.q.ne[0] = D; p.q.ne[1] = n_q; p.q.ne[2] = H; p.q.ne[3] = 1;
    p.q.nb[1] = D * 4; p.q.nb[2] = p.q.nb[1] * n_q; p.q.nb[3] = p.q.nb[2] * H;
    for (tensor_view* t : {&p.k, &p.v}) {
      t->data = t == &p.k ? k.data() : v.data();
      t->type = data_type::turbo3;
      t->ne[0] = D; t->ne[1] = n_kv; t->ne[2] = HKV; t->ne[3] = 1;
      t->nb[1] = row_bytes(data_type::turbo3, D); t->nb[2] = t->nb[1] * n_kv; t->nb[3] = t->nb[2] * HKV;
    }
    p.out.data = out.data(); p.out.type = data_type::f32;
    p.out.ne[0] = D; p.out.ne[1] = n_q; p.out.ne[2] = H; p.out.ne[3] = 1;
    p.out.nb[1] = D * 4; p.out.nb[2] = p.out.nb[1] * n_q; p.out.nb[3] = p.out.nb[2] * H;
    p.scale = 0.1f;
    return p;
  }
  void poison() { poison_floats(out); }
  bool still_poisoned() const { return all_poisoned(out); }
};

// An allocator that must never be reached by a rejected call.
struct tripwire_allocator {
  static constexpr bool capture_safe = true;
  int calls = 0;
  void* allocate(size_t, hipStream_t) { ++calls; return nullptr; }
  void deallocate(void*, size_t, hipStream_t) { ++calls; }
};

void expect_rejected(host_problem& hp, const attention_params& p, status want) {
  hp.poison();
  tripwire_allocator alloc;
  CHECK(flash_attention(p, alloc, nullptr) == want);
  CHECK(alloc.calls == 0);
  CHECK(hp.still_poisoned());
  CHECK(workspace_bytes(p) == 0);
}

// A call the options' family cannot serve: `unsupported` everywhere, no workspace or counters,
// no allocation, the output untouched.
void expect_unsupported(const attention_params& p, const launch_options& opt, std::vector<float>& out) {
  CHECK(supported(p, opt) == status::unsupported);
  CHECK(workspace_bytes(p, opt) == 0);
  CHECK(counter_bytes(p, opt) == 0);
  poison_floats(out);
  tripwire_allocator alloc;
  CHECK(flash_attention(p, alloc, nullptr, opt) == status::unsupported);
  CHECK(alloc.calls == 0);
  CHECK(all_poisoned(out));
}

// p with K and V of type kv at head dim d (Q and out follow), rows packed as in host_problem.
attention_params with_head_dim(attention_params p, data_type kv, int d) {
  p.k.type = p.v.type = kv;
  p.q.ne[0] = p.k.ne[0] = p.v.ne[0] = p.out.ne[0] = d;
  p.k.nb[1] = p.v.nb[1] = row_bytes(kv, d);
  p.k.nb[2] = p.v.nb[2] = p.k.nb[1] * host_problem::n_kv;
  p.k.nb[3] = p.v.nb[3] = p.k.nb[2] * host_problem::HKV;
  return p;
}

}  // namespace

TEST_CASE("flash_attention: each invalid field returns its status, launches nothing, output untouched", "[bad_input]") {
  host_problem hp;
  const attention_params good = hp.params();
  REQUIRE(validate(good) == status::ok);
  { auto p = good; p.q.data = nullptr; expect_rejected(hp, p, status::invalid_argument); }
  { auto p = good; p.k.data = nullptr; expect_rejected(hp, p, status::invalid_argument); }
  { auto p = good; p.v.data = nullptr; expect_rejected(hp, p, status::invalid_argument); }
  { auto p = good; p.out.data = nullptr; expect_rejected(hp, p, status::invalid_argument); }
  { auto p = good; p.q.ne[1] = 0; p.out.ne[1] = 0; expect_rejected(hp, p, status::invalid_argument); }
  { auto p = good; p.k.ne[1] = -4; p.v.ne[1] = -4; expect_rejected(hp, p, status::invalid_argument); }
  { auto p = good; p.q.ne[2] = 7; p.out.ne[2] = 7; expect_rejected(hp, p, status::invalid_argument); }  // 7 % 2
  { auto p = good; p.q.type = data_type::turbo3; expect_rejected(hp, p, status::unsupported); }
  { auto p = good; p.out.type = data_type::turbo3; expect_rejected(hp, p, status::unsupported); }
  { auto p = good; p.k.type = data_type::f32; expect_rejected(hp, p, status::unsupported); }
  {  // turbo3 needs a multiple of 128
    auto p = good;
    p.q.ne[0] = p.k.ne[0] = p.v.ne[0] = p.out.ne[0] = 64;
    expect_rejected(hp, p, status::unsupported);
  }
  // a head dim no kernel covers (f16, 96)
  expect_rejected(hp, with_head_dim(good, data_type::f16, 96), status::unsupported);
  { auto p = good; p.k.nb[1] = 10; expect_rejected(hp, p, status::invalid_argument); }   // rows overlap
  { auto p = good; p.v.ne[1] = hp.n_kv - 1; expect_rejected(hp, p, status::invalid_argument); }  // K/V disagree
  { auto p = good; p.out.ne[0] = 64; expect_rejected(hp, p, status::invalid_argument); }
  {  // mask too small
    auto p = good;
    p.mask.data = hp.mask.data(); p.mask.type = data_type::f16;
    p.mask.ne[0] = hp.n_kv - 1; p.mask.ne[1] = 1;
    p.mask.nb[1] = p.mask.ne[0] * 2; p.mask.nb[2] = p.mask.nb[3] = p.mask.nb[1];
    expect_rejected(hp, p, status::invalid_argument);
  }
  { auto p = good; p.scale = NAN; expect_rejected(hp, p, status::invalid_argument); }
  { auto p = good; p.softcap = -1.0f; expect_rejected(hp, p, status::invalid_argument); }
  { auto p = good; p.max_bias = -1.0f; expect_rejected(hp, p, status::invalid_argument); }
  // forcing a prefill route on a head dim it does not take (f16, 96): unsupported, nothing touched
  for (kernel_choice k : {kernel_choice::tile, kernel_choice::materialize, kernel_choice::mma}) {
    const attention_params p = with_head_dim(good, data_type::f16, 96);
    hp.poison();
    tripwire_allocator alloc;
    launch_options opt;
    opt.kernel = k;
    CHECK(flash_attention(p, alloc, nullptr, opt) == status::unsupported);
    CHECK(workspace_bytes(p, opt) == 0);
    CHECK(alloc.calls == 0);
    CHECK(hp.still_poisoned());
  }
  // MMA covers D = 128 and 256 only: f16 D = 64 (a TILE head dim) is unsupported for it
  {
    const attention_params p = with_head_dim(good, data_type::f16, 64);
    hp.poison();
    tripwire_allocator alloc;
    launch_options opt;
    opt.kernel = kernel_choice::mma;
    CHECK(flash_attention(p, alloc, nullptr, opt) == status::unsupported);
    CHECK(workspace_bytes(p, opt) == 0);
    CHECK(alloc.calls == 0);
    CHECK(hp.still_poisoned());
  }
}

// The automatic route is decided on the host from the shapes and the device's family (under nvcc
// the family is NVIDIA without a runtime call), so it is checked here without a GPU; the GPU tests
// check that each route computes the right thing.
TEST_CASE("routing: n_q <= 2 to VEC; prefill to MMA where the family runs it by default, else TILE, else VEC", "[routing]") {
  host_problem hp;
  const kernel_choice prefill_default =
      detail::mma_by_default(platform::current_device_family()) ? kernel_choice::mma : kernel_choice::tile;
  auto with_queries = [](attention_params p, int n_q) {
    p.q.ne[1] = p.out.ne[1] = n_q;
    return p;
  };
  const attention_params decode = hp.params();  // turbo3, D = 128, one query
  CHECK(turbo3::route(decode, {}) == kernel_choice::vec);
  CHECK(turbo3::route(with_queries(decode, 2), {}) == kernel_choice::vec);
  // a turbo3 verify batch of up to 16 rows per KV head (GQA 4 here): the warp decode kernel on
  // NVIDIA (vec_takes_verify_batch), the prefill route past it
  CHECK(turbo3::route(with_queries(decode, 4), {}) ==
        (prefill_default == kernel_choice::mma ? kernel_choice::vec : prefill_default));
  CHECK(turbo3::route(with_queries(decode, 5), {}) == prefill_default);
  CHECK(turbo3::route(with_queries(with_head_dim(decode, data_type::turbo3, 256), 40), {}) == prefill_default);
  CHECK(turbo3::route(with_queries(with_head_dim(decode, data_type::f16, 128), 40), {}) == prefill_default);
  // f16 D = 64: MMA does not cover it, TILE does
  CHECK(turbo3::route(with_queries(with_head_dim(decode, data_type::f16, 64), 40), {}) == kernel_choice::tile);
  // D = 512: no MMA kernel has it; TILE takes prefill, VEC verify batches (up to 16 queries)
  for (data_type t : {data_type::turbo3, data_type::f16}) {
    CHECK(turbo3::route(with_queries(with_head_dim(decode, t, 512), 40), {}) == kernel_choice::tile);
    CHECK(turbo3::route(with_queries(with_head_dim(decode, t, 512), 17), {}) == kernel_choice::tile);
    CHECK(turbo3::route(with_queries(with_head_dim(decode, t, 512), 16), {}) == kernel_choice::vec);
    CHECK(turbo3::route(with_queries(with_head_dim(decode, t, 512), 3), {}) == kernel_choice::vec);
  }
  // a forced kernel is taken as given
  for (kernel_choice k : {kernel_choice::vec, kernel_choice::tile, kernel_choice::materialize, kernel_choice::mma}) {
    launch_options opt;
    opt.kernel = k;
    CHECK(turbo3::route(decode, opt) == k);
    CHECK(turbo3::route(with_queries(decode, 40), opt) == k);
  }
}

// D = 512 with f16 and turbo3 K/V: TILE serves prefill (forced or automatic, and materialize's
// dense call), VEC decode and verify batches, MMA refuses it; K and V of different head dims are
// unsupported on every family, before any allocation or launch, but for MLA's cache (K 640, V a
// view of its first 512 values) on the warp decode kernel.
TEST_CASE("D = 512: TILE serves prefill, VEC decode and verify batches; D_k != D_v only in MLA's V-in-K form", "[routing]") {
  constexpr int64_t n_kv = 40, H = 8, HKV = 2;
  std::vector<float> q, out;
  std::vector<uint8_t> k, v;
  auto problem = [&](data_type kt, int64_t dk, data_type vt, int64_t dv, int64_t n_q) {
    q.assign(static_cast<size_t>(dk * n_q * H), 0.5f);
    out.assign(static_cast<size_t>(dv * n_q * H), 0.0f);
    k.assign(row_bytes(kt, dk) * n_kv * HKV, 0);
    v.assign(row_bytes(vt, dv) * n_kv * HKV, 0);
    attention_params p;
    p.q.data = q.data(); p.q.type = data_type::f32;
    p.q.ne[0] = dk; p.q.ne[1] = n_q; p.q.ne[2] = H; p.q.ne[3] = 1;
    p.q.nb[1] = dk * 4; p.q.nb[2] = p.q.nb[1] * n_q; p.q.nb[3] = p.q.nb[2] * H;
    for (tensor_view* t : {&p.k, &p.v}) {
      const bool is_k = t == &p.k;
      t->data = is_k ? k.data() : v.data();
      t->type = is_k ? kt : vt;
      t->ne[0] = is_k ? dk : dv; t->ne[1] = n_kv; t->ne[2] = HKV; t->ne[3] = 1;
      t->nb[1] = row_bytes(t->type, t->ne[0]); t->nb[2] = t->nb[1] * n_kv; t->nb[3] = t->nb[2] * HKV;
    }
    p.out.data = out.data(); p.out.type = data_type::f32;
    p.out.ne[0] = dv; p.out.ne[1] = n_q; p.out.ne[2] = H; p.out.ne[3] = 1;
    p.out.nb[1] = dv * 4; p.out.nb[2] = p.out.nb[1] * n_q; p.out.nb[3] = p.out.nb[2] * H;
    p.scale = 0.1f;
    return p;
  };
  auto forced_kernel = [](kernel_choice kernel) {
    launch_options opt;
    opt.kernel = kernel;
    return opt;
  };
  for (data_type kt : {data_type::f16, data_type::turbo3})
    for (data_type vt : {data_type::f16, data_type::turbo3})
      for (int64_t n_q : {1, 2, 3, 16, 17, 40}) {
        INFO("k " << to_string(kt) << " v " << to_string(vt) << " n_q " << n_q);
        const attention_params p = problem(kt, 512, vt, 512, n_q);
        REQUIRE(validate(p) == status::ok);
        CHECK(detail::tile_supported(p) == status::ok);
        CHECK(detail::vec_supported(p) == status::ok);
        CHECK(detail::mma_supported(p) == status::unsupported);
        CHECK(detail::materialize_supported(p) == status::ok);
        CHECK(turbo3::route(p) == (n_q <= 16 ? kernel_choice::vec : kernel_choice::tile));
        CHECK(supported(p) == status::ok);
        CHECK(supported(p, forced_kernel(kernel_choice::tile)) == status::ok);
        CHECK(supported(p, forced_kernel(kernel_choice::vec)) == status::ok);
        CHECK(supported(p, forced_kernel(kernel_choice::materialize)) == status::ok);
        CHECK(workspace_bytes(p, forced_kernel(kernel_choice::tile)) == 0);  // TILE keeps no temporaries
        // materialize: a dense f16 copy of each turbo3 view (1 KB a row), the TILE call over them
        const size_t copies = (kt == data_type::turbo3) + (vt == data_type::turbo3);
        CHECK(workspace_bytes(p, forced_kernel(kernel_choice::materialize)) ==
              (copies > 0 ? 255 + copies * n_kv * HKV * 1024 : 0));
        CHECK(supported(p, forced_kernel(kernel_choice::mma)) == status::unsupported);
        CHECK(workspace_bytes(p, forced_kernel(kernel_choice::mma)) == 0);
      }
  // MLA's cache: K rows of 640 values, V a view of each row's first 512 (v_view_of_k). The warp
  // decode kernel's V-in-K form serves turbo3, turbo2 and turbo4 at every n_q (NVIDIA builds); V
  // apart from K, other types and other head dim pairs are unsupported.
  auto v_in_k = [&](attention_params p) {
    p.v = p.k;
    p.v.ne[0] = 512;
    return p;
  };
  for (data_type t : {data_type::turbo3, data_type::turbo2, data_type::turbo4, data_type::q8_0, data_type::f16})
    for (int64_t n_q : {1, 3, 40}) {
      INFO("type " << to_string(t) << " n_q " << n_q);
      const attention_params p = v_in_k(problem(t, 640, t, 512, n_q));
      REQUIRE(validate(p) == status::ok);
      const bool served = platform::has_mma_m16n8k16 && t != data_type::q8_0 && t != data_type::f16;
      CHECK(detail::vec_supported(p) == (served ? status::ok : status::unsupported));
      for (auto family_supported : {detail::tile_supported, detail::mma_supported, detail::materialize_supported})
        CHECK(family_supported(p) == status::unsupported);
      CHECK(supported(p) == (served ? status::ok : status::unsupported));
      if (served) CHECK(turbo3::route(p) == kernel_choice::vec);
      // The same K and a V of its own: unsupported.
      attention_params apart = problem(t, 640, t, 512, n_q);
      CHECK(detail::vec_supported(apart) == status::unsupported);
      // V's view starting past K's first value, or with other strides: not V in K.
      attention_params shifted = p;
      shifted.v.data = static_cast<const uint8_t*>(p.k.data) + 2;
      CHECK(detail::vec_supported(shifted) == status::unsupported);
      attention_params strided = p;
      strided.v.nb[2] += 2;
      CHECK(detail::vec_supported(strided) == status::unsupported);
    }
  if (platform::has_mma_m16n8k16) {
    // GQA up to 128 (DeepSeek-V3's 128 query heads over MLA's one KV head); 256 past the limit.
    for (int64_t heads : {int64_t{128}, int64_t{256}}) {
      attention_params p = v_in_k(problem(data_type::turbo3, 640, data_type::turbo3, 512, 1));
      q.assign(static_cast<size_t>(640 * heads), 0.5f);
      out.assign(static_cast<size_t>(512 * heads), 0.0f);
      p.q.data = q.data();
      p.out.data = out.data();
      p.q.ne[2] = p.out.ne[2] = heads;
      p.q.nb[3] = p.q.nb[2] * heads;
      p.out.nb[3] = p.out.nb[2] * heads;
      p.k.ne[2] = p.v.ne[2] = 1;
      INFO("query heads " << heads);
      REQUIRE(validate(p) == status::ok);
      CHECK(detail::vec_supported(p) == (heads <= detail::vec_max_gqa ? status::ok : status::unsupported));
      // 8 rows a work-group (2 value column blocks), turbo4 as well.
      CHECK(detail::vec_rows_of(p, true).heads_per_block == 8);
      p.k.type = p.v.type = data_type::turbo4;
      p.k.nb[1] = p.v.nb[1] = row_bytes(data_type::turbo4, 640);
      p.k.nb[2] = p.v.nb[2] = p.k.nb[1] * n_kv;
      p.k.nb[3] = p.v.nb[3] = p.k.nb[2];
      CHECK(detail::vec_rows_of(p, true).heads_per_block == 8);
    }
    // 576 / 512 (MLA's rows unpadded): not whole turbo blocks for K (validate), and f16 or q8_0 at
    // 576 have no kernel.
    for (data_type t : {data_type::f16, data_type::q8_0}) {
      const attention_params p = v_in_k(problem(t, 576, t, 512, 1));
      REQUIRE(validate(p) == status::ok);
      CHECK(supported(p) == status::unsupported);
    }
  }
  // D_k = 512 with D_v = 256 and the reverse: no family has a kernel for two head dims.
  for (data_type t : {data_type::f16, data_type::turbo3})
    for (int64_t n_q : {1, 40})
      for (bool k_wider : {true, false}) {
        const int64_t dk = k_wider ? 512 : 256, dv = k_wider ? 256 : 512;
        INFO("type " << to_string(t) << " D_k " << dk << " D_v " << dv << " n_q " << n_q);
        const attention_params p = problem(t, dk, t, dv, n_q);
        REQUIRE(validate(p) == status::ok);
        CHECK(detail::tile_supported(p) == status::unsupported);
        CHECK(detail::vec_supported(p) == status::unsupported);
        CHECK(detail::mma_supported(p) == status::unsupported);
        CHECK(detail::materialize_supported(p) == status::unsupported);
        CHECK(supported(p) == status::unsupported);
        for (kernel_choice kernel :
             {kernel_choice::automatic, kernel_choice::vec, kernel_choice::tile, kernel_choice::materialize,
              kernel_choice::mma}) {
          expect_unsupported(p, forced_kernel(kernel), out);
        }
      }
}

// The warp decode kernel's layout and merge rules (host only): the wide form (16 rows a
// work-group, 8 warps) at D = 128 over any number of KV heads and at D = 256 over at least 8 KV
// heads x sequences, two 8-row work-groups per KV head at D = 256 over fewer (a verify batch still
// goes to the decode kernel, in two query tiles); 8 rows for pairs without the wide form (mixed
// turbo pairs; q8_0 K at D = 256 with a mask); the combine kernel only past 32 merge round trips
// per warp.
TEST_CASE("VEC warp kernel: the wide form by head dim and KV heads; the combine kernel past 32 round trips", "[routing]") {
  struct layout_case {
    const char* name;
    data_type k_type, v_type;
    int64_t d, n_head, n_head_kv, n_q, n_seq;
    int heads_per_block, ncols, q_tiles;
    bool masked = false;
  };
  const data_type t3 = data_type::turbo3, t4 = data_type::turbo4, t2 = data_type::turbo2, q8 = data_type::q8_0;
  const layout_case cases[] = {
      {"D 128, GQA 16 decode over 2 KV heads: wide", t3, t3, 128, 32, 2, 1, 1, 16, 1, 1},
      {"D 256, GQA 16 decode over 2 KV heads: two 8-row work-groups", t3, t3, 256, 32, 2, 1, 1, 8, 1, 1},
      {"D 256, GQA 16 decode over 8 KV heads: wide", t3, t3, 256, 128, 8, 1, 1, 16, 1, 1},
      {"D 256, GQA 2 x 8 queries over 2 KV heads: two query tiles", t3, t3, 256, 4, 2, 8, 1, 2, 4, 2},
      {"D 256, GQA 2 x 8 queries over 2 KV heads x 4 sequences: wide", t3, t3, 256, 4, 2, 8, 4, 2, 8, 1},
      {"D 128, GQA 2 x 8 queries over 2 KV heads: wide", t3, t3, 128, 4, 2, 8, 1, 2, 8, 1},
      {"D 128, q8_0 K, GQA 16 decode over 8 KV heads: wide", q8, t3, 128, 128, 8, 1, 1, 16, 1, 1},
      {"D 256, q8_0 K, GQA 16 decode over 8 KV heads: wide", q8, t3, 256, 128, 8, 1, 1, 16, 1, 1},
      {"D 256, turbo2, GQA 2 x 8 queries over 8 KV heads: wide", t2, t2, 256, 16, 8, 8, 1, 2, 8, 1},
      {"D 256, turbo4, GQA 2 x 8 queries over 8 KV heads: wide", t4, t4, 256, 16, 8, 8, 1, 2, 8, 1},
      {"D 256, turbo4, GQA 2 x 8 queries over 8 KV heads, masked: wide", t4, t4, 256, 16, 8, 8, 1, 2, 8, 1, true},
      {"D 256, q8_0 K, GQA 2 x 8 queries over 8 KV heads: wide", q8, t3, 256, 16, 8, 8, 1, 2, 8, 1},
      {"D 256, q8_0 K, GQA 2 x 8 queries over 8 KV heads, masked: two query tiles", q8, t3, 256, 16, 8, 8, 1, 2, 4, 2,
       true},
      {"D 256, q8_0 K, GQA 2 x 8 queries over 2 KV heads: two query tiles", q8, t3, 256, 4, 2, 8, 1, 2, 4, 2},
      {"D 128, turbo4, GQA 2 x 8 queries over 8 KV heads, masked: wide", t4, t4, 128, 16, 8, 8, 1, 2, 8, 1, true},
      {"D 128, turbo3 K, turbo4 V, GQA 16 decode over 8 KV heads: 8 rows", t3, t4, 128, 128, 8, 1, 1, 8, 1, 1},
  };
  std::vector<uint8_t> mask_bytes(static_cast<size_t>(8 * 32768 * 2));
  for (const layout_case& c : cases) {
    INFO(c.name);
    attention_params p;
    p.q.type = data_type::f32;
    p.q.ne[0] = c.d; p.q.ne[1] = c.n_q; p.q.ne[2] = c.n_head; p.q.ne[3] = c.n_seq;
    for (tensor_view* t : {&p.k, &p.v}) {
      t->type = t == &p.k ? c.k_type : c.v_type;
      t->ne[0] = c.d; t->ne[1] = 32768; t->ne[2] = c.n_head_kv; t->ne[3] = c.n_seq;
    }
    if (c.masked) {  // the layout reads only whether there is a mask
      p.mask.data = mask_bytes.data();
      p.mask.ne[0] = 32768; p.mask.ne[1] = c.n_q; p.mask.ne[2] = 1; p.mask.ne[3] = 1;
    }
    REQUIRE(detail::vec_warp_reads(p));
    const detail::vec_row_layout l = detail::vec_rows_of(p, true);
    CHECK(l.heads_per_block == c.heads_per_block);
    CHECK(l.ncols == c.ncols);
    CHECK(l.q_tiles == c.q_tiles);
    // verify batches over other pairs reach VEC through route_on's verify_on_vec
    if (c.n_q > 2 && c.k_type == t3 && c.v_type == t3) CHECK(detail::vec_takes_verify_batch(p));
  }
  // rows, D, warps, splits: the round trips of the kernel's own merge are rows x D / 128 / warps
  // (rounded up) times the batches of vec_merge_batch splits
  CHECK_FALSE(detail::vec_warp_combines(8, 128, 4, 198));  // GQA 8 over 2 KV heads at D = 128: 24
  CHECK_FALSE(detail::vec_warp_combines(8, 256, 4, 132));  // ... at D = 256: 32
  CHECK(detail::vec_warp_combines(8, 256, 4, 141));        // GQA 8 over one KV head, 141 splits: 36
  CHECK_FALSE(detail::vec_warp_combines(16, 256, 8, 66));  // the wide form over 2 KV heads: 16
  CHECK(detail::vec_warp_combines(16, 256, 4, 132));       // ... in 4-warp work-groups: 64
  CHECK(detail::vec_warp_warps(128, 4, 1024) == detail::vec_warp_wide_warps);
  CHECK(detail::vec_warp_warps(256, 4, 131072) == detail::vec_warp_wide_warps);
  CHECK(detail::vec_warp_warps(256, 1, 131072) == detail::vec_warp_deep_warps);
  CHECK(detail::vec_warp_warps(256, 2, 131072) == 4);
}

// The MMA kernel's 16-byte staged copies read whole segments past a row unless the segment would
// cross view_end; so view_end must be exactly one past the highest byte any row of the view owns.
TEST_CASE("kernel arguments: view_end is one past the highest row end, for packed, token-major and strided views", "[views]") {
  struct layout {
    data_type type;
    int d, n_kv, n_head_kv, n_seq;
    bool token_major;  // rows of all heads of a token adjacent (nb1 = heads * row), else head-major
    int64_t pad;       // extra bytes per sequence
  };
  const layout layouts[] = {
      {data_type::turbo3, 256, 9, 8, 1, true, 0},  {data_type::turbo3, 128, 7, 3, 2, true, 6},
      {data_type::turbo3, 256, 5, 2, 3, false, 50}, {data_type::f16, 128, 11, 4, 2, true, 32},
      {data_type::f16, 64, 3, 1, 1, false, 0},
  };
  std::vector<uint8_t> storage(1 << 20);
  for (const layout& l : layouts) {
    tensor_view t;
    t.data = storage.data();
    t.type = l.type;
    t.ne[0] = l.d; t.ne[1] = l.n_kv; t.ne[2] = l.n_head_kv; t.ne[3] = l.n_seq;
    const int64_t row = static_cast<int64_t>(row_bytes(l.type, l.d));
    t.nb[1] = l.token_major ? row * l.n_head_kv : row;
    t.nb[2] = l.token_major ? row : row * l.n_kv;
    t.nb[3] = row * l.n_kv * l.n_head_kv + l.pad;
    int64_t highest = 0;
    for (int s = 0; s < l.n_seq; ++s)
      for (int h = 0; h < l.n_head_kv; ++h)
        for (int j = 0; j < l.n_kv; ++j)
          highest = std::max<int64_t>(highest, j * static_cast<int64_t>(t.nb[1]) + h * static_cast<int64_t>(t.nb[2]) +
                                                   s * static_cast<int64_t>(t.nb[3]) + row);
    CHECK(detail::view_end(t) - static_cast<const char*>(t.data) == highest);
  }
}

// ---- the classes of issue 44: each refused before any runtime call or allocation, output untouched

// A rejected call on params p whose output (or, for an out that overlaps an input, whose input) is
// `watched`: the status, no allocator call, the watched bytes unchanged, no workspace or counters.
void expect_refused(const attention_params& p, const launch_options& opt, status want, const std::vector<uint8_t>& watched_before,
                    const void* watched) {
  tripwire_allocator alloc;
  CHECK(flash_attention(p, alloc, nullptr, opt) == want);
  CHECK(alloc.calls == 0);
  CHECK(std::memcmp(watched, watched_before.data(), watched_before.size()) == 0);
  CHECK(workspace_bytes(p, opt) == 0);
  CHECK(counter_bytes(p, opt) == 0);
}

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

TEST_CASE("flash_attention refuses out rows that share bytes", "[bad_input][issue44]") {
  host_problem hp;
  hp.poison();
  const std::vector<uint8_t> before = bytes_of(hp.out.data(), hp.out.size() * 4);
  const attention_params good = hp.params();
  { auto p = good; p.out.nb[2] = 0; expect_refused(p, {}, status::invalid_argument, before, hp.out.data()); }
  { auto p = good; p.out.nb[2] = 256; expect_refused(p, {}, status::invalid_argument, before, hp.out.data()); }
  {
    auto p = good;  // two sequences writing the same rows
    p.q.ne[3] = p.k.ne[3] = p.v.ne[3] = p.out.ne[3] = 2;
    p.q.nb[3] = 0;
    p.k.nb[3] = p.v.nb[3] = 0;
    p.out.nb[3] = p.out.nb[2];
    expect_refused(p, {}, status::invalid_argument, before, hp.out.data());
  }
}

TEST_CASE("flash_attention refuses strides of 2^63 or more and spans past 64 bits", "[bad_input][issue44]") {
  host_problem hp;
  hp.poison();
  const std::vector<uint8_t> before = bytes_of(hp.out.data(), hp.out.size() * 4);
  const attention_params good = hp.params();
  { auto p = good; p.q.nb[3] = size_t{1} << 63; expect_refused(p, {}, status::invalid_argument, before, hp.out.data()); }
  { auto p = good; p.k.nb[1] = size_t{1} << 62; expect_refused(p, {}, status::invalid_argument, before, hp.out.data()); }
  {
    auto p = good;
    p.v.nb[2] = (size_t{1} << 63) - 64;  // below 2^63, but the span passes 2^63 - 1
    expect_refused(p, {}, status::invalid_argument, before, hp.out.data());
  }
}

TEST_CASE("flash_attention refuses an out that overlaps q, k, v, the mask or the sinks", "[bad_input][issue44]") {
  host_problem hp;
  const attention_params good = hp.params();
  std::vector<float> sinks(host_problem::H, 0.5f);
  std::vector<uint8_t> shared(64 * 1024, 0);  // out inside an input's buffer
  auto in_shared = [&](attention_params p, size_t out_offset) {
    p.out.data = shared.data() + out_offset;
    return p;
  };
  {  // out = q
    auto p = good;
    p.out.data = hp.q.data();
    expect_refused(p, {}, status::invalid_argument, bytes_of(hp.q.data(), hp.q.size() * 4), hp.q.data());
  }
  {  // out inside k, inside v
    for (int which = 0; which < 2; ++which) {
      auto p = good;
      const size_t kv_bytes = row_bytes(data_type::turbo3, host_problem::D) * host_problem::n_kv * host_problem::HKV;
      (which == 0 ? p.k : p.v).data = shared.data();
      p = in_shared(p, kv_bytes - 64);  // out starts on the last 64 bytes of the view
      expect_refused(p, {}, status::invalid_argument, bytes_of(shared.data(), shared.size()), shared.data());
    }
  }
  {  // out ends on the mask's first bytes
    auto p = good;
    p.mask.data = shared.data() + 32 * 1024;
    p.mask.type = data_type::f16;
    p.mask.ne[0] = hp.n_kv; p.mask.ne[1] = 1;
    p.mask.nb[1] = p.mask.ne[0] * 2; p.mask.nb[2] = p.mask.nb[3] = p.mask.nb[1];
    p = in_shared(p, 32 * 1024 - hp.out.size() * 4 + 4);
    expect_refused(p, {}, status::invalid_argument, bytes_of(shared.data(), shared.size()), shared.data());
  }
  {  // sinks inside out
    auto p = good;
    p.sinks = hp.out.data() + 64;
    hp.poison();
    expect_refused(p, {}, status::invalid_argument, bytes_of(hp.out.data(), hp.out.size() * 4), hp.out.data());
  }
  {  // the same call with its own sinks buffer is accepted by validate()
    auto p = good;
    p.sinks = sinks.data();
    CHECK(validate(p) == status::ok);
  }
}

// VEC's grid: (splits, KV heads x head splits, sequences x query tiles), and the combine pass's
// (queries x slices, n_head, n_seq); y and z stop at 65535. f16 K/V at D = 64 keep the buffers
// small; K, V and Q broadcast over sequences with a stride of 0 (inputs may).
TEST_CASE("flash_attention refuses VEC calls whose grid passes the launch limits, before allocating", "[bad_input][issue44]") {
  struct big_case {
    const char* name;
    int64_t n_head, n_head_kv, n_seq, n_q;
  };
  const big_case cases[] = {
      {"65536 sequences", 1, 1, 65536, 1},
      {"65536 KV heads", 65536, 65536, 1, 1},
      {"70000 query heads over 17500 KV heads (the combine pass's y)", 70000, 17500, 1, 1},
      {"33000 sequences of 3 queries (2 query tiles each)", 1, 1, 33000, 3},
  };
  for (const big_case& c : cases) {
    INFO(c.name);
    constexpr int64_t D = 64;
    const int64_t rows = c.n_q * c.n_head * c.n_seq;
    std::vector<uint16_t> out(static_cast<size_t>(rows * D), 0xffff);
    std::vector<uint16_t> kv(static_cast<size_t>(D * 4 * c.n_head_kv), 0);
    std::vector<float> q(static_cast<size_t>(D * c.n_q * c.n_head), 0.5f);
    attention_params p;
    p.q.data = q.data(); p.q.type = data_type::f32;
    p.q.ne[0] = D; p.q.ne[1] = c.n_q; p.q.ne[2] = c.n_head; p.q.ne[3] = c.n_seq;
    p.q.nb[1] = D * 4; p.q.nb[2] = p.q.nb[1] * c.n_q; p.q.nb[3] = 0;
    for (tensor_view* t : {&p.k, &p.v}) {
      t->data = kv.data(); t->type = data_type::f16;
      t->ne[0] = D; t->ne[1] = 4; t->ne[2] = c.n_head_kv; t->ne[3] = c.n_seq;
      t->nb[1] = D * 2; t->nb[2] = t->nb[1] * 4; t->nb[3] = 0;
    }
    p.out.data = out.data(); p.out.type = data_type::f16;
    p.out.ne[0] = D; p.out.ne[1] = c.n_q; p.out.ne[2] = c.n_head; p.out.ne[3] = c.n_seq;
    p.out.nb[1] = D * 2; p.out.nb[2] = p.out.nb[1] * c.n_q; p.out.nb[3] = p.out.nb[2] * c.n_head;
    p.scale = 0.125f;
    REQUIRE(validate(p) == status::ok);
    launch_options opt;
    opt.kernel = kernel_choice::vec;
    tripwire_allocator alloc;
    CHECK(flash_attention(p, alloc, nullptr, opt) == status::unsupported);
    CHECK(alloc.calls == 0);
    CHECK(workspace_bytes(p, opt) == 0);
    CHECK(std::all_of(out.begin(), out.end(), [](uint16_t x) { return x == 0xffff; }));
  }
}

TEST_CASE("flash_attention refuses launch_options out of range", "[bad_input][issue44]") {
  host_problem hp;
  hp.poison();
  const std::vector<uint8_t> before = bytes_of(hp.out.data(), hp.out.size() * 4);
  const attention_params decode = hp.params();
  {
    launch_options opt;
    opt.kernel = static_cast<kernel_choice>(9);
    expect_refused(decode, opt, status::invalid_argument, before, hp.out.data());
  }
  {
    launch_options opt;
    opt.vec = static_cast<vec_variant>(-1);
    expect_refused(decode, opt, status::invalid_argument, before, hp.out.data());
  }
  {
    launch_options opt;
    opt.kernel = kernel_choice::mma;
    opt.mma = static_cast<mma_variant>(4);
    expect_refused(decode, opt, status::invalid_argument, before, hp.out.data());
  }
  for (int splits : {-1, -256, INT32_MIN}) {
    launch_options opt;
    opt.kv_splits = splits;
    expect_refused(decode, opt, status::invalid_argument, before, hp.out.data());
  }
}

// write_rows refuses before launching: no device is needed, and host pointers never reach a kernel.
TEST_CASE("write_rows refuses unknown codebooks, sizes that overflow and overlapping views", "[bad_input][issue44]") {
  std::vector<float> rows(128 * 4, 1.0f);
  std::vector<uint8_t> cache(50 * 8, 0xa5);
  const std::vector<uint8_t> before = cache;
  const row_source src{rows.data(), data_type::f32, 128, 4, 128 * 4};
  const cache_view dst{cache.data(), data_type::turbo3, 128, 8, 50};
  const int32_t* ids = nullptr;
  CHECK(validate_write(src, dst) == status::ok);
  CHECK(write_rows(src, ids, dst, nullptr, static_cast<codebook>(2)) == status::invalid_argument);
  CHECK(write_rows(src, ids, dst, nullptr, static_cast<codebook>(-1)) == status::invalid_argument);
  {  // n_rows * n_cols past 2^63 (2^70), rows and cache otherwise well formed
    row_source s = src;
    s.n_rows = int64_t{1} << 40;
    s.n_cols = int64_t{1} << 30;
    s.row_stride = size_t{1} << 32;
    cache_view d = dst;
    d.n_cols = s.n_cols;
    d.row_stride = row_bytes(data_type::turbo3, d.n_cols);
    CHECK(write_rows(s, ids, d, nullptr) == status::invalid_argument);
  }
  {  // the source's rows span past 2^63
    row_source s = src;
    s.n_rows = 1 << 20;
    s.row_stride = size_t{1} << 50;
    CHECK(write_rows(s, ids, dst, nullptr) == status::invalid_argument);
  }
  {  // a cache stride of 2^63
    cache_view d = dst;
    d.row_stride = size_t{1} << 63;
    CHECK(write_rows(src, ids, d, nullptr) == status::invalid_argument);
  }
  {  // source rows inside the cache
    row_source s = src;
    s.data = cache.data() + 8;
    s.n_rows = 1;
    CHECK(write_rows(s, ids, dst, nullptr) == status::invalid_argument);
  }
  {  // f16 cache over the source
    std::vector<uint16_t> both(128 * 8, 0);
    row_source s{both.data(), data_type::f16, 128, 2, 256};
    cache_view d{both.data() + 128 * 2 - 1, data_type::f16, 128, 2, 256};
    CHECK(write_rows(s, ids, d, nullptr) == status::invalid_argument);
  }
  CHECK(cache == before);
}

// materialize's copy kernel finds each row's token, head and sequence with 32-bit divisions below
// 2^32 rows and 64-bit ones from there (host only: the same function runs in the kernel); a view of
// 2^32 rows takes the 64-bit form, and its grid stays below 2^31 work-groups.
TEST_CASE("materialize: the copy kernel's source rows in 32 and 64 bits", "[routing]") {
  struct shape {
    int n_rows, n_heads;
    int64_t n_seq;
  };
  const shape shapes[] = {{1, 1, 1}, {4099, 8, 3}, {1, 32, 5}, {131072, 8, 2}, {1 << 20, 1 << 10, 4}, {65537, 3, 7}};
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (const shape& sh : shapes) {
    const int64_t rows = static_cast<int64_t>(sh.n_rows) * sh.n_heads * sh.n_seq;
    std::vector<int64_t> probe = {0, rows - 1, sh.n_rows - 1, sh.n_rows, int64_t{sh.n_rows} * sh.n_heads - 1,
                                  int64_t{sh.n_rows} * sh.n_heads};
    for (int i = 0; i < 2000; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      probe.push_back(static_cast<int64_t>((state >> 11) % static_cast<uint64_t>(rows)));
    }
    for (const int64_t row : probe) {
      if (row < 0 || row >= rows) continue;
      INFO("n_rows " << sh.n_rows << " n_heads " << sh.n_heads << " row " << row);
      const int64_t token = row % sh.n_rows, head = (row / sh.n_rows) % sh.n_heads,
                    seq = row / (int64_t{sh.n_rows} * sh.n_heads);
      const detail::materialize_source_row wide = detail::materialize_source_row_of<true>(row, sh.n_rows, sh.n_heads);
      CHECK((wide.token == token && wide.head == head && wide.seq == seq));
      if (row < (int64_t{1} << 32)) {
        const detail::materialize_source_row narrow =
            detail::materialize_source_row_of<false>(row, sh.n_rows, sh.n_heads);
        CHECK((narrow.token == token && narrow.head == head && narrow.seq == seq));
      }
    }
  }
  tensor_view t;
  t.type = data_type::turbo3;
  t.ne[0] = 128; t.ne[1] = 1 << 20; t.ne[2] = 1 << 10; t.ne[3] = 4;  // 2^32 rows of 8 chunks
  t.nb[1] = 50 * 1024; t.nb[2] = 50; t.nb[3] = t.nb[1] * t.ne[1];
  const detail::materialize_copy big = detail::make_materialize_copy(t, nullptr);
  CHECK(big.chunk_shift == 3);
  CHECK(big.n_chunks == (int64_t{1} << 35));
  CHECK(static_cast<int64_t>(big.blocks) == (int64_t{1} << 35) / detail::materialize_threads);
  CHECK(detail::materialize_wide_rows(big));
  CHECK(detail::dense_copy_fits(t));
  t.ne[3] = 2;
  CHECK_FALSE(detail::materialize_wide_rows(detail::make_materialize_copy(t, nullptr)));
  t.ne[3] = 64;  // 2^31 work-groups for one view: past the grid's limit
  CHECK_FALSE(detail::dense_copy_fits(t));
}

// turbo4, turbo2 and q8_0 K/V are read by the VEC kernels (the scalar one at any head dim it has,
// the warp one for the pairs of vec_warp_types on NVIDIA) and by materialize (D 128, 256 and 512),
// and only by those: the automatic route sends decode and D = 512 to VEC and other prefill to
// materialize; TILE and MMA, forced, report unsupported before any allocation or launch, and their
// size queries say 0.
TEST_CASE("turbo4, turbo2 and q8_0 K or V: VEC and materialize serve them, TILE and MMA refuse", "[bad_input][types]") {
  constexpr int64_t n_kv = 64, H = 8, HKV = 2;
  const data_type new_types[] = {data_type::turbo4, data_type::turbo2, data_type::q8_0};
  const data_type old_types[] = {data_type::f16, data_type::turbo3};
  struct pair {
    data_type k, v;
  };
  std::vector<pair> pairs;
  for (data_type t : new_types) {
    for (data_type u : new_types) pairs.push_back({t, u});
    for (data_type u : old_types) {
      pairs.push_back({t, u});
      pairs.push_back({u, t});
    }
  }
  auto problem = [&](const pair& kv, int64_t d, int64_t n_q, std::vector<float>& q, std::vector<float>& out,
                     std::vector<uint8_t>& k, std::vector<uint8_t>& v) {
    q.assign(static_cast<size_t>(d * n_q * H), 0.5f);
    out.assign(static_cast<size_t>(d * n_q * H), 0.0f);
    k.assign(row_bytes(kv.k, d) * n_kv * HKV, 0);
    v.assign(row_bytes(kv.v, d) * n_kv * HKV, 0);
    attention_params p;
    p.q.data = q.data(); p.q.type = data_type::f32;
    p.q.ne[0] = d; p.q.ne[1] = n_q; p.q.ne[2] = H; p.q.ne[3] = 1;
    p.q.nb[1] = d * 4; p.q.nb[2] = p.q.nb[1] * n_q; p.q.nb[3] = p.q.nb[2] * H;
    for (tensor_view* t : {&p.k, &p.v}) {
      t->data = t == &p.k ? k.data() : v.data();
      t->type = t == &p.k ? kv.k : kv.v;
      t->ne[0] = d; t->ne[1] = n_kv; t->ne[2] = HKV; t->ne[3] = 1;
      t->nb[1] = row_bytes(t->type, d); t->nb[2] = t->nb[1] * n_kv; t->nb[3] = t->nb[2] * HKV;
    }
    p.out.data = out.data(); p.out.type = data_type::f32;
    p.out.ne[0] = d; p.out.ne[1] = n_q; p.out.ne[2] = H; p.out.ne[3] = 1;
    p.out.nb[1] = d * 4; p.out.nb[2] = p.out.nb[1] * n_q; p.out.nb[3] = p.out.nb[2] * H;
    p.scale = 0.1f;
    return p;
  };
  std::vector<float> q, out;
  std::vector<uint8_t> k, v;
  for (const pair& kv : pairs)
    for (int64_t d : {128, 256, 512})
      for (int64_t n_q : {1, 2, 40}) {
        INFO("k " << to_string(kv.k) << " v " << to_string(kv.v) << " D " << d << " n_q " << n_q);
        const attention_params p = problem(kv, d, n_q, q, out, k, v);
        REQUIRE(validate(p) == status::ok);
        CHECK(detail::vec_supported(p) == status::ok);
        CHECK(detail::materialize_supported(p) == status::ok);
        CHECK(detail::tile_supported(p) == status::unsupported);
        CHECK(detail::mma_supported(p) == status::unsupported);
        const kernel_choice automatic = n_q <= 2 || d == 512 ? kernel_choice::vec : kernel_choice::materialize;
        CHECK(turbo3::route(p) == automatic);
        CHECK(supported(p) == status::ok);
        launch_options opt;
        opt.kernel = kernel_choice::vec;
        CHECK(supported(p, opt) == status::ok);
        opt.vec = vec_variant::matrix;  // falls back to the scalar kernel
        CHECK(supported(p, opt) == status::ok);
        opt = {};
        opt.kernel = kernel_choice::materialize;
        CHECK(supported(p, opt) == status::ok);
        if (d == 512) {  // the dense call runs TILE: no partial rows, a copy of each view not f16
          const size_t copies = (kv.k != data_type::f16) + (kv.v != data_type::f16);
          CHECK(workspace_bytes(p, opt) == 255 + copies * n_kv * HKV * 1024);
        }
        for (kernel_choice kernel : {kernel_choice::tile, kernel_choice::mma}) {
          opt.kernel = kernel;
          expect_unsupported(p, opt, out);
        }
      }
  // q8_0 with f16 or q8_0 at D = 64 (rotated types need whole 128-value groups: validate): VEC has
  // no kernel for it, materialize serves every n_q.
  for (const pair& kv : {pair{data_type::q8_0, data_type::q8_0}, pair{data_type::f16, data_type::q8_0},
                         pair{data_type::q8_0, data_type::f16}})
    for (int64_t n_q : {1, 2, 40}) {
      INFO("k " << to_string(kv.k) << " v " << to_string(kv.v) << " D 64 n_q " << n_q);
      const attention_params p = problem(kv, 64, n_q, q, out, k, v);
      REQUIRE(validate(p) == status::ok);
      CHECK(detail::vec_supported(p) == status::unsupported);
      CHECK(detail::materialize_supported(p) == status::ok);
      CHECK(detail::tile_supported(p) == status::unsupported);
      CHECK(turbo3::route(p) == kernel_choice::materialize);
      CHECK(supported(p) == status::ok);
      launch_options opt;
      opt.kernel = kernel_choice::vec;
      CHECK(supported(p, opt) == status::unsupported);
    }
}

// write_rows quantizes into turbo4, turbo2 and q8_0 caches too (whole blocks per row: 128 values,
// 32 for q8_0); rows that are not whole blocks are refused and the cache left untouched.
TEST_CASE("write_rows: turbo4, turbo2 and q8_0 caches take whole blocks", "[bad_input][types]") {
  std::vector<float> rows(128 * 4, 1.0f);
  for (data_type t : {data_type::turbo4, data_type::turbo2, data_type::q8_0}) {
    INFO(to_string(t));
    std::vector<uint8_t> cache(row_bytes(t, 128) * 8, 0xa5);
    const std::vector<uint8_t> before = cache;
    const row_source src{rows.data(), data_type::f32, 128, 4, 128 * 4};
    const cache_view dst{cache.data(), t, 128, 8, row_bytes(t, 128)};
    CHECK(validate_write(src, dst) == status::ok);
    const int64_t partial = t == data_type::q8_0 ? 48 : 64;  // not whole blocks
    const row_source src_partial{rows.data(), data_type::f32, partial, 4, 128 * 4};
    const cache_view dst_partial{cache.data(), t, partial, 8, row_bytes(t, 128)};
    const int32_t* ids = nullptr;
    CHECK(validate_write(src_partial, dst_partial) == status::invalid_argument);
    CHECK(write_rows(src_partial, ids, dst_partial, nullptr) == status::invalid_argument);
    CHECK(cache == before);
  }
}

// rotate_groups refuses before launching, like write_rows; host buffers never reach a kernel.
TEST_CASE("rotate_groups refuses null, negative, unaligned, overlapping and oversized calls", "[bad_input]") {
  std::vector<float> a(4 * block_values, 1.0f), b(4 * block_values, 2.0f);
  float* p = a.data();
  const auto dir = rotation_direction::forward;
  CHECK(rotate_groups(nullptr, p, 1, dir, nullptr, nullptr) == status::invalid_argument);
  CHECK(rotate_groups(p, nullptr, 1, dir, nullptr, nullptr) == status::invalid_argument);
  CHECK(rotate_groups(p, b.data(), -1, dir, nullptr, nullptr) == status::invalid_argument);
  CHECK(rotate_groups(p, p + 1, 2, dir, nullptr, nullptr) == status::invalid_argument);  // a partial overlap
  CHECK(rotate_groups(p, reinterpret_cast<float*>(reinterpret_cast<char*>(b.data()) + 2), 1, dir, nullptr, nullptr) ==
        status::invalid_argument);
  CHECK(rotate_groups(p, b.data(), INT64_MAX / 256, dir, nullptr, nullptr) == status::invalid_argument);
  CHECK(rotate_groups(p, b.data(), 1, static_cast<rotation_direction>(7), nullptr, nullptr) == status::invalid_argument);
  CHECK(rotate_groups(p, b.data(), 1, dir, reinterpret_cast<const float*>(reinterpret_cast<const char*>(p) + 1),
                      nullptr) == status::invalid_argument);
  CHECK(rotate_groups(p, b.data(), 0, dir, nullptr, nullptr) == status::ok);  // nothing to do: no launch
  CHECK(std::all_of(a.begin(), a.end(), [](float v) { return v == 1.0f; }));
  CHECK(std::all_of(b.begin(), b.end(), [](float v) { return v == 2.0f; }));
}
