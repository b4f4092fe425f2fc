#include "sys/fork_fence.hpp"

#include <linux/futex.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "base/log.hpp"
#include "sys/kernel_calls.hpp"

namespace rdmasock::fork_fence {

namespace {

// Outermost sections under way in this process. The futex word the prepare
// handler sleeps on.
std::atomic<uint32_t> g_inside{0};
// Forks between their prepare and after handlers (two threads may fork at once).
// The futex word sections wait on.
std::atomic<uint32_t> g_forking{0};
std::atomic<unsigned> g_bounds{0};
// Constant-initialized: a section may be the thread's first shim code, in a
// signal handler.
thread_local unsigned t_depth __attribute__((tls_model("initial-exec"))) = 0;
thread_local bool t_forking __attribute__((tls_model("initial-exec"))) = false;
thread_local bool t_counted __attribute__((tls_model("initial-exec"))) = false;  // an outer section counted

constexpr long kPrepareWaitNs = 200'000'000;   // a section is a few syscalls
constexpr long kSectionWaitNs = 2'000'000'000; // a fork copies the page tables

int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Sleeps while *word == seen, until `deadline`; false once it has passed.
bool wait_while(std::atomic<uint32_t>& word, uint32_t seen, int64_t deadline) {
    const int64_t left = deadline - now_ns();
    if (left <= 0) return false;
    timespec ts{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    const int saved = errno;
    kernel::futex(&word, FUTEX_WAIT_PRIVATE, seen, &ts);
    errno = saved;
    return true;
}

void wake_all(std::atomic<uint32_t>& word) { kernel::futex(&word, FUTEX_WAKE_PRIVATE, INT32_MAX); }

void bound_reached(const char* what) {
    if (g_bounds.fetch_add(1) == 0) RS_LOG(warn, "%s: went on without it (fork_fence.hpp)", what);
}

}  // namespace

Section::Section() {
    // Nested, or the forking thread's own (its after-fork hooks make fds):
    // nothing to wait for.
    if (t_depth++ > 0 || t_forking) return;
    counted_ = t_counted = true;
    int64_t deadline = 0;
    for (;;) {
        g_inside.fetch_add(1, std::memory_order_seq_cst);
        const uint32_t forking = g_forking.load(std::memory_order_seq_cst);
        if (forking == 0) return;
        // A fork is under way: let its prepare handler go on, wait for its end.
        if (g_inside.fetch_sub(1, std::memory_order_seq_cst) == 1) wake_all(g_inside);
        if (deadline == 0) deadline = now_ns() + kSectionWaitNs;
        if (!wait_while(g_forking, forking, deadline)) {
            bound_reached("a new fd waited two seconds for a fork to finish");
            g_inside.fetch_add(1, std::memory_order_seq_cst);
            return;
        }
    }
}

Section::~Section() {
    --t_depth;
    if (!counted_) return;
    t_counted = false;
    if (g_inside.fetch_sub(1, std::memory_order_seq_cst) == 1 && g_forking.load(std::memory_order_seq_cst) != 0)
        wake_all(g_inside);
}

void before_fork() {
    g_forking.fetch_add(1, std::memory_order_seq_cst);
    // A fork from inside a section (a signal handler's): not waiting for ourselves.
    const uint32_t mine = t_counted ? 1 : 0;
    t_forking = true;
    const int64_t deadline = now_ns() + kPrepareWaitNs;
    for (uint32_t in; (in = g_inside.load(std::memory_order_seq_cst)) > mine;) {
        if (!wait_while(g_inside, in, deadline)) {
            bound_reached("a fork waited 200 ms for the shim's fds being made");
            return;
        }
    }
}

void after_fork_parent() {
    t_forking = false;
    g_forking.fetch_sub(1, std::memory_order_seq_cst);
    wake_all(g_forking);
}

void after_fork_child() {
    // Only this thread is here: the other threads' sections are nobody's.
    t_forking = false;
    g_inside.store(t_counted ? 1 : 0, std::memory_order_seq_cst);
    g_forking.store(0, std::memory_order_seq_cst);
}

unsigned bounds_reached() { return g_bounds.load(); }

}  // namespace rdmasock::fork_fence
