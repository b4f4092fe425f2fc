// Latency samples -> the numbers every benchmark prints, and their CSV form.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace rdmasock::bench {

// A shimmed connection starts on TCP: the same-host switch waits for the
// connection to live (RDMASOCK_SHM_AFTER_US, 2 ms by default where there is no
// RDMA device), then for the server's next look and the rings. 330 round trips
// of 4 KiB over a quiet loopback end within that (bench_smoke's shm row: the
// stats said transport=tcp, "closed before the switch", 20 runs of 20 on
// 2026-11-30), so the timed part would have measured TCP. A shimmed client's
// warm-up lasts at least this long, well past the switch (pingpong, spin_sweep).
inline constexpr unsigned kShimWarmupMs = 250;

// User and system CPU seconds (getrusage).
struct Cpu {
    double user = 0, sys = 0;
};

struct Summary {
    std::string mode;
    size_t size = 0;
    size_t iters = 0;
    double p50_us = 0, p99_us = 0, p999_us = 0;
    double rt_per_s = 0;
    // Payload bytes carried each way per second: size x round trips/s.
    double mb_per_s = 0;
    // CPU of both processes over the timed round trips, per round trip.
    double cpu_user_us_per_rt = 0, cpu_sys_us_per_rt = 0;
    bool ok = true;  // false: the run failed (the row is printed, marked, and left out of plots)
    double cpu_us_per_rt() const { return cpu_user_us_per_rt + cpu_sys_us_per_rt; }
};

inline double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    size_t i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(i, sorted.size() - 1)];
}

inline Summary summarize(std::string mode, size_t size, std::vector<double> ns, double wall_s, Cpu cpu) {
    std::sort(ns.begin(), ns.end());
    Summary s;
    s.mode = std::move(mode);
    s.size = size;
    s.iters = ns.size();
    s.p50_us = percentile(ns, 0.50) / 1000;
    s.p99_us = percentile(ns, 0.99) / 1000;
    s.p999_us = percentile(ns, 0.999) / 1000;
    s.rt_per_s = wall_s > 0 ? static_cast<double>(ns.size()) / wall_s : 0;
    s.mb_per_s = s.rt_per_s * static_cast<double>(size) / 1e6;
    if (!ns.empty()) {
        s.cpu_user_us_per_rt = cpu.user * 1e6 / static_cast<double>(ns.size());
        s.cpu_sys_us_per_rt = cpu.sys * 1e6 / static_cast<double>(ns.size());
    }
    return s;
}

inline Summary failed(std::string mode, size_t size) {
    Summary s;
    s.mode = std::move(mode);
    s.size = size;
    s.ok = false;
    return s;
}

// Prints the table; the ratios are against the row named `baseline` of the same size.
inline void print_table(const std::vector<Summary>& rows, const std::string& baseline, FILE* out = stdout) {
    std::fprintf(out, "%-20s %8s %8s %10s %10s %10s %11s %10s %9s %9s %10s\n", "mode", "size", "iters", "p50_us",
                 "p99_us", "p99.9_us", "rt_per_s", "MB/s", "user/rt", "sys/rt", ("p50_vs_" + baseline).c_str());
    for (const auto& r : rows) {
        if (!r.ok) {
            std::fprintf(out, "%-20s %8zu FAILED (see the messages above)\n", r.mode.c_str(), r.size);
            continue;
        }
        const Summary* base = nullptr;
        for (const auto& b : rows)
            if (b.ok && b.mode == baseline && b.size == r.size) base = &b;
        char ratio[32] = "n/a";
        if (base && r.p50_us > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", base->p50_us / r.p50_us);
        std::fprintf(out, "%-20s %8zu %8zu %10.3f %10.3f %10.3f %11.0f %10.1f %9.3f %9.3f %10s\n", r.mode.c_str(),
                     r.size, r.iters, r.p50_us, r.p99_us, r.p999_us, r.rt_per_s, r.mb_per_s, r.cpu_user_us_per_rt,
                     r.cpu_sys_us_per_rt, ratio);
    }
    std::fflush(out);
}

inline const char* csv_header() {
    return "mode,size,iters,p50_us,p99_us,p999_us,rt_per_s,mb_per_s,cpu_user_us_per_rt,cpu_sys_us_per_rt,"
           "cpu_us_per_rt\n";
}

inline std::string csv_line(const Summary& r) {
    char b[512];
    std::snprintf(b, sizeof b, "%s,%zu,%zu,%.4f,%.4f,%.4f,%.1f,%.3f,%.4f,%.4f,%.4f\n", r.mode.c_str(), r.size, r.iters,
                  r.p50_us, r.p99_us, r.p999_us, r.rt_per_s, r.mb_per_s, r.cpu_user_us_per_rt, r.cpu_sys_us_per_rt,
                  r.cpu_us_per_rt());
    return b;
}

// Parses csv_line() output; false when the line is not one.
inline bool parse_csv_line(const std::string& line, Summary& s) {
    std::istringstream in(line);
    std::string f;
    std::vector<std::string> v;
    while (std::getline(in, f, ',')) v.push_back(f);
    if (v.size() < 11) return false;
    try {
        s.mode = v[0];
        s.size = std::stoul(v[1]);
        s.iters = std::stoul(v[2]);
        s.p50_us = std::stod(v[3]);
        s.p99_us = std::stod(v[4]);
        s.p999_us = std::stod(v[5]);
        s.rt_per_s = std::stod(v[6]);
        s.mb_per_s = std::stod(v[7]);
        s.cpu_user_us_per_rt = std::stod(v[8]);
        s.cpu_sys_us_per_rt = std::stod(v[9]);
    } catch (...) {
        return false;
    }
    return true;
}

// Failed rows are left out: the CSV holds measurements only.
inline void write_csv(const std::vector<Summary>& rows, const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "pingpong: cannot write %s\n", path.c_str());
        return;
    }
    std::fputs(csv_header(), f);
    for (const auto& r : rows)
        if (r.ok) std::fputs(csv_line(r).c_str(), f);
    std::fclose(f);
}

}  // namespace rdmasock::bench
