// epoll interposers: thin wrappers over the emulation in epoll_sets.cpp.
#include <algorithm>
#include <cerrno>
#include <climits>

#include "errno_keep.hpp"
#include "epoll_sets.hpp"
#include "fd_life.hpp"
#include "sys/signal_seen.hpp"
#include "real_calls.hpp"

extern "C" {

// Every epoll fd the program makes is noted: a set it later registers in
// another one is exposed by the outer one's waits (epoll_sets.hpp).
int epoll_create(int size) {
    int fd = rdmasock::real::calls().epoll_create(size);
    rdmasock::shim::forget_stale_fd(fd);
    if (fd >= 0) rdmasock::shim::epoll_created(fd);
    return fd;
}

int epoll_create1(int flags) {
    int fd = rdmasock::real::calls().epoll_create1(flags);
    rdmasock::shim::forget_stale_fd(fd);
    if (fd >= 0) rdmasock::shim::epoll_created(fd);
    return fd;
}

int epoll_ctl(int epfd, int op, int fd, epoll_event* ev) {
    rdmasock::signals::DeferHandlers held;  // a handler's close waits for no lock this call holds
    rdmasock::shim::ErrnoKept kept;
    return kept(rdmasock::shim::epoll_ctl_impl(epfd, op, fd, ev));
}

int epoll_wait(int epfd, epoll_event* events, int max, int timeout) {
    rdmasock::shim::ErrnoKept kept;
    return kept(rdmasock::shim::epoll_wait_impl(epfd, events, max, timeout, nullptr));
}

int epoll_pwait(int epfd, epoll_event* events, int max, int timeout, const sigset_t* mask) {
    rdmasock::shim::ErrnoKept kept;
    return kept(rdmasock::shim::epoll_wait_impl(epfd, events, max, timeout, mask));
}

// Sets without shimmed sockets keep the kernel's nanosecond timeout. Emulated
// sets wait in whole milliseconds, rounded up so a wait never ends early.
int epoll_pwait2(int epfd, epoll_event* events, int max, const timespec* ts, const sigset_t* mask) {
    rdmasock::shim::ErrnoKept kept;
    const auto& real = rdmasock::real::calls();
    if (!rdmasock::shim::epoll_emulated(epfd)) {
        if (!real.epoll_pwait2) {
            errno = ENOSYS;
            return -1;
        }
        return kept(real.epoll_pwait2(epfd, events, max, ts, mask));
    }
    if (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L)) {
        errno = EINVAL;
        return -1;
    }
    int ms = -1;
    if (ts) {
        long long whole = (static_cast<long long>(ts->tv_nsec) + 999999) / 1000000;
        ms = ts->tv_sec >= INT_MAX / 1000 ? INT_MAX : static_cast<int>(std::min<long long>(ts->tv_sec * 1000LL + whole, INT_MAX));
    }
    return kept(rdmasock::shim::epoll_wait_impl(epfd, events, max, ms, mask));
}

}  // extern "C"
