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

#include "errno_keep.hpp"
#include "epoll_sets.hpp"
#include "fd_life.hpp"
#include "real_calls.hpp"
#include "shim_state.hpp"
#include "thread_cancel.hpp"

using namespace rdmasock;
using namespace rdmasock::shim;
using rdmasock::real::calls;

namespace {

// close_range/closefrom: every tracked socket in the range.
void forget_range(unsigned first, unsigned last) {
    if (first > last) return;
    if (in_vfork_child()) return vfork_child_closing(first, last);
    cancel::Shield shield;  // as forget_fd's
    for (int fd : fd_table().present_in(first, last)) forget_fd(fd);
    epoll_forget_sets_in(first, last);
}

}  // namespace

extern "C" {

int close(int fd) {
    shim::ErrnoKept kept;
    if (!in_vfork_child()) {
        cancel::point_at_entry();  // a pending pthread_cancel: nothing is closed (libc's close acts there too)
        forget_fd(fd);
    }
    return kept(calls().close(fd));
}

int dup(int fd) { return track_dup(fd, calls().dup(fd)); }

int dup2(int oldfd, int newfd) {
    shim::ErrnoKept kept;
    if (in_vfork_child()) vfork_child_dup(oldfd);
    before_replace(oldfd, newfd);
    return kept(track_dup(oldfd, calls().dup2(oldfd, newfd)));
}

int dup3(int oldfd, int newfd, int flags) {
    shim::ErrnoKept kept;
    if (in_vfork_child()) vfork_child_dup(oldfd);
    before_replace(oldfd, newfd);
    return kept(track_dup(oldfd, calls().dup3(oldfd, newfd, flags)));
}

int close_range(unsigned first, unsigned last, int flags) {
    shim::ErrnoKept kept;
    // CLOSE_RANGE_CLOEXEC only marks the fds; unknown flags fail with EINVAL.
    if (!(flags & ~(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC)) && !(flags & CLOSE_RANGE_CLOEXEC)) forget_range(first, last);
    if (calls().close_range) return kept(calls().close_range(first, last, flags));
    return kept(static_cast<int>(syscall(SYS_close_range, first, last, flags)));
}

void closefrom(int lowfd) {
    if (lowfd >= 0) forget_range(static_cast<unsigned>(lowfd), UINT_MAX);
    if (calls().closefrom) return calls().closefrom(lowfd);
    syscall(SYS_close_range, lowfd, UINT_MAX, 0);
}

// glibc's fclose closes the fd through an internal call this library never
// sees: forget the socket here, before its number can be reused.
int fclose(FILE* fp) {
    shim::ErrnoKept kept;
    if (fp) {
        int saved = errno;
        int fd = fileno(fp);
        errno = saved;
        if (fd >= 0 && fd_table().contains(fd) && !in_vfork_child()) forget_fd(fd);
    }
    return kept(calls().fclose(fp));
}

}  // extern "C"
