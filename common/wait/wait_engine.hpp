// The one wait loop of the shim (docs/waiting.md). A blocking send or recv,
// poll/select and epoll_wait differ only in what they look at; the order of
// the steps that keeps a wake-up from being lost is written here once:
//
//   check    full readiness (the rings, and the kernel with a zero timeout)
//   spin     ring-only looks, no syscalls, for the learned budget; none while
//            runnable threads outnumber the CPUs (cpu_load.hpp)
//   arm      ask each peer to ring our doorbell, and try to own its drain
//   fence    seq_cst: our "wake me" store is ordered before the re-check's loads
//   re-check the rings again: a byte that landed before the peer saw our flag
//   sleep    in the kernel, on the caller's fds and the doorbells together
//   settle   drain the doorbells we own, disarm
//
// The peer publishes its bytes, fences, then reads our flag; we store the flag,
// fence, then read its bytes: one of us sees the other (Dekker), so either the
// re-check finds the bytes or the peer rings.
//
// Signals follow the same rule: over TCP the caller would be asleep in the
// kernel for the whole wait, so a handler that runs during the spin or the
// arm ends the wait with EINTR as the kernel's sleep would (signal_seen.hpp);
// the sleep itself is entered only if none ran (interruptible_sleep.hpp).
//
// The kernel is asked once per look (Look::full), except in two places:
//  - right after a spin that found ring readiness (Look::rings): the kernel was
//    asked when this wait began (or its sleep just answered), and anything it
//    gained during the spin (at most the spin budget) raced the ring's bytes,
//    where TCP would report whichever came first. A poll or epoll_wait that spun
//    to its answer makes one system call, not two (libvma's io_mux_call skips
//    the OS the same way);
//  - the first look of a wait that will not spin and may sleep
//    (Look::rings_first): the rings alone when they have nothing, since the
//    sleep that follows is the kernel's look (with the timeout); when they have
//    something, the kernel too, or the caller's other fds would starve behind
//    a busy ring. Under load (no spin) a wait that sleeps then makes one system
//    call where it made two. A wait that then may not sleep (progress in
//    flight) looks in full before it watches the rings.
//
// A caller supplies Hooks (libvma's io_mux_call has the same shape):
//   int      check(Look look);          >0 ready (count), 0 not yet, <0 error with errno;
//                                       what it looks at: Look, below
//   bool     peek();                    ring-only readiness, no syscalls
//   uint32_t spin_budget_us();
//   Armed    arm();                     request doorbells, try to own their drains, cap the sleep
//   bool     changed();                 after the fence: anything ready, or a phase moved
//   int      sleep(int64_t timeout_us, const signals::Seen& since);
//                                       the kernel wait (-1: none) through interruptible_sleep.hpp
//   void     settle(int rc, bool slept);drain what we own, disarm (always after arm)
//   void     learn(int64_t waited_us, bool timed_out);
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>

#include "wait/cpu_load.hpp"
#include "sys/signal_seen.hpp"
#include "wait/idle_pass.hpp"

namespace rdmasock::wait {

inline int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

inline void cpu_relax() { __builtin_ia32_pause(); }

// A sleep limit in µs (-1: none) lowered to at most `us`.
inline int64_t capped(int64_t limit_us, int64_t us) { return limit_us < 0 ? us : std::min(limit_us, us); }

struct Armed {
    bool may_sleep = true;  // false: a transport saw progress in flight (RDMA), re-check instead
    bool all_owned = true;  // false: another thread drains some doorbell, so sleep in short naps
    int64_t max_sleep_us = -1;  // >= 0: something no doorbell reports must be looked at by then
    void cap(int64_t us) { max_sleep_us = capped(max_sleep_us, us); }
};

// While another thread owns a doorbell's drain it may swallow the ring meant
// for us between its re-check and its sleep: we then sleep at most this long.
constexpr int64_t kNapUs = 1000;
// After "progress in flight" (the bytes are posted, not landed), watching the
// ring is cheaper than arming again (an RDMA arm costs a round trip).
constexpr int64_t kInFlightSpinUs = 50;
// Ring looks between two sched_yield()s while spinning: the peer may be queued
// on our CPU (docs/waiting.md).
constexpr int kPeeksPerYield = 32;

// What one check() looks at (the kernel rules above).
enum class Look : uint8_t {
    full,         // the rings and the kernel (a zero timeout)
    rings,        // the rings alone
    rings_first,  // the rings; the kernel too only if they have something
};

enum class Spun { ready, expired, signalled };

// Spins on peek() until it turns true, `until` passes, or a signal handler
// runs on this thread (since `since`).
template <class Hooks>
Spun spin_until(Hooks& h, int64_t until, bool yield, const signals::Seen& since) {
    do {
        for (int i = 0; i < kPeeksPerYield; ++i) {
            if (h.peek()) return Spun::ready;
            cpu_relax();
        }
        if (signals::since(since)) return Spun::signalled;
        if (yield) sched_yield();
    } while (now_us() < until);
    return signals::since(since) ? Spun::signalled : Spun::expired;
}

inline int interrupted() {
    errno = EINTR;
    return -1;
}

// Waits until check() reports readiness, the timeout passes (returns 0), a
// signal handler runs on this thread after `since` (-1, EINTR; the caller
// decides whether its call restarts), or the kernel wait fails (-1 with its
// errno). timeout_us < 0 waits forever, 0 only checks.
//
// The clock is read only for what needs it (a deadline, a spin, a policy that
// learns how long waits last): under some hypervisors every read is a system
// call, several per round trip.
template <class Hooks>
int run(Hooks& h, int64_t timeout_us, const signals::Seen& since) {
    uint32_t budget = h.spin_budget_us();
    // Never spin on a CPU another runnable thread needs (cpu_load.hpp).
    if (budget > 0 && timeout_us != 0 && cpu_load::oversubscribed()) {
        budget = 0;
        cpu_load::note_spin_skipped();
    }
    const bool learns = timeout_us != 0 && h.learns();
    const int64_t start = timeout_us > 0 || budget > 0 || learns ? now_us() : 0;
    const int64_t spin_end = start + budget;
    bool first = true;  // the spin's first look needs no clock: start was just read
    bool spun_ready = false;
    // The sleep that follows a first look that finds nothing asks the kernel itself.
    const bool sleeps_next = budget == 0 && timeout_us != 0;
    for (;;) {
        const Look look = spun_ready ? Look::rings : first && sleeps_next ? Look::rings_first : Look::full;
        int n = h.check(look);
        spun_ready = false;
        if (n < 0) return n;
        if (n > 0 || timeout_us == 0) {
            if (n > 0 && learns) h.learn(now_us() - start, false);
            return n;
        }
        int64_t left = -1;
        if (timeout_us > 0) {
            left = timeout_us - (now_us() - start);
            if (left <= 0) {
                h.learn(now_us() - start, true);
                return 0;
            }
        }
        const bool spin = budget > 0 && (first || now_us() < spin_end);
        first = false;
        if (spin) {
            const Spun r = spin_until(h, spin_end, true, since);
            if (r == Spun::ready) {
                spun_ready = true;
                continue;
            }
            if (r == Spun::signalled) return interrupted();
        }

        Armed a = h.arm();
        std::atomic_thread_fence(std::memory_order_seq_cst);
        const bool sleep_now = a.may_sleep && !h.changed();
        int rc = 0;
        if (sleep_now) {
            int64_t nap = left;
            if (!a.all_owned) nap = capped(nap, kNapUs);
            if (a.max_sleep_us >= 0) nap = capped(nap, a.max_sleep_us);
            if (idle_pass::pending()) nap = capped(nap, idle_pass::kEveryUs);  // work for a quiet moment
            rc = h.sleep(nap, since);
        }
        const int saved = errno;
        h.settle(rc, sleep_now);
        if (sleep_now && idle_pass::pending()) idle_pass::run_if_due();
        if (rc < 0) {
            errno = saved;
            return -1;
        }
        // Nothing slept, so nothing asked the kernel since a rings_first look:
        // the next look (full) goes first, or a ready plain fd would wait out
        // the in-flight watch of the rings.
        if (!a.may_sleep && look != Look::rings_first &&
            spin_until(h, now_us() + kInFlightSpinUs, false, since) == Spun::signalled)
            return interrupted();
    }
}

}  // namespace rdmasock::wait
