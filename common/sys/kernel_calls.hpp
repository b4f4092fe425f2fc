// The one table of kernel calls for the shim's own work. Inside librdmasock.so
// a plain `::write` or `::shutdown` binds to the shim's own interposer: a
// doorbell ring or a side-channel message would then be taken for the
// application's I/O, find a Connection, take its locks again... Every call
// the shim makes for itself goes to the kernel here instead, with libc's
// convention (-1 and errno). No lookup, no lock: async-signal- and vfork-safe.
// (The application's own calls go to libc's functions through shim/real_calls.hpp.)
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>

#include "sys/raw_syscall.hpp"

namespace rdmasock::kernel {

inline int socket(int domain, int type, int proto) { return static_cast<int>(raw_syscall(SYS_socket, domain, type, proto)); }
inline int bind(int fd, const sockaddr* a, socklen_t l) { return static_cast<int>(raw_syscall(SYS_bind, fd, a, l)); }
inline int listen(int fd, int backlog) { return static_cast<int>(raw_syscall(SYS_listen, fd, backlog)); }
inline int connect(int fd, const sockaddr* a, socklen_t l) { return static_cast<int>(raw_syscall(SYS_connect, fd, a, l)); }
inline int accept4(int fd, sockaddr* a, socklen_t* l, int flags) {
    return static_cast<int>(raw_syscall(SYS_accept4, fd, a, l, flags));
}
inline int getsockname(int fd, sockaddr* a, socklen_t* l) { return static_cast<int>(raw_syscall(SYS_getsockname, fd, a, l)); }
inline int getpeername(int fd, sockaddr* a, socklen_t* l) { return static_cast<int>(raw_syscall(SYS_getpeername, fd, a, l)); }
inline int setsockopt(int fd, int level, int opt, const void* v, socklen_t l) {
    return static_cast<int>(raw_syscall(SYS_setsockopt, fd, level, opt, v, l));
}
inline int getsockopt(int fd, int level, int opt, void* v, socklen_t* l) {
    return static_cast<int>(raw_syscall(SYS_getsockopt, fd, level, opt, v, l));
}
inline ssize_t sendmsg(int fd, const msghdr* m, int flags) { return raw_syscall(SYS_sendmsg, fd, m, flags); }
inline ssize_t recvmsg(int fd, msghdr* m, int flags) { return raw_syscall(SYS_recvmsg, fd, m, flags); }
inline ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* a, socklen_t l) {
    return raw_syscall(SYS_sendto, fd, buf, n, flags, a, l);
}
inline ssize_t recv(int fd, void* buf, size_t n, int flags) {
    return raw_syscall(SYS_recvfrom, fd, buf, n, flags, nullptr, nullptr);
}
inline ssize_t read(int fd, void* buf, size_t n) { return raw_syscall(SYS_read, fd, buf, n); }
// A send that never sleeps and never raises SIGPIPE, whatever the file's flags
// (a doorbell socket the peer shares and may have made blocking, or shut).
inline ssize_t send_nowait(int fd, const void* buf, size_t n) {
    return raw_syscall(SYS_sendto, fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL, nullptr, 0);
}
inline int socketpair(int domain, int type, int proto, int sv[2]) {
    return static_cast<int>(raw_syscall(SYS_socketpair, domain, type, proto, sv));
}
inline int dup3(int fd, int newfd, int flags) { return static_cast<int>(raw_syscall(SYS_dup3, fd, newfd, flags)); }
inline ssize_t write(int fd, const void* buf, size_t n) { return raw_syscall(SYS_write, fd, buf, n); }
// A read that never sleeps, whatever the file's O_NONBLOCK says (RWF_NOWAIT): for
// files whose description a peer process shares and could make blocking.
inline ssize_t read_nowait(int fd, void* buf, size_t n) {
    iovec v{buf, n};
    return raw_syscall(SYS_preadv2, fd, &v, 1, -1L, -1L, RWF_NOWAIT);
}
inline int close(int fd) { return static_cast<int>(raw_syscall(SYS_close, fd)); }
inline int shutdown(int fd, int how) { return static_cast<int>(raw_syscall(SYS_shutdown, fd, how)); }
inline int eventfd(unsigned initval, int flags) { return static_cast<int>(raw_syscall(SYS_eventfd2, initval, flags)); }
inline int fcntl(int fd, int cmd, long arg = 0) { return static_cast<int>(raw_syscall(SYS_fcntl, fd, cmd, arg)); }
inline int open(const char* path, int flags) { return static_cast<int>(raw_syscall(SYS_openat, AT_FDCWD, path, flags, 0)); }
inline int ioctl(int fd, unsigned long req, void* arg) { return static_cast<int>(raw_syscall(SYS_ioctl, fd, req, arg)); }
inline ssize_t readlink(const char* path, char* buf, size_t n) { return raw_syscall(SYS_readlinkat, AT_FDCWD, path, buf, n); }
inline int getpid() { return static_cast<int>(raw_syscall(SYS_getpid)); }
// FUTEX_WAIT_PRIVATE / FUTEX_WAKE_PRIVATE on a 32-bit word; a wait ends after
// `timeout` (relative) when one is given.
inline long futex(void* word, int op, unsigned val, const struct timespec* timeout = nullptr) {
    return raw_syscall(SYS_futex, word, op, val, timeout);
}
// Bytes waiting in a socket's receive queue (FIONREAD; for a connection, the
// peer's bytes before its switch): 0 on any error, errno kept (asked in passing,
// inside another call's answer). Raw: ioctl() is interposed, and for an
// upgraded fd it would ask the shim again.
inline size_t inq(int fd) {
    int q = 0;
    const int saved = errno;
    if (raw_syscall(SYS_ioctl, fd, FIONREAD, &q) != 0) q = 0;
    errno = saved;
    return q > 0 ? static_cast<size_t>(q) : 0;
}
inline int fstat(int fd, struct stat* st) { return static_cast<int>(raw_syscall(SYS_fstat, fd, st)); }
inline int stat(const char* path, struct stat* st) { return static_cast<int>(raw_syscall(SYS_newfstatat, AT_FDCWD, path, st, 0)); }

}  // namespace rdmasock::kernel
