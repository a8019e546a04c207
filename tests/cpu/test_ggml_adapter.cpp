// The llama.cpp adapter's mapping of a ggml FLASH_ATTN_EXT node onto attention_params
// (integrations/llama.cpp/ggml_turbo3_adapter.hpp), on tensors laid out as the TurboQuant fork
// lays them out, without ggml: a tensor here has the fields the mapping reads.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>

#include "ggml_turbo3_adapter.hpp"
#include "turbo3/attention/validate.hpp"

using turbo3::data_type;
using turbo3::status;
using turbo3::ggml_adapter::map_flash_attn_ext;
using turbo3::ggml_adapter::refusal;
using turbo3::ggml_adapter::serve_policy;

namespace {

// The fork's enum values (ggml.h at a6f3d363); the mapping takes them as parameters.
enum fake_type { type_f32 = 0, type_f16 = 1, type_q8_0 = 8, type_i32 = 26, type_bf16 = 30, type_turbo3 = 43 };
enum fake_op { op_flash_attn_ext = 78, op_flash_attn_ext_banded = 79, op_set_rows = 40 };
constexpr turbo3::ggml_adapter::ggml_ids ids = {type_f32, type_f16, type_turbo3, op_flash_attn_ext};

struct fake_tensor {
  fake_type type = type_f32;
  int64_t ne[4] = {1, 1, 1, 1};
  size_t nb[4] = {0, 0, 0, 0};
  fake_op op = op_set_rows;
  int32_t op_params[16] = {};
  fake_tensor* src[10] = {};
  void* data = nullptr;
};

// Views never overlap: each tensor lives in its own 4 GiB region of a fake address space (the
// mapping and validate() never dereference).
void* region(int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(i) << 32); }

size_t type_size(fake_type t) {
  return t == type_f32 ? 4 : t == type_f16 ? 2 : t == type_turbo3 ? 50 : t == type_q8_0 ? 34 : 2;
}
int64_t block_size(fake_type t) { return t == type_turbo3 ? 128 : t == type_q8_0 ? 32 : 1; }

// A contiguous ggml tensor (ggml_new_tensor_4d's strides).
void make_dense(fake_tensor& t, fake_type type, int64_t n0, int64_t n1, int64_t n2, int64_t n3, int where) {
  t.type = type;
  t.ne[0] = n0, t.ne[1] = n1, t.ne[2] = n2, t.ne[3] = n3;
  t.nb[0] = type_size(type);
  t.nb[1] = t.nb[0] * static_cast<size_t>(n0 / block_size(type));
  t.nb[2] = t.nb[1] * static_cast<size_t>(n1);
  t.nb[3] = t.nb[2] * static_cast<size_t>(n2);
  t.data = region(where);
}

// ggml_permute(t, 0, 2, 1, 3): dimensions 1 and 2 trade extents and strides.
void swap_dims_1_2(fake_tensor& t) {
  std::swap(t.ne[1], t.ne[2]);
  std::swap(t.nb[1], t.nb[2]);
}

void set_op_floats(fake_tensor& t, float scale, float max_bias, float softcap, int32_t precision) {
  const float f[3] = {scale, max_bias, softcap};
  std::memcpy(t.op_params, f, sizeof f);
  t.op_params[3] = precision;
}

// One layer's decode in llama.cpp: D = 256, 16 query heads over 8 KV heads, the turbo3 cache
// [8 * 256 values, 1024 cells] viewed token-major as [256, n_kv = 512, 8, 1] (a head is 2 blocks
// of a cell's 16), Q [256, 1, 16, 1] permuted from [256, 16, 1], the f16 mask [512, 1, 1, 1],
// sinks, the output [256, 16, 1, 1].
struct decode_node {
  fake_tensor q, k, v, mask, sinks, out;
  decode_node() {
    make_dense(q, type_f32, 256, 16, 1, 1, 1);
    swap_dims_1_2(q);
    const size_t cell = 8 * 2 * 50;  // one token's 8 heads of 2 blocks
    for (fake_tensor* t : {&k, &v}) {
      t->type = type_turbo3;
      t->ne[0] = 256, t->ne[1] = 512, t->ne[2] = 8, t->ne[3] = 1;
      t->nb[0] = 50, t->nb[1] = cell, t->nb[2] = 2 * 50, t->nb[3] = cell * 1024;
    }
    k.data = region(2);
    v.data = region(3);
    make_dense(mask, type_f16, 512, 1, 1, 1, 4);
    make_dense(sinks, type_f32, 16, 1, 1, 1, 5);
    make_dense(out, type_f32, 256, 16, 1, 1, 6);
    out.op = op_flash_attn_ext;
    out.src[0] = &q, out.src[1] = &k, out.src[2] = &v, out.src[3] = &mask, out.src[4] = &sinks;
    set_op_floats(out, 1.0f, 0.0f, 0.0f, 10);
  }
};

}  // namespace

TEST_CASE("ggml adapter: a llama.cpp decode node maps onto the library's views", "[ggml-adapter]") {
  decode_node n;
  const auto m = map_flash_attn_ext(&n.out, ids);
  REQUIRE(m.why == refusal::none);
  const turbo3::attention_params& p = m.params;
  CHECK(validate(p) == status::ok);

  CHECK(p.q.type == data_type::f32);
  CHECK(p.q.data == n.q.data);
  CHECK(p.n_q() == 1);
  CHECK(p.n_head() == 16);
  CHECK(p.q.nb[1] == n.q.nb[1]);
  CHECK(p.q.nb[2] == 256 * 4);  // heads are adjacent rows of the permuted Q

  CHECK(p.k.type == data_type::turbo3);
  CHECK(p.v.type == data_type::turbo3);
  CHECK(p.n_kv() == 512);
  CHECK(p.n_head_kv() == 8);
  CHECK(p.k.nb[1] == 800);  // token-major: a cell's 8 heads
  CHECK(p.k.nb[2] == 100);

  // ggml's output is [D_v, n_head, n_q, n_seq]; the library's view is [D_v, n_q, n_head, n_seq].
  CHECK(p.out.ne[1] == 1);
  CHECK(p.out.ne[2] == 16);
  CHECK(p.out.nb[1] == n.out.nb[2]);
  CHECK(p.out.nb[2] == n.out.nb[1]);
  CHECK(p.out.nb[2] == 256 * 4);

  CHECK(p.mask.data == n.mask.data);
  CHECK(p.mask.ne[0] == 512);
  CHECK(p.sinks == static_cast<const float*>(n.sinks.data));
  CHECK(p.scale == 1.0f);
  CHECK(!p.causal);
  // The fork rotates Q and un-rotates the output in its graph: the node is plain attention.
  CHECK(!p.rotate_q);
  CHECK(!p.unrotate_out);
  // The fork writes and reads turbo3 with the legacy table (tests/cpu/test_fork_golden.cpp).
  CHECK(p.kv_codebook == turbo3::codebook::legacy);
}

TEST_CASE("ggml adapter: a TURBO_WHT node's direction and group size", "[ggml-adapter]") {
  fake_tensor rotation;
  for (int32_t& v : rotation.op_params) v = -7;  // whatever ggml left there
  // ggml_turbo_wht: memcpy(op_params + 0, &direction), memcpy(op_params + sizeof(int), &group_size)
  // on an int32_t pointer, so the group size is element 4 and element 1 holds nothing of it.
  rotation.op_params[0] = 1;
  rotation.op_params[4] = 128;
  const turbo3::ggml_adapter::rotation_params r = turbo3::ggml_adapter::rotation_params_of(&rotation);
  CHECK(r.direction == 1);
  CHECK(r.group == 128);
  rotation.op_params[0] = 0;
  rotation.op_params[4] = 64;
  CHECK(turbo3::ggml_adapter::rotation_params_of(&rotation).direction == 0);
  CHECK(turbo3::ggml_adapter::rotation_params_of(&rotation).group == 64);
}

TEST_CASE("ggml adapter: op parameters and test-backend-ops layouts", "[ggml-adapter]") {
  decode_node n;

  SECTION("scale, ALiBi and softcap come from op_params 0-2") {
    set_op_floats(n.out, 0.125f, 8.0f, 10.0f, 0);
    const auto m = map_flash_attn_ext(&n.out, ids);
    REQUIRE(m.why == refusal::none);
    CHECK(m.params.scale == 0.125f);
    CHECK(m.params.max_bias == 8.0f);
    CHECK(m.params.softcap == 10.0f);
  }

  SECTION("no mask and no sinks") {
    n.out.src[3] = nullptr;
    n.out.src[4] = nullptr;
    const auto m = map_flash_attn_ext(&n.out, ids);
    REQUIRE(m.why == refusal::none);
    CHECK(m.params.mask.data == nullptr);
    CHECK(m.params.sinks == nullptr);
    CHECK(validate(m.params) == status::ok);
  }

  SECTION("head-major K/V (test-backend-ops' default views) and a prefill of 75 rows") {
    // K is a view [256, 512, 8] of a tensor [256, 2 * 512, 8]: each head's rows follow the
    // previous head's.
    for (fake_tensor* t : {&n.k, &n.v}) {
      make_dense(*t, type_turbo3, 256, 1024, 8, 1, t == &n.k ? 2 : 3);
      t->ne[1] = 512;
    }
    make_dense(n.q, type_f32, 256, 75, 16, 1, 1);
    make_dense(n.mask, type_f16, 512, 75, 1, 1, 4);
    n.out.ne[0] = 256, n.out.ne[1] = 16, n.out.ne[2] = 75;
    n.out.nb[1] = 1024, n.out.nb[2] = 1024 * 16, n.out.nb[3] = 1024 * 16 * 75;
    const auto m = map_flash_attn_ext(&n.out, ids);
    REQUIRE(m.why == refusal::none);
    CHECK(validate(m.params) == status::ok);
    CHECK(m.params.k.nb[1] == 100);
    CHECK(m.params.k.nb[2] == 100 * 1024);
    CHECK(m.params.n_q() == 75);
    CHECK(m.params.out.nb[1] == 1024 * 16);
    CHECK(m.params.out.nb[2] == 1024);
    CHECK(m.params.mask.ne[1] == 75);
  }

  SECTION("f16 K with turbo3 V is served; f16/f16 only under the policy `all`") {
    n.k.type = type_f16;
    n.k.nb[0] = 2, n.k.nb[2] = 512, n.k.nb[1] = 8 * 512;
    auto m = map_flash_attn_ext(&n.out, ids);
    REQUIRE(m.why == refusal::none);
    CHECK(m.params.k.type == data_type::f16);
    n.v.type = type_f16;
    n.v.nb[0] = 2, n.v.nb[2] = 512, n.v.nb[1] = 8 * 512;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::policy);
    m = map_flash_attn_ext(&n.out, ids, serve_policy::all);
    CHECK(m.why == refusal::none);
    CHECK(m.params.v.type == data_type::f16);
  }
}

TEST_CASE("ggml adapter: nodes it leaves to ggml, each with its reason", "[ggml-adapter]") {
  decode_node n;
  CHECK(map_flash_attn_ext(&n.out, ids, serve_policy::none).why == refusal::policy);

  SECTION("another op") {
    n.out.op = op_flash_attn_ext_banded;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::not_flash_attn);
  }
  SECTION("q8_0 K (the asymmetric caches the library does not read yet)") {
    n.k.type = type_q8_0;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::kv_type);
  }
  SECTION("bf16 V") {
    n.v.type = type_bf16;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::kv_type);
  }
  SECTION("f32 K") {
    n.k.type = type_f32;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::kv_type);
  }
  SECTION("Q neither f32 nor f16") {
    n.q.type = type_bf16;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::q_type);
  }
  SECTION("an f16 output") {
    n.out.type = type_f16;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::out_type);
  }
  SECTION("a mask that is not f16") {
    n.mask.type = type_f32;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::mask_type);
  }
  SECTION("sinks of the wrong length or type") {
    n.sinks.ne[0] = 8;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::sinks_layout);
    n.sinks.ne[0] = 16;
    n.sinks.type = type_f16;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::sinks_layout);
  }
  SECTION("a Q whose elements are not contiguous within a row") {
    n.q.nb[0] = 8;
    CHECK(map_flash_attn_ext(&n.out, ids).why == refusal::row_layout);
  }
}

TEST_CASE("ggml adapter: shapes validate() refuses stay refusable", "[ggml-adapter]") {
  // A head dim that is not whole turbo3 blocks maps, and validation then says unsupported: the
  // glue turns that into refusal::library and leaves the node to ggml.
  decode_node n;
  n.q.ne[0] = n.k.ne[0] = n.v.ne[0] = n.out.ne[0] = 192;
  const auto m = map_flash_attn_ext(&n.out, ids);
  REQUIRE(m.why == refusal::none);
  CHECK(validate(m.params) == status::unsupported);
}
