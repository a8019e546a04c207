// GPU kernel totals of one process, for machines without Nsight Systems: LD_PRELOAD this library
// (built by build.sh when CUPTI is present) and it records every kernel through CUPTI's activity
// API, then writes one CSV line per kernel name at exit, sorted by total time:
//   total_ns,count,avg_ns,name
// to $KERNEL_TIMES_OUT (default: stderr). Names are demangled and cut to 200 characters.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct kernel_total {
    unsigned long long ns = 0;
    unsigned long long count = 0;
};

std::mutex totals_mutex;
std::map<std::string, kernel_total>& totals() {
    static std::map<std::string, kernel_total> by_name;
    return by_name;
}

constexpr size_t activity_buffer_bytes = 8u << 20;

std::string readable(const char* mangled) {
    int status = 0;
    char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string name = status == 0 && plain ? plain : mangled;
    std::free(plain);
    if (name.size() > 200) name.resize(200);
    for (char& c : name) if (c == ',') c = ';';  // one CSV field
    return name;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, activity_buffer_bytes));
    *size = activity_buffer_bytes;
    *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
    CUpti_Activity* record = nullptr;
    std::lock_guard<std::mutex> lock(totals_mutex);
    while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        kernel_total& total = totals()[readable(kernel->name)];
        total.ns += kernel->end - kernel->start;
        total.count += 1;
    }
    std::free(buffer);
}

struct recorder {
    recorder() {
        if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
            cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS)
            std::fprintf(stderr, "kernel_times: CUPTI activity recording could not start\n");
    }
    ~recorder() {
        cuptiActivityFlushAll(1);
        std::vector<std::pair<std::string, kernel_total>> rows(totals().begin(), totals().end());
        std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
        const char* path = std::getenv("KERNEL_TIMES_OUT");
        FILE* out = path ? std::fopen(path, "w") : stderr;
        if (!out) out = stderr;
        std::fprintf(out, "total_ns,count,avg_ns,name\n");
        for (const auto& [name, total] : rows)
            std::fprintf(out, "%llu,%llu,%llu,%s\n", total.ns, total.count, total.ns / std::max(1ull, total.count),
                         name.c_str());
        if (out != stderr) std::fclose(out);
    }
};

recorder the_recorder;

}  // namespace
