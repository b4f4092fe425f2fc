// Interposers that close, duplicate or replace fds. Each keeps the fd table in
// step (shim/fd_life.*) and then makes the real call; a vfork child, which runs
// in our memory, only makes the real call.
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sys/raw_syscall.hpp"
#include "errno_keep.hpp"
#include "epoll_sets.hpp"
#include "fd_life.hpp"
#include "base/log.hpp"
#include "sys/own_fd.hpp"
#include "real_calls.hpp"
#include "shim_state.hpp"
#include "sys/signal_seen.hpp"
#include "sys/thread_cancel.hpp"

using namespace rdmasock;
using namespace rdmasock::shim;
using rdmasock::real::calls;

namespace {

// RDMASOCK_FAULT=close-pause, read once from the environment: a close may come
// before the shim's constructor (config() would build the configuration from
// inside it), and no system call may be added to every close (a seccomp filter
// may refuse it).
bool close_pause() {
    static const bool on = [] {
        const char* v = getenv("RDMASOCK_FAULT");
        return v && strcmp(v, "close-pause") == 0;
    }();
    return on;
}

// close_range/closefrom: every tracked socket in the range, each marked closing
// until the kernel's call returned (closed_all; FdTable::take says why).
std::vector<int> forget_range(unsigned first, unsigned last) {
    if (first > last) return {};
    if (in_vfork_child()) {
        vfork_child_closing(first, last);
        return {};
    }
    cancel::Shield shield;  // as forget_fd's
    std::vector<int> fds = fd_table().present_in(first, last);
    for (int fd : fds) forget_fd(fd, true);
    epoll_forget_sets_in(first, last);
    return fds;
}

void closed_all(const std::vector<int>& fds) {
    for (int fd : fds) fd_table().closed(fd);
}

// The shim's own fds (common/own_fd.hpp) are numbers the program never opened:
// closing one is EBADF, a range passes over them, and a dup2 onto one is
// refused rather than let the shim's wake-ups land in the program's file.
int not_opened() {
    errno = EBADF;
    return -1;
}

int own_target(int newfd) {
    RS_LOG(warn, "dup2/dup3 onto fd %d refused (EBUSY): the number is one of this library's own fds", newfd);
    errno = EBUSY;
    return -1;
}

// Calls `close_span(a, b)` for each stretch of [first, last] between the own
// fds `own` (own_fds_in(first, last)).
template <class CloseSpan>
int around_own_fds(unsigned first, unsigned last, const std::vector<int>& own, CloseSpan close_span) {
    int rc = 0;
    for (int fd : own) {
        const auto o = static_cast<unsigned>(fd);
        if (o > first && close_span(first, o - 1) != 0) rc = -1;
        first = o + 1;
        if (o == UINT_MAX) return rc;
    }
    if (first <= last && close_span(first, last) != 0) rc = -1;
    return rc;
}

int real_close_range(unsigned first, unsigned last, int flags) {
    if (calls().close_range) return calls().close_range(first, last, flags);
    return static_cast<int>(raw_syscall(SYS_close_range, first, last, flags));
}

}  // namespace

extern "C" {

int close(int fd) {
    signals::HandlersAtReturn at_return;  // a handler held back by the connection's last close runs after the kernel's
    shim::ErrnoKept kept;
    if (!in_vfork_child()) {
        cancel::point_at_entry();  // a pending pthread_cancel: nothing is closed (libc's close acts there too)
        if (is_own_fd(fd)) return not_opened();
        signals::DeferHandlers held;  // a handler that closes too would wait for the locks this close holds
        if (fd >= 0) closing_kept(static_cast<unsigned>(fd), static_cast<unsigned>(fd));
        forget_fd(fd, true);
        // Test-only: widen the window between the socket's forgetting and the
        // kernel's close, where another thread's send once reached the kernel
        // socket behind the ring (tests/integration/two_writers.sh).
        if (close_pause()) usleep(100 * 1000);
        const int r = calls().close(fd);
        fd_table().closed(fd);
        return kept(r);
    }
    return kept(calls().close(fd));
}

int dup(int fd) { return track_dup(fd, shim::again_if_table_full([&] { return calls().dup(fd); })); }

int dup2(int oldfd, int newfd) {
    shim::ErrnoKept kept;
    if (in_vfork_child()) vfork_child_dup(oldfd);  // (its fd table is its own: our numbers are not at stake)
    else if (is_own_fd(newfd)) return own_target(newfd);
    before_replace(oldfd, newfd);
    const int r = calls().dup2(oldfd, newfd);
    if (!in_vfork_child()) fd_table().closed(newfd);  // (a vfork child's table is its parent's)
    return kept(track_dup(oldfd, r));
}

int dup3(int oldfd, int newfd, int flags) {
    shim::ErrnoKept kept;
    if (in_vfork_child()) vfork_child_dup(oldfd);
    else if (is_own_fd(newfd)) return own_target(newfd);
    before_replace(oldfd, newfd);
    const int r = calls().dup3(oldfd, newfd, flags);
    if (!in_vfork_child()) fd_table().closed(newfd);  // (a vfork child's table is its parent's)
    return kept(track_dup(oldfd, r));
}

int close_range(unsigned first, unsigned last, int flags) {
    shim::ErrnoKept kept;
    // CLOSE_RANGE_CLOEXEC only marks the fds; unknown flags fail with EINVAL.
    if (flags & ~(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) || first > last) return kept(real_close_range(first, last, flags));
    if (!(flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE))) closing_kept(first, last);
    const std::vector<int> forgotten = !(flags & CLOSE_RANGE_CLOEXEC) ? forget_range(first, last) : std::vector<int>{};
    if (in_vfork_child()) return kept(real_close_range(first, last, flags));
    // (With CLOSE_RANGE_UNSHARE the first stretch unshares the table, the others close in it.)
    const int r = around_own_fds(first, last, own_fds_in(first, last),
                                 [flags](unsigned a, unsigned b) { return real_close_range(a, b, flags); });
    closed_all(forgotten);
    return kept(r);
}

void closefrom(int lowfd) {
    const auto first = static_cast<unsigned>(lowfd);
    if (lowfd >= 0) closing_kept(first, UINT_MAX);
    const std::vector<int> forgotten = lowfd >= 0 ? forget_range(first, UINT_MAX) : std::vector<int>{};
    const std::vector<int> own = lowfd >= 0 && !in_vfork_child() ? own_fds_in(first, UINT_MAX) : std::vector<int>{};
    const int saved = errno;  // closefrom returns nothing and keeps errno
    if (own.empty()) {
        if (calls().closefrom) calls().closefrom(lowfd);
        else raw_syscall(SYS_close_range, lowfd, UINT_MAX, 0);
    } else {
        around_own_fds(first, UINT_MAX, own, [](unsigned a, unsigned b) { return real_close_range(a, b, 0); });
    }
    closed_all(forgotten);
    errno = saved;
}

// glibc's fclose closes the fd through an internal call this library never
// sees: forget the socket here, before its number can be reused.
int fclose(FILE* fp) {
    shim::ErrnoKept kept;
    if (fp) {
        int saved = errno;
        int fd = fileno(fp);
        errno = saved;
        if (fd >= 0 && fd_table().contains(fd) && !in_vfork_child()) {
            forget_fd(fd, true);
            const int r = calls().fclose(fp);
            fd_table().closed(fd);
            return kept(r);
        }
    }
    return kept(calls().fclose(fp));
}

}  // extern "C"
