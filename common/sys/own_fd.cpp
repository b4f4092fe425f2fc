#include "sys/raw_syscall.hpp"
#include "sys/own_fd.hpp"
#include "sys/fork_fence.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>

namespace rdmasock {
namespace {

// One bit per fd number below kTracked (16 KiB): the close interposers look
// here on every close, without a lock (close is async-signal-safe). A number
// above it is used but not marked (a process with over 131,072 fds).
constexpr unsigned kTracked = 1u << 17;
std::atomic<uint64_t> g_marks[kTracked / 64];
// Set while close_own_fd closes the number: from the kernel's close on, the
// number may be the program's next open, and its mark is still up.
std::atomic<uint64_t> g_closing[kTracked / 64];
std::atomic<unsigned> g_highest{0};  // bounds the scans of close_range/closefrom

bool tracked(int fd) { return fd >= 0 && static_cast<unsigned>(fd) < kTracked; }
uint64_t bit_of(int fd) { return uint64_t{1} << (fd % 64); }

std::atomic<int> g_marked{0};   // how many numbers are marked (fd_budget.hpp)

// Whether the bit changed.
bool set_bit(std::atomic<uint64_t>* bits, int fd, bool on) {
    if (!tracked(fd)) return false;
    const uint64_t was = on ? bits[fd / 64].fetch_or(bit_of(fd), std::memory_order_seq_cst)
                            : bits[fd / 64].fetch_and(~bit_of(fd), std::memory_order_seq_cst);
    return ((was & bit_of(fd)) != 0) != on;
}

void set_mark(int fd, bool on) {
    if (set_bit(g_marks, fd, on)) g_marked.fetch_add(on ? 1 : -1, std::memory_order_relaxed);
    if (!on || !tracked(fd)) return;
    unsigned h = g_highest.load(std::memory_order_relaxed);
    while (static_cast<unsigned>(fd) > h && !g_highest.compare_exchange_weak(h, static_cast<unsigned>(fd))) {}
}

// Three quarters of the soft fd limit, at most 4096: above what a program with
// ordinary needs opens, and small enough that the kernel's fd table (copied at
// every fork) stays a few pages.
int high_base_now() {
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur <= 64) return 0;
    const rlim_t q = rl.rlim_cur == RLIM_INFINITY ? 4096 : rl.rlim_cur / 4 * 3;
    return static_cast<int>(std::min<rlim_t>(q, 4096));
}

// The limit is asked once every kBaseAsks adoptions, not at each (a short
// connection adopts three or four fds): a program that changes its limit is
// seen soon, and a base above a lowered limit fails the dup (EINVAL), which
// asks again at once. -1: not asked yet.
constexpr unsigned kBaseAsks = 64;
std::atomic<int> g_base{-1};
std::atomic<unsigned> g_base_uses{0};

int high_base() {
    int b = g_base.load(std::memory_order_relaxed);
    if (b < 0 || g_base_uses.fetch_add(1, std::memory_order_relaxed) % kBaseAsks == 0)
        g_base.store(b = high_base_now(), std::memory_order_relaxed);
    return b;
}

int dup_high(int fd) {
    int base = high_base();
    int d = static_cast<int>(raw_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, base));
    if (d < 0 && errno == EINVAL && base > 0) {  // the limit fell below the kept base
        g_base.store(base = high_base_now(), std::memory_order_relaxed);
        d = static_cast<int>(raw_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, base));
    }
    if (d < 0 && base > 0) d = static_cast<int>(raw_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0));
    return d;
}

}  // namespace

int adopt_own_fd(int fd) {
    if (fd < 0) return fd;
    const int saved = errno;
    fork_fence::Section fence;  // the high number exists in every child whose memory may hold it
    int d = dup_high(fd);
    if (d >= 0 && d > fd) raw_syscall(SYS_close, fd);
    else if (d >= 0) raw_syscall(SYS_close, d), d = fd;  // no higher number free: keep it where it is
    else d = fd;
    set_mark(d, true);
    errno = saved;
    return d;
}

int dup_own_fd(int fd) {
    const int saved = errno;
    fork_fence::Section fence;
    const int d = dup_high(fd);
    set_mark(d, true);
    errno = saved;
    return d;
}

void mark_own_fd(int fd) { set_mark(fd, true); }

void unmark_own_fd(int fd) { set_mark(fd, false); }

int own_fd_count() { return g_marked.load(std::memory_order_relaxed); }

bool is_own_fd(int fd) {
    if (!tracked(fd)) return false;
    // The shim closing this number right now: the caller's may be the program's
    // new fd under it; the answer comes after that close (a system call's time;
    // bounded, should a signal handler ask in the middle of it on that thread).
    for (int i = 0; i < 10000 && (g_closing[fd / 64].load(std::memory_order_seq_cst) & bit_of(fd)); ++i) sched_yield();
    return g_marks[fd / 64].load(std::memory_order_seq_cst) & bit_of(fd);
}

std::vector<int> own_fds_in(unsigned first, unsigned last) {
    std::vector<int> out;
    last = std::min({last, g_highest.load(std::memory_order_seq_cst), kTracked - 1});
    for (unsigned fd = first; fd <= last; ++fd) {
        const uint64_t word = g_marks[fd / 64].load(std::memory_order_seq_cst);
        if (word == 0) {
            fd |= 63;  // the rest of this word
            continue;
        }
        // (is_own_fd waits out a close the shim is making of that number)
        if ((word & bit_of(static_cast<int>(fd))) && is_own_fd(static_cast<int>(fd))) out.push_back(static_cast<int>(fd));
    }
    return out;
}

void close_own_fd(int fd) {
    const int saved = errno;
    // Marked until closed (the program's close of it stays EBADF), unmarked
    // before anyone asks again (is_own_fd waits out the closing bit).
    set_bit(g_closing, fd, true);
    raw_syscall(SYS_close, fd);
    set_mark(fd, false);
    set_bit(g_closing, fd, false);
    errno = saved;
}

}  // namespace rdmasock
