// validate(): every rule of attention/validate.hpp, one field at a time, on a well-formed call.
// validate() never dereferences data pointers, so the views point at addresses of their own, 1 MiB
// apart (no view spans more), that no memory backs.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "turbo3/attention/validate.hpp"

using turbo3::attention_params;
using turbo3::data_type;
using turbo3::status;

namespace {

// Address of view `region` (1 MiB apart, 256-aligned, never dereferenced).
void* region(int index) { return reinterpret_cast<void*>((uintptr_t{1} << 32) + (static_cast<uintptr_t>(index) << 20)); }

// Dense ggml strides for a view of type t.
template <class View>
void set_dense(View& v, data_type t, int64_t n0, int64_t n1, int64_t n2, int64_t n3) {
  v.type = t;
  v.ne[0] = n0, v.ne[1] = n1, v.ne[2] = n2, v.ne[3] = n3;
  v.nb[0] = turbo3::element_bytes(t);
  v.nb[1] = turbo3::row_bytes(t, n0);
  v.nb[2] = v.nb[1] * static_cast<size_t>(n1);
  v.nb[3] = v.nb[2] * static_cast<size_t>(n2);
}

// D = 128, n_q = 4, 8 query heads over 2 KV heads, 2 sequences, n_kv = 256, turbo3 K/V, f16 mask
// [256, 4, 1, 1] broadcast over heads and sequences, f32 in and out.
attention_params make_valid() {
  attention_params p;
  p.q.data = region(0);
  p.k.data = region(1);
  p.v.data = region(2);
  p.mask.data = region(3);
  p.out.data = region(4);
  set_dense(p.q, data_type::f32, 128, 4, 8, 2);
  set_dense(p.k, data_type::turbo3, 128, 256, 2, 2);
  set_dense(p.v, data_type::turbo3, 128, 256, 2, 2);
  set_dense(p.mask, data_type::f16, 256, 4, 1, 1);
  set_dense(p.out, data_type::f32, 128, 4, 8, 2);
  p.scale = 0.088388f;
  return p;
}

const void* offset_ptr(const void* p, size_t bytes) {
  return static_cast<const unsigned char*>(p) + bytes;
}

}  // namespace

TEST_CASE("validate: well-formed calls are accepted", "[validate]") {
  attention_params p = make_valid();
  CHECK(validate(p) == status::ok);

  SECTION("no mask") {
    p.mask.data = nullptr;
    p.mask.type = data_type::f32;  // ignored without data
    p.mask.ne[0] = 0;
    CHECK(validate(p) == status::ok);
  }
  SECTION("f16 everywhere") {
    set_dense(p.q, data_type::f16, 128, 4, 8, 2);
    set_dense(p.k, data_type::f16, 128, 256, 2, 2);
    set_dense(p.v, data_type::f16, 128, 256, 2, 2);
    set_dense(p.out, data_type::f16, 128, 4, 8, 2);
    CHECK(validate(p) == status::ok);
  }
  SECTION("mixed K/V storage") {
    set_dense(p.k, data_type::f16, 128, 256, 2, 2);
    CHECK(validate(p) == status::ok);
  }
  SECTION("f16 K/V with head dim 64") {
    set_dense(p.q, data_type::f32, 64, 4, 8, 2);
    set_dense(p.k, data_type::f16, 64, 256, 2, 2);
    set_dense(p.v, data_type::f16, 64, 256, 2, 2);
    set_dense(p.out, data_type::f32, 64, 4, 8, 2);
    CHECK(validate(p) == status::ok);
  }
  SECTION("D_v differs from D_k") {
    set_dense(p.v, data_type::turbo3, 256, 256, 2, 2);
    set_dense(p.out, data_type::f32, 256, 4, 8, 2);
    CHECK(validate(p) == status::ok);
  }
  SECTION("single row with zero stride, broadcast head and sequence strides") {
    set_dense(p.q, data_type::f32, 128, 1, 8, 2);
    p.q.nb[1] = 0;
    p.q.nb[2] = 0;
    p.q.nb[3] = 0;
    set_dense(p.out, data_type::f32, 128, 1, 8, 2);
    CHECK(validate(p) == status::ok);
  }
  SECTION("ggml's permuted output layout [D_v, n_head, n_q, n_seq] in memory") {
    p.out.nb[2] = 128 * 4;          // head stride: one row
    p.out.nb[1] = 128 * 4 * 8;      // query stride: all heads
    p.out.nb[3] = 128 * 4 * 8 * 4;  // sequence stride
    CHECK(validate(p) == status::ok);
  }
  SECTION("padded rows and mask planes per head and sequence") {
    p.k.nb[1] = 64;  // > 50, 2-aligned
    p.k.nb[2] = p.k.nb[1] * 256;
    p.k.nb[3] = p.k.nb[2] * 2;
    set_dense(p.mask, data_type::f16, 300, 8, 8, 2);
    CHECK(validate(p) == status::ok);
  }
  SECTION("GQA 1, multi-query, ALiBi, softcap, sinks, causal, legacy codebook") {
    set_dense(p.k, data_type::turbo3, 128, 256, 8, 2);
    set_dense(p.v, data_type::turbo3, 128, 256, 8, 2);
    p.max_bias = 8.0f;
    p.softcap = 30.0f;
    p.sinks = static_cast<const float*>(region(5));
    p.causal = true;
    p.kv_codebook = turbo3::codebook::legacy;
    CHECK(validate(p) == status::ok);
    set_dense(p.k, data_type::turbo3, 128, 256, 1, 2);
    set_dense(p.v, data_type::turbo3, 128, 256, 1, 2);
    CHECK(validate(p) == status::ok);
  }
}

TEST_CASE("validate: null pointers", "[validate]") {
  attention_params p = make_valid();
  SECTION("q") { p.q.data = nullptr; }
  SECTION("k") { p.k.data = nullptr; }
  SECTION("v") { p.v.data = nullptr; }
  SECTION("out") { p.out.data = nullptr; }
  CHECK(validate(p) == status::invalid_argument);
}

TEST_CASE("validate: unsupported types", "[validate]") {
  attention_params p = make_valid();
  SECTION("q turbo3") { p.q.type = data_type::turbo3; }
  SECTION("k f32") { set_dense(p.k, data_type::f32, 128, 256, 2, 2); }
  SECTION("v f32") { set_dense(p.v, data_type::f32, 128, 256, 2, 2); }
  SECTION("out turbo3") { p.out.type = data_type::turbo3; }
  SECTION("mask f32") { set_dense(p.mask, data_type::f32, 256, 4, 1, 1); }
  SECTION("mask turbo3") { p.mask.type = data_type::turbo3; }
  CHECK(validate(p) == status::unsupported);
}

TEST_CASE("validate: sizes must be positive", "[validate]") {
  attention_params p = make_valid();
  const int dim = GENERATE(0, 1, 2, 3);
  const int64_t bad = GENERATE(int64_t{0}, int64_t{-1});
  INFO("dim " << dim << " value " << bad);
  SECTION("q") { p.q.ne[dim] = bad; }
  SECTION("k") { p.k.ne[dim] = bad; }
  SECTION("v") { p.v.ne[dim] = bad; }
  SECTION("out") { p.out.ne[dim] = bad; }
  SECTION("mask") { p.mask.ne[dim] = bad; }
  CHECK(validate(p) == status::invalid_argument);
}

TEST_CASE("validate: sizes beyond 32-bit indexing", "[validate]") {
  attention_params p = make_valid();
  p.k.ne[1] = p.v.ne[1] = int64_t{1} << 31;
  p.mask.ne[0] = int64_t{1} << 31;
  CHECK(validate(p) == status::unsupported);
}

TEST_CASE("validate: shapes that disagree", "[validate]") {
  attention_params p = make_valid();
  SECTION("k head dim differs from q") { set_dense(p.k, data_type::turbo3, 256, 256, 2, 2); }
  SECTION("v n_kv differs from k") { set_dense(p.v, data_type::turbo3, 128, 255, 2, 2); }
  SECTION("v heads differ from k") { set_dense(p.v, data_type::turbo3, 128, 256, 4, 2); }
  SECTION("k sequences differ from q") {
    set_dense(p.k, data_type::turbo3, 128, 256, 2, 1);
    set_dense(p.v, data_type::turbo3, 128, 256, 2, 1);
  }
  SECTION("v sequences differ from k") { set_dense(p.v, data_type::turbo3, 128, 256, 2, 1); }
  SECTION("out head dim is not D_v") { set_dense(p.out, data_type::f32, 256, 4, 8, 2); }
  SECTION("out n_q") { set_dense(p.out, data_type::f32, 128, 3, 8, 2); }
  SECTION("out heads") { set_dense(p.out, data_type::f32, 128, 4, 4, 2); }
  SECTION("out sequences") { set_dense(p.out, data_type::f32, 128, 4, 8, 1); }
  SECTION("n_head not a multiple of n_head_kv") {
    set_dense(p.k, data_type::turbo3, 128, 256, 3, 2);
    set_dense(p.v, data_type::turbo3, 128, 256, 3, 2);
  }
  SECTION("more KV heads than query heads") {
    set_dense(p.k, data_type::turbo3, 128, 256, 16, 2);
    set_dense(p.v, data_type::turbo3, 128, 256, 16, 2);
  }
  CHECK(validate(p) == status::invalid_argument);
}

TEST_CASE("validate: turbo3 rows are whole 128-value blocks", "[validate]") {
  attention_params p = make_valid();
  SECTION("K and V turbo3, head dim 64") {
    set_dense(p.q, data_type::f32, 64, 4, 8, 2);
    set_dense(p.k, data_type::turbo3, 64, 256, 2, 2);
    set_dense(p.v, data_type::turbo3, 64, 256, 2, 2);
    set_dense(p.out, data_type::f32, 64, 4, 8, 2);
  }
  SECTION("turbo3 K head dim 192") {
    set_dense(p.q, data_type::f32, 192, 4, 8, 2);
    set_dense(p.k, data_type::turbo3, 192, 256, 2, 2);
    p.k.nb[1] = 100;  // as if 1.5 blocks were stored
  }
  SECTION("turbo3 V head dim 64 under f16 K") {
    set_dense(p.k, data_type::f16, 128, 256, 2, 2);
    set_dense(p.v, data_type::turbo3, 64, 256, 2, 2);
    set_dense(p.out, data_type::f32, 64, 4, 8, 2);
  }
  CHECK(validate(p) == status::unsupported);
}

// turbo4, turbo2 and q8_0 K/V are well formed (ref::attention reads them; which kernel routes serve
// them: tests/launch/test_bad_input.cu), with whole blocks per row and 2-byte alignment.
TEST_CASE("validate: turbo4, turbo2 and q8_0 K/V, any pair with f16 and turbo3", "[validate]") {
  const data_type kv_types[] = {data_type::f16, data_type::turbo3, data_type::turbo4, data_type::turbo2,
                                data_type::q8_0};
  for (data_type k : kv_types)
    for (data_type v : kv_types) {
      INFO("k " << turbo3::to_string(k) << " v " << turbo3::to_string(v));
      attention_params p = make_valid();
      set_dense(p.q, data_type::f32, 256, 4, 8, 2);
      set_dense(p.k, k, 256, 256, 2, 2);
      set_dense(p.v, v, 512, 256, 2, 2);
      set_dense(p.out, data_type::f32, 512, 4, 8, 2);
      CHECK(validate(p) == status::ok);
    }
  attention_params p = make_valid();
  SECTION("q8_0 rows of 32-value blocks: head dims 64 and 96") {
    set_dense(p.q, data_type::f32, 96, 4, 8, 2);
    set_dense(p.k, data_type::q8_0, 96, 256, 2, 2);
    set_dense(p.v, data_type::q8_0, 64, 256, 2, 2);
    set_dense(p.out, data_type::f32, 64, 4, 8, 2);
    CHECK(validate(p) == status::ok);
  }
  SECTION("q8_0 K head dim 48: not whole blocks") {
    set_dense(p.q, data_type::f32, 48, 4, 8, 2);
    set_dense(p.k, data_type::q8_0, 48, 256, 2, 2);
    p.k.nb[1] = 68;
    CHECK(validate(p) == status::unsupported);
  }
  SECTION("turbo4 V head dim 64: not whole blocks") {
    set_dense(p.v, data_type::turbo4, 64, 256, 2, 2);
    set_dense(p.out, data_type::f32, 64, 4, 8, 2);
    CHECK(validate(p) == status::unsupported);
  }
  SECTION("turbo2 K head dim 192: not whole blocks") {
    set_dense(p.q, data_type::f32, 192, 4, 8, 2);
    set_dense(p.k, data_type::turbo2, 192, 256, 2, 2);
    p.k.nb[1] = 68;
    CHECK(validate(p) == status::unsupported);
  }
  SECTION("turbo4 K pointer odd") {
    set_dense(p.k, data_type::turbo4, 128, 256, 2, 2);
    p.k.data = offset_ptr(p.k.data, 1);
    CHECK(validate(p) == status::invalid_argument);
  }
  SECTION("q8_0 V row stride odd") {
    set_dense(p.v, data_type::q8_0, 128, 256, 2, 2);
    p.v.nb[1] = 137;
    CHECK(validate(p) == status::invalid_argument);
  }
  SECTION("turbo2 K row stride smaller than a row") {
    set_dense(p.k, data_type::turbo2, 128, 256, 2, 2);
    p.k.nb[1] = 32;
    CHECK(validate(p) == status::invalid_argument);
  }
  SECTION("q, out or the mask of a block type") {
    for (data_type t : {data_type::turbo4, data_type::turbo2, data_type::q8_0}) {
      attention_params bad = make_valid();
      bad.q.type = t;
      CHECK(validate(bad) == status::unsupported);
      bad = make_valid();
      bad.out.type = t;
      CHECK(validate(bad) == status::unsupported);
      bad = make_valid();
      bad.mask.type = t;
      CHECK(validate(bad) == status::unsupported);
    }
  }
}

TEST_CASE("validate: strides and alignment", "[validate]") {
  attention_params p = make_valid();
  SECTION("q row stride smaller than a row") { p.q.nb[1] = 128 * 4 - 4; }
  SECTION("k row stride smaller than a turbo3 row") { p.k.nb[1] = 48; }
  SECTION("v row stride zero with n_kv > 1") { p.v.nb[1] = 0; }
  SECTION("out row stride smaller than a row") { p.out.nb[1] = 100; }
  SECTION("f32 q head stride not a multiple of 4") { p.q.nb[2] += 2; }
  SECTION("f32 q row stride not a multiple of 4") { p.q.nb[1] += 2; }
  SECTION("turbo3 k row stride odd") { p.k.nb[1] = 51; }
  SECTION("f16 v sequence stride odd") {
    set_dense(p.v, data_type::f16, 128, 256, 2, 2);
    p.v.nb[3] += 1;
  }
  SECTION("f32 out sequence stride not a multiple of 4") { p.out.nb[3] += 2; }
  SECTION("f32 q pointer off by 2") { p.q.data = offset_ptr(p.q.data, 2); }
  SECTION("turbo3 k pointer odd") { p.k.data = offset_ptr(p.k.data, 1); }
  SECTION("turbo3 v pointer odd") { p.v.data = offset_ptr(p.v.data, 1); }
  SECTION("f16 out pointer odd") {
    set_dense(p.out, data_type::f16, 128, 4, 8, 2);
    p.out.data = static_cast<unsigned char*>(region(4)) + 1;
  }
  SECTION("sinks pointer off by 2") {
    p.sinks = static_cast<const float*>(offset_ptr(region(5), 2));
  }
  CHECK(validate(p) == status::invalid_argument);
}

TEST_CASE("validate: mask shape, broadcast and layout", "[validate]") {
  attention_params p = make_valid();
  SECTION("fewer columns than n_kv") { set_dense(p.mask, data_type::f16, 255, 4, 1, 1); }
  SECTION("fewer rows than n_q") { set_dense(p.mask, data_type::f16, 256, 3, 1, 1); }
  SECTION("head planes do not divide n_head") { set_dense(p.mask, data_type::f16, 256, 4, 3, 1); }
  SECTION("more head planes than heads") { set_dense(p.mask, data_type::f16, 256, 4, 16, 1); }
  SECTION("sequence planes do not divide n_seq") {
    set_dense(p.mask, data_type::f16, 256, 4, 1, 3);
  }
  SECTION("row stride smaller than a row") { p.mask.nb[1] = 2 * 256 - 2; }
  SECTION("odd row stride") { p.mask.nb[1] = 2 * 256 + 1; }
  SECTION("odd pointer") { p.mask.data = offset_ptr(p.mask.data, 1); }
  CHECK(validate(p) == status::invalid_argument);
}

TEST_CASE("validate: scalars", "[validate]") {
  attention_params p = make_valid();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  SECTION("NaN scale") { p.scale = nan; }
  SECTION("infinite scale") { p.scale = -inf; }
  SECTION("negative softcap") { p.softcap = -1.0f; }
  SECTION("NaN softcap") { p.softcap = nan; }
  SECTION("infinite softcap") { p.softcap = inf; }
  SECTION("negative max_bias") { p.max_bias = -0.5f; }
  SECTION("NaN max_bias") { p.max_bias = nan; }
  SECTION("unknown codebook") { p.kv_codebook = static_cast<turbo3::codebook>(7); }
  CHECK(validate(p) == status::invalid_argument);
}

TEST_CASE("validate: the first failing rule decides", "[validate]") {
  attention_params p = make_valid();
  p.q.type = data_type::turbo3;   // unsupported (rule 2)
  p.scale = std::numeric_limits<float>::quiet_NaN();  // invalid_argument (rule 10)
  CHECK(validate(p) == status::unsupported);
  p.out.data = nullptr;           // invalid_argument (rule 1)
  CHECK(validate(p) == status::invalid_argument);
}

TEST_CASE("validate: out rows that share bytes", "[validate]") {
  attention_params p = make_valid();
  SECTION("head stride 0 (every head writes the same row)") { p.out.nb[2] = 0; }
  SECTION("sequence stride equal to the head stride") { p.out.nb[3] = p.out.nb[2]; }
  SECTION("head stride half a row") { p.out.nb[2] = 128 * 2; p.out.nb[1] = 128 * 4 * 8; }
  SECTION("sequence stride inside the last head's span") { p.out.nb[3] = p.out.nb[2] * 8 - 4; }
  SECTION("permuted layout whose query stride is short of all heads") {
    p.out.nb[2] = 128 * 4;
    p.out.nb[1] = 128 * 4 * 7;
    p.out.nb[3] = 128 * 4 * 8 * 4;
  }
  CHECK(validate(p) == status::invalid_argument);
}

TEST_CASE("validate: out rows of one element per dimension may take any stride", "[validate]") {
  attention_params p = make_valid();
  set_dense(p.q, data_type::f32, 128, 1, 8, 1);
  set_dense(p.out, data_type::f32, 128, 1, 8, 1);
  set_dense(p.k, data_type::turbo3, 128, 256, 2, 1);
  set_dense(p.v, data_type::turbo3, 128, 256, 2, 1);
  p.out.nb[1] = 0;  // a single query, a single sequence: their strides are never used
  p.out.nb[3] = 4;
  CHECK(validate(p) == status::ok);
}

TEST_CASE("validate: strides of 2^63 or more and spans past 64 bits", "[validate]") {
  attention_params p = make_valid();
  const size_t two63 = size_t{1} << 63;
  SECTION("q head stride 2^63") { p.q.nb[2] = two63; }
  SECTION("unused sequence stride of 2^63 + 4 on a single sequence") {
    set_dense(p.q, data_type::f32, 128, 4, 8, 1);
    set_dense(p.k, data_type::turbo3, 128, 256, 2, 1);
    set_dense(p.v, data_type::turbo3, 128, 256, 2, 1);
    set_dense(p.out, data_type::f32, 128, 4, 8, 1);
    p.k.nb[3] = two63 + 4;
  }
  SECTION("k row stride whose (ne - 1) * nb wraps 64 bits") { p.k.nb[1] = size_t{1} << 62; }
  SECTION("v span past 2^63 - 1 without wrapping") {
    p.v.nb[3] = (size_t{1} << 62) + 2;
    p.v.nb[2] = size_t{1} << 62;
  }
  SECTION("out strides summing past 2^63 - 1") {
    p.out.nb[2] = size_t{1} << 59;
    p.out.nb[3] = (size_t{1} << 62) + (size_t{1} << 61);
  }
  SECTION("mask sequence stride 2^63") { p.mask.nb[3] = two63; }
  SECTION("a span that wraps the address space from its pointer") {
    p.v.data = reinterpret_cast<const void*>(~uintptr_t{0} - 1023);  // 1 KiB below the top, v spans 50 KB
  }
  CHECK(validate(p) == status::invalid_argument);
}

TEST_CASE("validate: out overlapping an input", "[validate]") {
  attention_params p = make_valid();
  SECTION("q") { p.out.data = region(0); }
  SECTION("out's last row on q's first") { p.out.data = static_cast<unsigned char*>(region(0)) - 32 * 1024 + 512; }
  SECTION("k") { p.out.data = static_cast<unsigned char*>(region(1)) + 1024; }
  SECTION("v, out starting inside its last row") { p.out.data = static_cast<unsigned char*>(region(2)) + 51200 - 4; }
  SECTION("mask") { p.out.data = static_cast<unsigned char*>(region(3)) - 32 * 1024 + 4; }
  SECTION("sinks") {
    p.sinks = static_cast<const float*>(region(4)) + 100;
  }
  CHECK(validate(p) == status::invalid_argument);
}

TEST_CASE("validate: out next to its inputs, and inputs that overlap each other, are accepted", "[validate]") {
  attention_params p = make_valid();
  SECTION("out ends where q starts") { p.out.data = static_cast<unsigned char*>(region(0)) - 32 * 1024; }
  SECTION("out starts where v ends") { p.out.data = static_cast<unsigned char*>(region(2)) + 51200; }
  SECTION("sinks right after out") { p.sinks = reinterpret_cast<const float*>(static_cast<unsigned char*>(region(4)) + 32 * 1024); }
  SECTION("K and V in one buffer") { p.v.data = p.k.data; }
  SECTION("q broadcast over heads and sequences inside k") {
    p.q.nb[2] = p.q.nb[3] = 0;
    p.q.data = p.k.data;
  }
  CHECK(validate(p) == status::ok);
}

TEST_CASE("validate: view_bytes is the view's span, checked", "[validate]") {
  const int64_t ne[4] = {128, 3, 2, 5};
  const size_t nb[4] = {4, 600, 2000, 7000};
  size_t bytes = 0;
  REQUIRE(turbo3::detail::view_bytes(region(0), data_type::f32, ne, nb, bytes));
  CHECK(bytes == 2 * 600 + 1 * 2000 + 4 * 7000 + 512);
  const size_t wraps[4] = {4, size_t{1} << 62, 0, 0};
  CHECK(!turbo3::detail::view_bytes(region(0), data_type::f32, ne, wraps, bytes));
}
