#include "spin_clock.hpp"

#include <sys/prctl.h>
#include <time.h>

#include <mutex>

namespace rdmasock::wait::spin_clock_detail {

std::atomic<uint64_t> mult{0};
uint64_t base_tsc = 0;
int64_t base_us = 0;

namespace {

constexpr int64_t kCalibrateUs = 10000;  // the span measured: 10 ms gives the rate to ~1e-4
// Plausible counter rates, ticks per microsecond (50 MHz .. 20 GHz); outside them, CLOCK_MONOTONIC.
// The span must be this many times the readings' uncertainty: the rate is good to 0.5%.
constexpr uint64_t kSpanPerWidth = 200;
constexpr double kMinTicksPerUs = 50, kMaxTicksPerUs = 20000;

std::mutex g_mu;
bool g_done = false;  // calibrated, or refused for good
std::atomic<bool> g_refused{false};
bool g_sampled = false;

int64_t monotonic_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000ll + ts.tv_nsec / 1000;
}

#ifdef RDMASOCK_HAVE_TSC
// A process may have made RDTSC fault (prctl PR_SET_TSC, PR_TSC_SIGSEGV): never execute it then.
bool tsc_allowed() {
    int mode = 0;
    return prctl(PR_GET_TSC, &mode, 0, 0, 0) == 0 && mode == PR_TSC_ENABLE;
}

// One reading of both clocks, and how many ticks it took (the reading's uncertainty).
struct Pair {
    uint64_t tsc;
    int64_t us;
    uint64_t width;
};
Pair g_first{};

Pair read_pair() {
    const uint64_t t1 = __rdtsc();
    const int64_t us = monotonic_us();
    const uint64_t t2 = __rdtsc();
    return {t1 + (t2 - t1) / 2, us, t2 - t1};
}

void refuse() {
    g_done = true;
    g_refused.store(true, std::memory_order_relaxed);
}

void calibrate_locked(int64_t now) {
    if (!g_sampled) {
        if (!tsc_allowed()) return refuse();
        g_first = read_pair();
        g_sampled = true;
        return;
    }
    if (now - g_first.us < kCalibrateUs) return;
    const Pair last = read_pair();
    if (last.tsc <= g_first.tsc) return refuse();
    const uint64_t span = last.tsc - g_first.tsc;
    if ((g_first.width + last.width) * kSpanPerWidth > span) {
        // The readings are too uncertain for this span (one was preempted, or a
        // clock read is slow here): wait longer, from the tighter of the two.
        if (last.width < g_first.width) g_first = last;
        return;
    }
    g_done = true;
    const double ticks_per_us = static_cast<double>(span) / static_cast<double>(last.us - g_first.us);
    if (!(ticks_per_us >= kMinTicksPerUs && ticks_per_us <= kMaxTicksPerUs)) return refuse();
    base_tsc = last.tsc;
    base_us = last.us;
    mult.store(static_cast<uint64_t>(4294967296.0 / ticks_per_us), std::memory_order_release);
}
#endif

}  // namespace

int64_t slow_now_us() {
    const int64_t now = monotonic_us();
#ifdef RDMASOCK_HAVE_TSC
    if (!g_refused.load(std::memory_order_relaxed)) {
        std::unique_lock<std::mutex> lk(g_mu, std::try_to_lock);  // another thread calibrating: skip this look
        if (lk.owns_lock() && !g_done) calibrate_locked(now);
    }
#endif
    return now;
}

}  // namespace rdmasock::wait::spin_clock_detail

namespace rdmasock::wait {

const char* spin_clock_source() {
    if (spin_clock_detail::mult.load(std::memory_order_acquire)) return "tsc";
    return spin_clock_detail::g_refused.load(std::memory_order_relaxed) ? "monotonic" : "calibrating";
}

}  // namespace rdmasock::wait
