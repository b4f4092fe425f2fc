// Latency samples -> the numbers every benchmark prints.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace rdmasock::bench {

struct Summary {
    std::string mode;
    size_t size = 0;
    size_t iters = 0;
    double p50_us = 0, p99_us = 0, p999_us = 0;
    double rt_per_s = 0;
    double cpu_us_per_rt = 0;  // user+system CPU of both processes, per round trip
};

inline double percentile(std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    size_t i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(i, sorted.size() - 1)];
}

inline Summary summarize(std::string mode, size_t size, std::vector<double> ns, double wall_s, double cpu_s) {
    std::sort(ns.begin(), ns.end());
    Summary s;
    s.mode = std::move(mode);
    s.size = size;
    s.iters = ns.size();
    s.p50_us = percentile(ns, 0.50) / 1000;
    s.p99_us = percentile(ns, 0.99) / 1000;
    s.p999_us = percentile(ns, 0.999) / 1000;
    s.rt_per_s = wall_s > 0 ? static_cast<double>(ns.size()) / wall_s : 0;
    s.cpu_us_per_rt = ns.empty() ? 0 : cpu_s * 1e6 / static_cast<double>(ns.size());
    return s;
}

// Prints the table with ratios against the row named `baseline` (TCP).
inline void print_table(const std::vector<Summary>& rows, const std::string& baseline, FILE* out = stdout) {
    const Summary* base = nullptr;
    for (const auto& r : rows)
        if (r.mode == baseline) base = &r;
    std::fprintf(out, "%-12s %6s %9s %10s %10s %10s %12s %11s %12s\n", "mode", "size", "iters", "p50_us",
                 "p99_us", "p99.9_us", "rt_per_s", "cpu_us/rt", "p50_vs_tcp");
    for (const auto& r : rows) {
        char ratio[32] = "n/a";
        if (base && r.p50_us > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", base->p50_us / r.p50_us);
        std::fprintf(out, "%-12s %6zu %9zu %10.3f %10.3f %10.3f %12.0f %11.3f %12s\n", r.mode.c_str(), r.size,
                     r.iters, r.p50_us, r.p99_us, r.p999_us, r.rt_per_s, r.cpu_us_per_rt, ratio);
    }
}

inline void write_csv(const std::vector<Summary>& rows, const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return;
    std::fprintf(f, "mode,size,iters,p50_us,p99_us,p999_us,rt_per_s,cpu_us_per_rt\n");
    for (const auto& r : rows)
        std::fprintf(f, "%s,%zu,%zu,%.4f,%.4f,%.4f,%.1f,%.4f\n", r.mode.c_str(), r.size, r.iters, r.p50_us, r.p99_us,
                     r.p999_us, r.rt_per_s, r.cpu_us_per_rt);
    std::fclose(f);
}

}  // namespace rdmasock::bench
