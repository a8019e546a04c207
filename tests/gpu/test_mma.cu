// The MMA prefill kernel (matrix-core fragments, inline dequantization) against ref::attention on
// identical quantized bytes, limit NMSE 1e-5, forced through launch_options::kernel = mma: the
// prefill grids of test_grid.hpp (the twelve seed cases, the D = 128 grid, odd lengths, causal and
// masked, both rotation modes, both codebooks, every K/V pair, GQA up to 16, structured masks,
// ragged tiles), capture. First, the fragment abstraction alone: one 16x16x16 multiply checked
// element by element (lane layouts). A timing harness (hidden tag [.mma-timing]) compares MMA with
// TILE and materialize at pp512/2048/4096.
#include "attention_problem.hpp"
#include "test_grid.hpp"

#include <algorithm>
#include <vector>

#include "turbo3/platform/fragment.hpp"
#include "turbo3/platform/warpgroup_mma.hpp"

using namespace turbo3;
using turbo3_test::attention_case;
using turbo3_test::attention_problem;
using turbo3_test::check_nmse;
using turbo3_test::forced;
using turbo3_test::nmse_limit;
using turbo3_test::device_buffer;

namespace {

turbo3_test::reported_nmse g_mma("MMA"), g_mma_fragment("MMA fragment kernel forced at D=128/256"),
    g_mma_warpgroup("MMA two-warpgroup kernel forced at D=128/256"),
    g_mma_specialized("MMA warp-specialized warpgroup kernel forced at D=128/256");

// The MMA route as the launcher picks its kernel (on an sm_90 device of an sm_90a build: a
// warpgroup kernel for D = 128 and 256 with K and V of one type); there also the fragment kernel
// and both warpgroup forms forced, on the same problem, so each stays tested where the launcher's
// pick would hide it.
void run_case(const attention_case& c, std::mt19937_64& rng) {
  attention_problem prob(c, rng);
  INFO(c.describe());
  for (mma_variant variant :
       {mma_variant::automatic, mma_variant::fragment, mma_variant::warpgroup, mma_variant::warp_specialized}) {
    if (variant != mma_variant::automatic && c.head_dim != 128 && c.head_dim != 256) continue;
    INFO("mma variant " << (variant == mma_variant::fragment           ? "fragment"
                            : variant == mma_variant::warpgroup        ? "warpgroup"
                            : variant == mma_variant::warp_specialized ? "warp-specialized"
                                                                       : "automatic"));
    launch_options opt = forced(kernel_choice::mma);
    opt.mma = variant;
    const double e = run_and_compare(prob, opt);
    check_nmse(variant == mma_variant::fragment           ? g_mma_fragment
               : variant == mma_variant::warpgroup        ? g_mma_warpgroup
               : variant == mma_variant::warp_specialized ? g_mma_specialized
                                                          : g_mma,
               e, c.describe());
  }
}

// Runs every case of a grid through run_case.
void run_grid(const turbo3_test::case_grid& grid, std::mt19937_64& rng) {
  for (const turbo3_test::grid_case& g : grid) run_case(g.c, rng);
}

// ---- the fragment abstraction on its own ------------------------------------------------------------

// D = A B for one 16x16x16 tile, twice: A [16][16] and B^T [16][16] in shared memory (row stride 24
// halves), B read once from B^T (frag_load_b) and once from B's own rows (frag_load_b_rows); each
// accumulator element written at its (row, col) and counted, so a wrong lane layout of either
// load shows as a wrong value or a count other than 1.
TURBO3_GLOBAL void fragment_test_kernel(const uint16_t* a, const uint16_t* bt, float* d, int* hits) {
  __shared__ __align__(16) uint16_t a_s[16 * 24];
  __shared__ __align__(16) uint16_t b_s[16 * 24];
  __shared__ __align__(16) uint16_t b_rows[16 * 24];
  for (int i = static_cast<int>(threadIdx.x); i < 256; i += static_cast<int>(blockDim.x)) {
    a_s[(i / 16) * 24 + i % 16] = a[i];
    b_s[(i / 16) * 24 + i % 16] = bt[i];
    b_rows[(i % 16) * 24 + i / 16] = bt[i];  // B[k][n] = B^T[n][k]
  }
  __syncthreads();
  if constexpr (platform::has_fragment_mma) {
    platform::frag_a fa;
    platform::frag_b fb, fb_rows;
    platform::frag_acc c;
    platform::frag_zero(c);
    platform::frag_load_a(fa, a_s, 24);
    platform::frag_load_b(fb, b_s, 24);
    platform::frag_load_b_rows(fb_rows, b_rows, 24);
    platform::frag_mma(c, fa, fb);
    platform::frag_mma(c, fa, fb_rows);  // accumulates: D = 2 A B
    for (int i = 0; i < platform::frag_acc::elements; ++i) {
      const int r = platform::frag_acc_row(i), col = platform::frag_acc_col(i);
      d[r * 16 + col] = c.x[i];
      atomicAdd(hits + r * 16 + col, 1);
    }
  }
}

// The warpgroup multiply and its 128-byte-swizzled operands, as the warpgroup kernel lays them out:
// A [64][16] and B^T [64][16] (K-major, the 16 values at columns 16 s .. 16 s + 15 of a 64-column
// panel, the descriptor s * 32 bytes into the rows), and B [16][64] as K rows (TransB). Variant v:
// 0..3 both from shared memory at step s = v; 4: A from registers (frag_a layout of each warp's 16
// rows), B as K rows. Each result is 2 A B (a multiply that overwrites, then one that accumulates),
// written at its (row, col) from the frag_acc layout and counted.
TURBO3_GLOBAL void warpgroup_test_kernel(const uint16_t* a, const uint16_t* bt, float* d, int* hits, int variant) {
  __shared__ __align__(1024) unsigned char a_s[64 * 128];
  __shared__ __align__(1024) unsigned char b_s[64 * 128];
  auto swizzled = [](int r, int c) { return r * 128 + (((c / 8) ^ (r % 8)) * 16) + (c % 8) * 2; };
  const int tid = static_cast<int>(threadIdx.x), step = variant < 4 ? variant : 0;
  for (int i = tid; i < 64 * 16; i += 128) {
    const int r = i / 16, k = i % 16;
    *reinterpret_cast<uint16_t*>(a_s + swizzled(r, 16 * step + k)) = a[i];
    if (variant < 4) *reinterpret_cast<uint16_t*>(b_s + swizzled(r, 16 * step + k)) = bt[i];  // B^T[n][k]
    else *reinterpret_cast<uint16_t*>(b_s + swizzled(k, r)) = bt[i];                             // B[k][n]
  }
  platform::shared_writes_to_async();
  __syncthreads();
  if constexpr (platform::has_warpgroup_mma) {
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    auto pair = [&](int r, int k) { return static_cast<uint32_t>(a[r * 16 + k]) | (static_cast<uint32_t>(a[r * 16 + k + 1]) << 16); };
    platform::frag_a fa{{pair(16 * warp + g, 2 * t), pair(16 * warp + g + 8, 2 * t), pair(16 * warp + g, 2 * t + 8),
                         pair(16 * warp + g + 8, 2 * t + 8)}};
    platform::frag_acc acc[4];
    for (int rep = 0; rep < 2; ++rep) {
      platform::wg_hold(acc);
      platform::wg_hold(fa);
      platform::wg_fence();
      if (variant < 4)
        platform::wg_mma_ss<false>(acc, platform::wg_operand_swizzled(a_s + 32 * step, 1024),
                                   platform::wg_operand_swizzled(b_s + 32 * step, 1024), rep > 0);
      else
        platform::wg_mma_rs<true>(acc, fa, platform::wg_operand_swizzled(b_s, 1024), rep > 0);
      platform::wg_commit();
      platform::wg_wait<0>();
      platform::wg_hold(acc);
    }
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < platform::frag_acc::elements; ++i) {
        const int r = 16 * warp + platform::frag_acc_row(i), col = 16 * n + platform::frag_acc_col(i);
        d[r * 64 + col] = acc[n].x[i];
        atomicAdd(hits + r * 64 + col, 1);
      }
  }
}

}  // namespace

TEST_CASE("warpgroup multiply: 64x64x16 from 128-byte-swizzled shared memory (four steps into a panel) and with A from registers, every element at its coordinates", "[mma]") {
  int device = 0;
  TURBO3_CHECK_HIP(hipGetDevice(&device));
  if (!platform::warpgroup_mma_available(device)) {
    WARN("skipped: no warpgroup multiplies on this device or in this build");
    return;
  }
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x9a61);
  std::uniform_int_distribution<int> small(-8, 8);  // exact in fp16 and in the f32 sums
  std::vector<uint16_t> a(1024), bt(1024);
  std::vector<float> af(1024), bf(1024);
  for (int i = 0; i < 1024; ++i) {
    af[i] = static_cast<float>(small(rng)) * 0.25f;  // A [64][16]
    bf[i] = static_cast<float>(small(rng)) * 0.5f;   // B^T [64][16]
    a[i] = fp16_from_float(af[i]);
    bt[i] = fp16_from_float(bf[i]);
  }
  device_buffer da(2048), db(2048), dd(4 * 4096), dh(4 * 4096);
  da.upload(a.data(), 2048);
  db.upload(bt.data(), 2048);
  for (int variant = 0; variant < 5; ++variant) {
    INFO("variant " << variant);
    dd.poison();
    TURBO3_CHECK_HIP(hipMemset(dh.ptr, 0, 4 * 4096));
    warpgroup_test_kernel<<<1, 128>>>(da.as<uint16_t>(), db.as<uint16_t>(), dd.as<float>(), dh.as<int>(), variant);
    TURBO3_CHECK_HIP(hipGetLastError());
    TURBO3_CHECK_HIP(hipDeviceSynchronize());
    std::vector<float> d(4096);
    std::vector<int> hits(4096);
    dd.download(d.data(), 4 * 4096);
    dh.download(hits.data(), 4 * 4096);
    int bad = 0;
    for (int m = 0; m < 64; ++m)
      for (int n = 0; n < 64; ++n) {
        double want = 0;
        for (int k = 0; k < 16; ++k) want += static_cast<double>(af[m * 16 + k]) * bf[n * 16 + k];
        want *= 2;
        if (hits[m * 64 + n] != 1 || d[m * 64 + n] != static_cast<float>(want)) {
          if (bad < 8)
            UNSCOPED_INFO("D[" << m << "][" << n << "] = " << d[m * 64 + n] << " want " << want << ", written "
                               << hits[m * 64 + n] << " times");
          ++bad;
        }
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("fragment: one 16x16x16 multiply (B from its transpose and from its rows), every accumulator element at its coordinates", "[mma]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0xf4a9);
  std::uniform_int_distribution<int> small(-8, 8);  // exact in fp16 and in the f32 sums
  std::vector<uint16_t> a(256), bt(256);
  std::vector<float> af(256), bf(256);
  for (int i = 0; i < 256; ++i) {
    af[i] = static_cast<float>(small(rng)) * 0.25f;
    bf[i] = static_cast<float>(small(rng)) * 0.5f;
    a[i] = fp16_from_float(af[i]);
    bt[i] = fp16_from_float(bf[i]);
  }
  device_buffer da(512), db(512), dd(1024), dh(1024);
  da.upload(a.data(), 512);
  db.upload(bt.data(), 512);
  dd.poison();
  TURBO3_CHECK_HIP(hipMemset(dh.ptr, 0, 1024));
  fragment_test_kernel<<<1, 32>>>(da.as<uint16_t>(), db.as<uint16_t>(), dd.as<float>(), dh.as<int>());
  TURBO3_CHECK_HIP(hipGetLastError());
  TURBO3_CHECK_HIP(hipDeviceSynchronize());
  std::vector<float> d(256);
  std::vector<int> hits(256);
  dd.download(d.data(), 1024);
  dh.download(hits.data(), 1024);
  int bad = 0;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      double want = 0;
      for (int k = 0; k < 16; ++k) want += static_cast<double>(af[m * 16 + k]) * bf[n * 16 + k];
      want *= 2;
      if (hits[m * 16 + n] != 1 || d[m * 16 + n] != static_cast<float>(want)) {
        if (bad < 8)
          UNSCOPED_INFO("D[" << m << "][" << n << "] = " << d[m * 16 + n] << " want " << want << ", written "
                             << hits[m * 16 + n] << " times");
        ++bad;
      }
    }
  CHECK(bad == 0);
}

TEST_CASE("MMA: the prefill route grids (seed, D=128 options, odd lengths, K/V pairs, GQA)", "[mma]") {
  turbo3_test::run_prefill_route_grids(run_grid);
}

TEST_CASE("MMA: D=64 and D=512 unsupported", "[mma]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x7cb);
  // D = 64 and 512 are not MMA head dims (at 512 a warp's 16 output rows alone would take 256
  // registers a lane): unsupported, before anything is allocated or launched.
  for (data_type t : {data_type::f16, data_type::turbo3})
    for (int d : {64, 512}) {
      if (d == 64 && t != data_type::f16) continue;
      attention_case c;
      c.head_dim = d;
      c.n_head = 4;
      c.n_head_kv = 2;
      c.n_q = 70;
      c.n_kv = 333;
      c.k_type = c.v_type = t;
      INFO(c.describe());
      attention_problem prob(c, rng);
      arena_allocator none;  // an empty arena: any allocation would fail
      CHECK(flash_attention(prob.device_params(), none, nullptr, forced(kernel_choice::mma)) == status::unsupported);
    }
}

// Structured masks: the kernel reads each row's visible end from the mask and never loads the key
// tiles past it. Several query and key tiles, with and without the causal flag, rows of the mask
// not 16-byte aligned (padded by 5 keys).
TEST_CASE("MMA: structured masks (causal pattern, sliding window, hidden rows)", "[mma]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x3a5c);
  using kind = attention_case::mask_kind;
  run_grid(turbo3_test::structured_mask_grid({128, 256}, {data_type::f16, data_type::turbo3},
                                             {{200, 200, kind::causal, 0, false},
                                              {64, 300, kind::causal, 0, false},
                                              {150, 150, kind::window, 40, false},
                                              {300, 300, kind::window, 100, true},
                                              {3, 500, kind::causal, 0, false}}),
           rng);
}

// The sanitizer subset, then f16 and turbo3 K/V at D = 256 (NVIDIA: double-buffered tiles, turbo3
// staged) over several query and key tiles, causal by the flag and by ggml's causal mask.
TEST_CASE("MMA: sanitizer subset", "[mma-san]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x75a);
  run_grid(turbo3_test::sanitizer_grid({128, 256}), rng);
  run_grid(turbo3_test::causal_tiles_grid({data_type::f16, data_type::turbo3}, {false, true}), rng);
}

TEST_CASE("MMA: ragged shapes, GQA 12, ALiBi and softcap at D=256", "[mma]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x7a9d);
  run_grid(turbo3_test::ragged_grid(), rng);
}

TEST_CASE("routing: MMA by default where the family runs it, forced anywhere; workspace only for a key split",
          "[mma]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x7a1);
  attention_case c;
  c.head_dim = 256;
  c.n_head = 8;
  c.n_head_kv = 2;
  c.n_kv = 500;
  c.n_q = 40;
  c.mask = true;
  attention_problem prob(c, rng);
  const attention_params p = prob.device_params();
  launch_options one_pass = forced(kernel_choice::mma);
  one_pass.kv_splits = 1;
  CHECK(workspace_bytes(p, one_pass) == 0);
  CHECK((turbo3::route(p, launch_options{}) == kernel_choice::mma) ==
        detail::mma_by_default(platform::current_device_family()));
  arena_allocator none;  // an empty arena: any allocation would fail
  // 40 queries over 2 KV heads fill few multiprocessors, so the planner splits the keys and asks
  // for the partial rows: the empty arena gets out_of_memory before anything runs.
  if (workspace_bytes(p, forced(kernel_choice::mma)) > 0)
    CHECK(flash_attention(p, none, nullptr, forced(kernel_choice::mma)) == status::out_of_memory);
  check_nmse(g_mma, run_and_compare(prob, none, one_pass), "empty arena " + c.describe());
}

TEST_CASE("capture: MMA prefill with the arena allocator, replayed", "[mma][mma-capture]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x7cab);
  attention_case c;
  c.head_dim = 256;
  c.n_head = 16;
  c.n_head_kv = 8;
  c.n_q = 100;
  c.n_kv = 700;
  c.causal = true;
  c.sinks = true;
  attention_problem prob(c, rng);
  hipStream_t stream;
  TURBO3_CHECK_HIP(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  const launch_options opt = forced(kernel_choice::mma);
  // First eager call: raises the kernel's shared-memory limit outside the capture.
  {
    stream_pool_allocator pool;
    REQUIRE(flash_attention(prob.device_params(), pool, stream, opt) == status::ok);
    TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
  }
  // the arena holds what workspace_bytes reports (a key split's partial rows, or nothing)
  const size_t workspace = workspace_bytes(prob.device_params(), opt);
  device_buffer arena_memory(arena_allocator::footprint(workspace));
  arena_allocator arena(arena_memory.ptr, arena_memory.bytes);
  hipGraph_t graph = nullptr;
  hipGraphExec_t exec = nullptr;
  TURBO3_CHECK_HIP(hipStreamBeginCapture(stream, hipStreamCaptureModeGlobal));
  const status s = flash_attention(prob.device_params(), arena, stream, opt);
  TURBO3_CHECK_HIP(hipStreamEndCapture(stream, &graph));
  REQUIRE(s == status::ok);
  CHECK(arena.used() <= arena_allocator::footprint(workspace));
  TURBO3_CHECK_HIP(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
  double worst = 0;
  for (int replay = 0; replay < 5; ++replay) {
    prob.refill(rng);
    prob.poison_output();
    TURBO3_CHECK_HIP(hipGraphLaunch(exec, stream));
    TURBO3_CHECK_HIP(hipStreamSynchronize(stream));
    const double e = prob.compare_with_reference();
    INFO("replay " << replay << " NMSE " << e);
    REQUIRE(e <= nmse_limit);
    worst = std::max(worst, e);
  }
  g_mma.record(worst, "capture " + c.describe());
  std::printf("capture prefill (mma): 5 replays with new Q/K/V, worst NMSE %.3e\n", worst);
  TURBO3_CHECK_HIP(hipGraphExecDestroy(exec));
  TURBO3_CHECK_HIP(hipGraphDestroy(graph));
  TURBO3_CHECK_HIP(hipStreamDestroy(stream));
}

// Timing: D = 256, 16 query heads over 8 KV heads, causal, n_q = n_kv = 512 / 2048 / 4096:
// turbo3 MMA, f16 MMA, turbo3 TILE, turbo3 materialize. Hidden (run explicitly).
TEST_CASE("timing: MMA prefill pp512/2048/4096", "[.mma-timing]") {
  std::mt19937_64 rng(turbo3_test::run_seed() ^ 0x71f);
  hipEvent_t e0, e1;
  TURBO3_CHECK_HIP(hipEventCreate(&e0));
  TURBO3_CHECK_HIP(hipEventCreate(&e1));
  stream_pool_allocator pool;
  for (int n : {512, 2048, 4096}) {
    attention_case c;
    c.head_dim = 256;
    c.n_head = 16;
    c.n_head_kv = 8;
    c.n_q = c.n_kv = n;
    c.causal = true;
    attention_problem t3(c, rng);
    c.k_type = c.v_type = data_type::f16;
    attention_problem f16(c, rng);
    struct variant {
      attention_problem* prob;
      kernel_choice k;
    } variants[] = {{&t3, kernel_choice::mma}, {&f16, kernel_choice::mma}, {&t3, kernel_choice::tile},
                    {&t3, kernel_choice::materialize}};
    double us[4] = {0, 0, 0, 0};
    for (int v = 0; v < 4; ++v) {
      const attention_params p = variants[v].prob->device_params();
      const launch_options opt = forced(variants[v].k);
      for (int w = 0; w < 2; ++w) REQUIRE(flash_attention(p, pool, nullptr, opt) == status::ok);
      const int reps = 10;
      TURBO3_CHECK_HIP(hipEventRecord(e0, nullptr));
      for (int r = 0; r < reps; ++r) flash_attention(p, pool, nullptr, opt);
      TURBO3_CHECK_HIP(hipEventRecord(e1, nullptr));
      TURBO3_CHECK_HIP(hipEventSynchronize(e1));
      float ms = 0;
      TURBO3_CHECK_HIP(hipEventElapsedTime(&ms, e0, e1));
      us[v] = 1000.0 * ms / reps;
    }
    const double flop = 4.0 * c.n_head * c.head_dim * (static_cast<double>(n) * (n + 1) / 2);
    std::printf("pp%d: turbo3 MMA %.1f us (%.1f TFLOP/s), f16 MMA %.1f us (%.1f TFLOP/s), turbo3 TILE %.1f us, "
                "turbo3 materialize %.1f us\n",
                n, us[0], flop / us[0] * 1e-6, us[1], flop / us[1] * 1e-6, us[2], us[3]);
    std::printf("pp%d ratios: turbo3 MMA / f16 MMA speed %.3fx, MMA vs TILE %.2fx, MMA vs materialize %.2fx\n", n,
                us[1] / us[0], us[2] / us[0], us[3] / us[0]);
  }
  TURBO3_CHECK_HIP(hipEventDestroy(e0));
  TURBO3_CHECK_HIP(hipEventDestroy(e1));
}
