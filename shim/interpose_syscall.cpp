// libc's syscall(). libuv (Node.js and every program built on it) closes its
// sockets with syscall(SYS_close, fd), not close(): a close the shim never saw
// left the number in its fd table, and the next file or socket the kernel gave
// that number had its reads and writes carried by the dead connection (a file
// write answered EPIPE). The calls that end or replace an fd number, and the
// data calls (which must not pass an upgraded connection's ring), go to the
// interposers of their libc names when the shim has a part in them; every
// other call goes to the kernel as is. The shim's own raw calls never come
// here (raw_syscall.hpp).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdarg>

#include "epoll_sets.hpp"
#include "fd_table.hpp"
#include "sys/netns.hpp"
#include "sys/own_fd.hpp"
#include "sys/raw_syscall.hpp"
#include "shim_state.hpp"
#include "sys/thread_cancel.hpp"

#if defined(__x86_64__)

extern "C" int close_range(unsigned first, unsigned last, int flags);

namespace {

template <class T>
T* ptr(long v) { return reinterpret_cast<T*>(v); }

// The libc name of system call `n` (one shim_has_part lists), with the
// kernel's arguments.
long through_interposer(long n, const long* a) {
    const int fd = static_cast<int>(a[0]);
    const auto size = static_cast<size_t>(a[2]);
    switch (n) {
        case SYS_close: return close(fd);
        case SYS_close_range: return close_range(static_cast<unsigned>(a[0]), static_cast<unsigned>(a[1]), static_cast<int>(a[2]));
        case SYS_dup: return dup(fd);
        case SYS_dup2: return dup2(fd, static_cast<int>(a[1]));
        case SYS_dup3: return dup3(fd, static_cast<int>(a[1]), static_cast<int>(a[2]));
        case SYS_fcntl: return fcntl(fd, static_cast<int>(a[1]), a[2]);
        case SYS_read: return read(fd, ptr<void>(a[1]), size);
        case SYS_write: return write(fd, ptr<const void>(a[1]), size);
        case SYS_readv: return readv(fd, ptr<const iovec>(a[1]), static_cast<int>(a[2]));
        case SYS_writev: return writev(fd, ptr<const iovec>(a[1]), static_cast<int>(a[2]));
        case SYS_recvfrom:
            return recvfrom(fd, ptr<void>(a[1]), size, static_cast<int>(a[3]), ptr<sockaddr>(a[4]), ptr<socklen_t>(a[5]));
        case SYS_sendto:
            return sendto(fd, ptr<const void>(a[1]), size, static_cast<int>(a[3]), ptr<const sockaddr>(a[4]),
                          static_cast<socklen_t>(a[5]));
        case SYS_recvmsg: return recvmsg(fd, ptr<msghdr>(a[1]), static_cast<int>(a[2]));
        case SYS_sendmsg: return sendmsg(fd, ptr<const msghdr>(a[1]), static_cast<int>(a[2]));
        default: return shutdown(fd, static_cast<int>(a[1]));  // SYS_shutdown
    }
}

// Whether call `n` goes to an interposer: one of the calls above, on the
// shim's fds (a tracked socket, one of its own, an epoll set's). Without
// allocating, and without touching the shim's state when it has none:
// malloc's own start-up makes such calls.
bool shim_has_part(long n, const long* a) {
    auto known = [](long v) {
        const int fd = static_cast<int>(v);
        return rdmasock::fd_in_table_quietly(fd) || rdmasock::is_own_fd(fd);
    };
    switch (n) {
        case SYS_close: return known(a[0]) || rdmasock::shim::epoll_any();
        case SYS_close_range: return rdmasock::fd_table_built() || rdmasock::shim::epoll_any();  // a range
        case SYS_dup2:
        case SYS_dup3: return known(a[0]) || known(a[1]) || rdmasock::shim::epoll_any();
        case SYS_dup:
        case SYS_fcntl:
        case SYS_read:
        case SYS_write:
        case SYS_readv:
        case SYS_writev:
        case SYS_recvfrom:
        case SYS_sendto:
        case SYS_recvmsg:
        case SYS_sendmsg:
        case SYS_shutdown: return known(a[0]);
        default: return false;
    }
}

}  // namespace

extern "C" {

long syscall(long n, ...) noexcept {
    va_list ap;
    va_start(ap, n);
    // As libc's own syscall(): six argument registers, whatever the call uses.
    long a[6];
    for (long& x : a) x = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_io_uring_setup) rdmasock::shim::io_uring_requested();  // before the ring exists
    if (shim_has_part(n, a)) {
        // A raw system call is not a cancellation point (libc's wrappers are): a
        // pending pthread_cancel must not act inside the interposer it reaches.
        rdmasock::cancel::Shield shield;
        return through_interposer(n, a);
    }
    const long r = rdmasock::raw_syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (n == SYS_setns || n == SYS_unshare) rdmasock::netns::thread_moved();  // as interpose_netns.cpp
    return r;
}

}  // extern "C"

#endif
