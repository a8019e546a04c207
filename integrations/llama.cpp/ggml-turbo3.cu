// The glue between ggml's CUDA/HIP backend and the turbo3 library: FLASH_ATTN_EXT nodes over a
// turbo3 cache run on the library's kernels, with ggml's stream and ggml's memory pool; every
// other node stays on ggml's kernels and is counted by the reason it stayed. Compiled into
// ggml-cuda (or ggml-hip) by ggml-turbo3.cmake when the fork is configured with GGML_CUDA_TURBO3.
//
// Environment:
//   GGML_TURBO3=turbo3|all|off   which nodes go to the library: those with a turbo3 K or V (the
//                                default), also f16/f16 ones, or none (ggml's kernels only)
//   GGML_TURBO3_SET_ROWS=0       keep the turbo3 cache write (SET_ROWS) on the fork's kernel; by
//                                default it goes through turbo3::write_rows (not while the fork's
//                                InnerQ is on)
//   GGML_TURBO3_WHT=0            keep the fork's TURBO_WHT rotations on its kernel; by default they
//                                go through turbo3::rotate_groups, bit-exact with it
//   GGML_TURBO3_FUSE_WHT=0       run the rotations around an attention node as nodes of their own; by
//                                default they are folded into its call (Q rotated and the output
//                                un-rotated inside the kernels): the TURBO_WHT -> FLASH_ATTN_EXT ->
//                                TURBO_WHT chain becomes one launch (not with GGML_TURBO3_WHT=0, nor
//                                while the fork's InnerQ is on)
//   GGML_TURBO3_LOG=1            one line per distinct decision (shape, route or reason)
// At exit a summary line goes to stderr: nodes served per kernel family, nodes left to ggml per
// reason, how many of each happened while a CUDA graph was being captured, and the graph captures
// and launches of the process.
#include "ggml-turbo3.cuh"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ggml_turbo3_adapter.hpp"
#include "turbo3/turbo3.hpp"

namespace {

using turbo3::ggml_adapter::refusal;
using turbo3::ggml_adapter::serve_policy;

constexpr turbo3::ggml_adapter::ggml_ids ggml_enum_values = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_TURBO3_0,
                                                             GGML_OP_FLASH_ATTN_EXT};

static bool env_flag(const char * name) {
    const char * e = getenv(name);
    return e && *e && strcmp(e, "0") != 0 && strcmp(e, "off") != 0;
}

static serve_policy policy() {
    static const serve_policy p = [] {
        const char * e = getenv("GGML_TURBO3");
        if (!e || !*e || !strcmp(e, "turbo3") || !strcmp(e, "1") || !strcmp(e, "on")) {
            return serve_policy::turbo3;
        }
        if (!strcmp(e, "all")) {
            return serve_policy::all;
        }
        return serve_policy::none;
    }();
    return p;
}

static bool log_enabled() {
    static const bool on = env_flag("GGML_TURBO3_LOG");
    return on;
}

// The cache write and the rotations go to the library unless their variable says 0 or off (or the
// policy is "off"): in a pp2048 they take 3.4 ms of GPU time there against 14.8 ms in the fork's
// kernels (docs/performance.md, engine).
static bool route_enabled(const char * name) {
    const char * e = getenv(name);
    const bool off = e && (!strcmp(e, "0") || !strcmp(e, "off"));
    return policy() != serve_policy::none && !off;
}

static bool set_rows_enabled() {
    // The fork's InnerQ calibrates on and scales the written rows inside its own kernel.
    static const bool on = route_enabled("GGML_TURBO3_SET_ROWS") && !env_flag("TURBO_INNERQ");
    return on;
}

static bool wht_enabled() {
    static const bool on = route_enabled("GGML_TURBO3_WHT");
    return on;
}

// Two launches fewer per layer and ubatch bring a pp2048's kernels to the f16 cache's
// (docs/performance.md, engine). Off under InnerQ: the fork's rotation of Q then scales by
// calibrated per-channel factors that the attention call does not take.
static bool fuse_enabled() {
    static const bool on = wht_enabled() && route_enabled("GGML_TURBO3_FUSE_WHT") && !env_flag("TURBO_INNERQ");
    return on;
}

constexpr int n_routes = 5;  // turbo3::kernel_choice: automatic (unused), vec, tile, materialize, mma
constexpr int n_refusals = static_cast<int>(refusal::count_);

struct statistics {
    std::atomic<uint64_t> served[n_routes] = {};
    std::atomic<uint64_t> served_capturing{0};
    std::atomic<uint64_t> refused[n_refusals] = {};
    std::atomic<uint64_t> refused_capturing{0};
    std::atomic<uint64_t> graph_captures{0};
    std::atomic<uint64_t> graph_launches{0};
    std::atomic<uint64_t> set_rows_served{0};
    std::atomic<uint64_t> wht_served{0};
    std::atomic<uint64_t> rotations_fused{0};

    ~statistics() {
        uint64_t n_served = 0, n_refused = 0;
        for (const auto & s : served) n_served += s.load();
        for (const auto & r : refused) n_refused += r.load();
        if (n_served + n_refused == 0 && !log_enabled()) {
            return;
        }
        static const char * route_names[n_routes] = {"automatic", "vec", "tile", "materialize", "mma"};
        std::string line = "turbo3: FLASH_ATTN_EXT " + std::to_string(n_served) + " served (";
        bool first = true;
        for (int i = 0; i < n_routes; ++i) {
            if (served[i].load() == 0) continue;
            line += (first ? "" : ", ") + std::string(route_names[i]) + " " + std::to_string(served[i].load());
            first = false;
        }
        line += "; " + std::to_string(served_capturing.load()) + " while capturing), " +
                std::to_string(n_refused) + " left to ggml (";
        first = true;
        for (int i = 0; i < n_refusals; ++i) {
            if (refused[i].load() == 0) continue;
            line += (first ? "" : ", ") + std::string(to_string(static_cast<refusal>(i))) + " " +
                    std::to_string(refused[i].load());
            first = false;
        }
        line += "; " + std::to_string(refused_capturing.load()) + " while capturing); SET_ROWS " +
                std::to_string(set_rows_served.load()) + " served; TURBO_WHT " +
                std::to_string(wht_served.load()) + " served; rotations folded into " +
                std::to_string(rotations_fused.load()) + " attention calls; CUDA graphs " +
                std::to_string(graph_captures.load()) + " captured, " + std::to_string(graph_launches.load()) +
                " launched\n";
        fputs(line.c_str(), stderr);
    }
};

statistics g_stats;

// One line per distinct decision (the text is its own key).
static void log_once(const std::string & text) {
    static std::mutex mutex;
    static std::unordered_set<std::string> seen;
    std::lock_guard<std::mutex> lock(mutex);
    if (seen.insert(text).second) {
        fprintf(stderr, "turbo3: %s\n", text.c_str());
    }
}

static std::string describe(const ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    char buf[256];
    snprintf(buf, sizeof buf, "%s K %s V %s D %" PRId64 "/%" PRId64 " n_q %" PRId64 " n_kv %" PRId64 " heads %" PRId64 "/%" PRId64 "%s%s",
             ggml_op_name(dst->op), ggml_type_name(k->type), ggml_type_name(v->type), k->ne[0], v->ne[0], q->ne[1],
             k->ne[1], q->ne[2], k->ne[2], dst->src[3] ? " mask" : "", dst->src[4] ? " sinks" : "");
    return buf;
}

static bool stream_capturing(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
        (void) cudaGetLastError();
        return false;
    }
    return status != cudaStreamCaptureStatusNone;
}

// ggml's per-device, per-stream pool as a turbo3 allocator. ggml's own kernels take their
// temporaries from it while a CUDA graph is captured (the capture runs in relaxed mode and the
// pool hands out the same addresses on every evaluation of a graph), so the library may too.
struct pool_allocator {
    static constexpr bool capture_safe = true;
    static constexpr int max_live = 4;

    ggml_cuda_pool & pool;
    void * ptr[max_live] = {};
    size_t actual[max_live] = {};

    void * allocate(size_t bytes, cudaStream_t) {
        for (int i = 0; i < max_live; ++i) {
            if (ptr[i] == nullptr) {
                ptr[i] = pool.alloc(bytes, &actual[i]);
                return ptr[i];
            }
        }
        return nullptr;
    }
    void deallocate(void * p, size_t, cudaStream_t) {
        for (int i = 0; i < max_live; ++i) {
            if (ptr[i] == p && p != nullptr) {
                pool.free(p, actual[i]);
                ptr[i] = nullptr;
                return;
            }
        }
    }
};

// Zeroed decode counters per stream (launch_options::counters): the warp decode kernel leaves them
// zero, so one buffer serves every layer and every replay on its stream and no zeroing kernel is
// queued per call. Made on the first eager call of a stream (not while capturing: then the
// counters come from the workspace as usual) and kept until the process ends.
constexpr size_t stream_counter_bytes = 64 * 1024;

static void * stream_counters(cudaStream_t stream, size_t need, bool capturing) {
    static std::mutex mutex;
    static std::unordered_map<cudaStream_t, void *> counters;
    if (need > stream_counter_bytes) {
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = counters.find(stream);
    if (it != counters.end()) {
        return it->second;
    }
    if (capturing) {
        return nullptr;
    }
    void * p = nullptr;
    if (cudaMalloc(&p, stream_counter_bytes) != cudaSuccess ||
        cudaMemsetAsync(p, 0, stream_counter_bytes, stream) != cudaSuccess) {
        (void) cudaGetLastError();
        if (p) (void) cudaFree(p);
        p = nullptr;  // remembered: this stream takes its counters from the workspace
    }
    counters.emplace(stream, p);
    return p;
}

// The decision for a node. ggml's graph allocator asks (through the buffer-size query) before the
// tensors have addresses: a view without one is then judged at a stand-in address of its own, so
// the answer is the one the node gets once it is placed.
static turbo3::ggml_adapter::mapping decide(const ggml_tensor * dst) {
    turbo3::ggml_adapter::mapping m = turbo3::ggml_adapter::map_flash_attn_ext(dst, ggml_enum_values, policy());
    if (m.why != refusal::none) {
        return m;
    }
    turbo3::attention_params p = m.params;
    const void ** views[] = {&p.q.data, &p.k.data, &p.v.data, &p.mask.data};
    uintptr_t stand_in = uintptr_t{1} << 44;
    for (const void ** data : views) {
        stand_in += uintptr_t{1} << 40;
        if (*data == nullptr && (data != &p.mask.data || dst->src[3] != nullptr)) {
            *data = reinterpret_cast<const void *>(stand_in);
        }
    }
    if (p.out.data == nullptr) {
        p.out.data = reinterpret_cast<void *>(stand_in + (uintptr_t{1} << 40));
    }
    if (p.sinks == nullptr && dst->src[4] != nullptr) {
        p.sinks = reinterpret_cast<const float *>(stand_in + (uintptr_t{2} << 40));
    }
    if (turbo3::supported(p) != turbo3::status::ok) {
        m.why = refusal::library;
    }
    return m;
}

}  // namespace

bool ggml_cuda_turbo3_serves(int device, const ggml_tensor * dst) {
    if (dst->op != GGML_OP_FLASH_ATTN_EXT) {
        return false;
    }
    ggml_cuda_set_device(device);
    return decide(dst).why == refusal::none;
}

namespace {

static bool overlap(const ggml_tensor * a, const void * b_data, size_t b_bytes) {
    if (!a || !a->data || !b_data) return false;
    const auto a0 = reinterpret_cast<uintptr_t>(a->data), b0 = reinterpret_cast<uintptr_t>(b_data);
    return a0 < b0 + b_bytes && b0 < a0 + ggml_nbytes(a);
}

// Runs a node that decide() serves, with `p` (its params, or those of the chain it stands for).
static void run_served(ggml_backend_cuda_context & ctx, const ggml_tensor * dst, const turbo3::attention_params & p,
                       cudaStream_t stream, bool capturing) {
    turbo3::launch_options options;
    const size_t counter_need = turbo3::counter_bytes(p, options);
    if (counter_need > 0) {
        if (void * c = stream_counters(stream, counter_need, capturing)) {
            options.counters = c;
            options.counters_bytes = stream_counter_bytes;
        }
    }
    pool_allocator allocator{ctx.pool()};
    const turbo3::status s = turbo3::flash_attention(p, allocator, stream, options);
    if (s != turbo3::status::ok) {
        // supported() said yes, so nothing but a failed launch or allocation lands here; ggml's
        // kernels cannot take over (the node's buffer holds none of their f16 copies).
        GGML_ABORT("turbo3: flash_attention failed (%s) on %s", turbo3::to_string(s), describe(dst).c_str());
    }
    const int route = static_cast<int>(turbo3::route(p, options));
    g_stats.served[route < n_routes ? route : 0]++;
    if (capturing) g_stats.served_capturing++;
    if (log_enabled()) {
        static const char * names[n_routes] = {"automatic", "vec", "tile", "materialize", "mma"};
        log_once(describe(dst) + ": turbo3 " + names[route < n_routes ? route : 0] +
                 (p.rotate_q ? ", rotations folded in" : ""));
    }
}

}  // namespace

bool ggml_cuda_turbo3_flash_attn_ext(ggml_backend_cuda_context & ctx, ggml_tensor * dst) {
    const turbo3::ggml_adapter::mapping m = decide(dst);
    cudaStream_t stream = ctx.stream();
    const bool capturing = stream_capturing(stream);
    if (m.why != refusal::none) {
        g_stats.refused[static_cast<int>(m.why)]++;
        if (capturing) g_stats.refused_capturing++;
        if (log_enabled()) log_once(describe(dst) + ": left to ggml (" + to_string(m.why) + ")");
        return false;
    }
    run_served(ctx, dst, m.params, stream, capturing);
    return true;
}

int ggml_cuda_turbo3_fuse_rotations(ggml_backend_cuda_context & ctx, const ggml_cgraph * graph, int i,
                                    bool (*launches_nothing)(const ggml_tensor *)) {
    ggml_tensor * rotate_q = graph->nodes[i];
    if (rotate_q->op != GGML_OP_TURBO_WHT || !fuse_enabled()) {
        return 0;
    }
    // The chain: rotate_q, views of it, the attention node, views, the output's rotation. Only
    // nodes that launch nothing lie between, so the attention's other inputs are ready at i.
    int j = i + 1;
    while (j < graph->n_nodes && launches_nothing(graph->nodes[j])) ++j;
    if (j >= graph->n_nodes || graph->nodes[j]->op != GGML_OP_FLASH_ATTN_EXT) {
        return 0;
    }
    ggml_tensor * attention = graph->nodes[j];
    int k = j + 1;
    while (k < graph->n_nodes && launches_nothing(graph->nodes[k])) ++k;
    if (k >= graph->n_nodes || graph->nodes[k]->op != GGML_OP_TURBO_WHT || graph->nodes[k]->src[0] != attention) {
        return 0;
    }
    ggml_tensor * rotate_out = graph->nodes[k];
    const ggml_tensor * q = attention->src[0];
    if (q != rotate_q && q->view_src != rotate_q) {
        return 0;
    }
    // Neither rotated Q nor the rotated output may be read by anything else: they are never written.
    if (ggml_node_get_use_count(graph, i) != 1 || ggml_node_get_use_count(graph, j) != 1 ||
        (rotate_q->flags & GGML_TENSOR_FLAG_OUTPUT) || (attention->flags & GGML_TENSOR_FLAG_OUTPUT)) {
        return 0;
    }
    for (int n = i + 1; n < j; ++n) {
        if (graph->nodes[n]->view_src == rotate_q && ggml_node_get_use_count(graph, n) != 1) {
            return 0;
        }
    }
    const auto wq = turbo3::ggml_adapter::rotation_params_of(rotate_q);
    const auto wo = turbo3::ggml_adapter::rotation_params_of(rotate_out);
    const ggml_tensor * q_source = rotate_q->src[0];
    const bool plain = wq.direction == 0 && wo.direction == 1 && wq.group == turbo3::block_values &&
                       wo.group == turbo3::block_values && q_source->type == GGML_TYPE_F32 &&
                       ggml_is_contiguous(q_source) && ggml_are_same_shape(q_source, rotate_q) &&
                       rotate_out->type == GGML_TYPE_F32 && ggml_is_contiguous(rotate_out) &&
                       ggml_is_contiguous(attention) && ggml_are_same_shape(rotate_out, attention);
    if (!plain) {
        return 0;
    }
    const turbo3::ggml_adapter::mapping m = decide(attention);
    if (m.why != refusal::none) {
        return 0;  // the nodes run one by one, and the attention node says why it stays with ggml
    }
    // Q from the rotation's source at the view's offset (same shape, both contiguous), the output
    // straight into the output rotation's tensor, both rotations inside the call.
    turbo3::attention_params p = m.params;
    const ptrdiff_t q_offset = static_cast<const char *>(p.q.data) - static_cast<const char *>(rotate_q->data);
    p.q.data = static_cast<const char *>(q_source->data) + q_offset;
    p.out.data = rotate_out->data;
    p.rotate_q = true;
    p.unrotate_out = true;
    // ggml's allocator may give the output's rotation memory that an input of the chain held before
    // (rotated Q, or Q's source once its rotation has run): then the nodes run one by one.
    const size_t out_bytes = ggml_nbytes(rotate_out);
    const ggml_tensor * inputs[] = {q_source, attention->src[1], attention->src[2], attention->src[3], attention->src[4]};
    for (const ggml_tensor * input : inputs) {
        if (overlap(input, p.out.data, out_bytes)) {
            return 0;
        }
    }
    if (turbo3::supported(p) != turbo3::status::ok) {
        return 0;
    }
    cudaStream_t stream = ctx.stream();
    run_served(ctx, attention, p, stream, stream_capturing(stream));
    g_stats.rotations_fused++;
    return k - i;
}

bool ggml_cuda_turbo3_set_rows(ggml_backend_cuda_context & ctx, ggml_tensor * dst) {
    if (!set_rows_enabled() || dst->type != GGML_TYPE_TURBO3_0) {
        return false;
    }
    const ggml_tensor * src = dst->src[0];
    const ggml_tensor * ids = dst->src[1];
    int32_t group = 128;
    memcpy(&group, dst->op_params, sizeof group);
    const bool plain_2d = src->ne[2] == 1 && src->ne[3] == 1 && dst->ne[2] == 1 && dst->ne[3] == 1 &&
                          ids->ne[0] == src->ne[1] && ids->ne[1] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1 &&
                          ids->nb[0] == ggml_type_size(ids->type) && src->nb[0] == ggml_type_size(src->type);
    if (!plain_2d || (group != 0 && group != 128) || (src->type != GGML_TYPE_F32 && src->type != GGML_TYPE_F16)) {
        return false;
    }
    turbo3::row_source rows;
    rows.data = src->data;
    rows.type = src->type == GGML_TYPE_F32 ? turbo3::data_type::f32 : turbo3::data_type::f16;
    rows.n_cols = src->ne[0];
    rows.n_rows = src->ne[1];
    rows.row_stride = src->nb[1];
    turbo3::cache_view cache;
    cache.data = dst->data;
    cache.type = turbo3::data_type::turbo3;
    cache.n_cols = dst->ne[0];
    cache.n_rows = dst->ne[1];
    cache.row_stride = dst->nb[1];
    if (turbo3::validate_write(rows, cache) != turbo3::status::ok) {
        return false;
    }
    const turbo3::status s = ids->type == GGML_TYPE_I64
        ? turbo3::write_rows(rows, static_cast<const int64_t *>(ids->data), cache, ctx.stream(),
                             turbo3::ggml_adapter::turbo3_codebook)
        : turbo3::write_rows(rows, static_cast<const int32_t *>(ids->data), cache, ctx.stream(),
                             turbo3::ggml_adapter::turbo3_codebook);
    if (s != turbo3::status::ok) {
        GGML_ABORT("turbo3: write_rows failed (%s)", turbo3::to_string(s));
    }
    g_stats.set_rows_served++;
    return true;
}

bool ggml_cuda_turbo3_turbo_wht(ggml_backend_cuda_context & ctx, ggml_tensor * dst) {
    if (!wht_enabled()) {
        return false;
    }
    const ggml_tensor * src = dst->src[0];
    const ggml_tensor * channel_scale = dst->src[1];  // the fork's InnerQ factors, or none
    const auto w = turbo3::ggml_adapter::rotation_params_of(dst);
    const int32_t direction = w.direction, group = w.group;
    const bool plain = src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 && ggml_is_contiguous(src) &&
                       ggml_is_contiguous(dst) && ggml_nelements(src) == ggml_nelements(dst) &&
                       group == turbo3::block_values && src->ne[0] % turbo3::block_values == 0 &&
                       (direction == 0 || direction == 1);
    const bool scale_ok = !channel_scale || (channel_scale->type == GGML_TYPE_F32 && ggml_is_contiguous(channel_scale) &&
                                             ggml_nelements(channel_scale) >= turbo3::block_values);
    if (!plain || !scale_ok) {
        if (log_enabled()) {
            log_once("TURBO_WHT left to ggml: src " + std::string(ggml_type_name(src->type)) +
                     (ggml_is_contiguous(src) ? " contiguous" : " strided") + ", dst " +
                     (ggml_is_contiguous(dst) ? "contiguous" : "strided") + ", ne0 " + std::to_string(src->ne[0]) +
                     ", group " + std::to_string(group) + ", direction " + std::to_string(direction) +
                     (channel_scale ? ", channel scale " + std::string(ggml_type_name(channel_scale->type)) + " x " +
                                          std::to_string(ggml_nelements(channel_scale))
                                    : ", no channel scale"));
        }
        return false;
    }
    const turbo3::status s = turbo3::rotate_groups(
        static_cast<const float *>(src->data), static_cast<float *>(dst->data),
        ggml_nelements(src) / turbo3::block_values,
        direction == 0 ? turbo3::rotation_direction::forward : turbo3::rotation_direction::inverse,
        channel_scale ? static_cast<const float *>(channel_scale->data) : nullptr, ctx.stream());
    if (s == turbo3::status::invalid_argument) {
        if (log_enabled()) log_once("TURBO_WHT left to ggml: rotate_groups refuses its buffers (invalid_argument)");
        return false;  // e.g. src and dst overlapping in part: the fork's kernel takes it
    }
    if (s != turbo3::status::ok) {
        GGML_ABORT("turbo3: rotate_groups failed (%s)", turbo3::to_string(s));
    }
    g_stats.wht_served++;
    return true;
}

void ggml_cuda_turbo3_note_graph_capture() {
    g_stats.graph_captures++;
}

void ggml_cuda_turbo3_note_graph_launch() {
    g_stats.graph_launches++;
}
