// The clock of spinning: microseconds from the CPU's time-stamp counter.
//
// A spin looks at the clock to know when its budget is spent, and the learned
// spin (spin_policy.hpp) measures how long each wait lasted. clock_gettime is a
// vDSO read of ~20 ns on hardware, but a system call (and an emulated HPET read)
// in a guest whose clock source is not readable from user space, as in the
// Soft-RoCE VM; there the spin's clock reads were most of the shim's system
// calls per round trip. RDTSC is a plain instruction everywhere.
//
// Only for heuristics: a deadline that a program can observe (SO_RCVTIMEO,
// poll's timeout) is measured with wait::now_us. The counter's rate is
// calibrated against CLOCK_MONOTONIC over the process's first >= 10 ms of
// spinning (until then this reads CLOCK_MONOTONIC), from readings of both
// clocks narrow enough that the rate is good to 0.5%; an implausible rate, a CPU
// without RDTSC, or a process that made RDTSC fault (PR_SET_TSC) keeps
// CLOCK_MONOTONIC for good. Counters that drift between CPUs or with the
// frequency only blur spin lengths: callers treat a negative span as zero.
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define RDMASOCK_HAVE_TSC 1
#endif

namespace rdmasock::wait {

namespace spin_clock_detail {
// Published together: base_* first, then mult (release) once calibrated.
extern std::atomic<uint64_t> mult;  // microseconds per tick, 2^-32 fixed point; 0: not (yet) calibrated
extern uint64_t base_tsc;
extern int64_t base_us;
int64_t slow_now_us();  // CLOCK_MONOTONIC, calibrating on the way
}  // namespace spin_clock_detail

inline int64_t spin_now_us() {
#ifdef RDMASOCK_HAVE_TSC
    using namespace spin_clock_detail;
    if (const uint64_t m = mult.load(std::memory_order_acquire)) {
        const uint64_t ticks = __rdtsc() - base_tsc;  // wraps to "huge" if another CPU's counter is behind
        if (static_cast<int64_t>(ticks) >= 0)
            return base_us + static_cast<int64_t>((static_cast<unsigned __int128>(ticks) * m) >> 32);
        return base_us;
    }
#endif
    return spin_clock_detail::slow_now_us();
}

// Where spin_now_us reads now: "tsc", "monotonic" (for good) or "calibrating".
const char* spin_clock_source();

}  // namespace rdmasock::wait
