// The libc functions behind our interposers, found with dlsym(RTLD_NEXT).
#pragma once

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstdio>

#include "connection/connection.hpp"

namespace rdmasock::real {

struct Calls {
    int (*socket)(int, int, int);
    int (*connect)(int, const sockaddr*, socklen_t);
    int (*listen)(int, int);
    int (*accept)(int, sockaddr*, socklen_t*);
    int (*accept4)(int, sockaddr*, socklen_t*, int);
    int (*close)(int);
    int (*shutdown)(int, int);
    ssize_t (*read)(int, void*, size_t);
    ssize_t (*readv)(int, const iovec*, int);
    ssize_t (*recv)(int, void*, size_t, int);
    ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
    ssize_t (*recvmsg)(int, msghdr*, int);
    ssize_t (*write)(int, const void*, size_t);
    ssize_t (*writev)(int, const iovec*, int);
    ssize_t (*send)(int, const void*, size_t, int);
    ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
    ssize_t (*sendmsg)(int, const msghdr*, int);
    ssize_t (*sendfile)(int, int, off_t*, size_t);
    int (*sendmmsg)(int, mmsghdr*, unsigned, int);
    int (*recvmmsg)(int, mmsghdr*, unsigned, int, timespec*);
    int (*close_range)(unsigned, unsigned, int);
    void (*closefrom)(int);
    int (*fclose)(FILE*);
    int (*fcntl)(int, int, ...);
    int (*ioctl)(int, unsigned long, ...);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*setsockopt)(int, int, int, const void*, socklen_t);
    int (*getsockopt)(int, int, int, void*, socklen_t*);
    int (*getpeername)(int, sockaddr*, socklen_t*);
    int (*poll)(pollfd*, nfds_t, int);
    int (*ppoll)(pollfd*, nfds_t, const timespec*, const sigset_t*);
    int (*select)(int, fd_set*, fd_set*, fd_set*, timeval*);
    int (*pselect)(int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*);
    int (*epoll_create)(int);
    int (*epoll_create1)(int);
    int (*epoll_ctl)(int, int, int, epoll_event*);
    int (*epoll_wait)(int, epoll_event*, int, int);
    int (*epoll_pwait)(int, epoll_event*, int, int, const sigset_t*);
    int (*epoll_pwait2)(int, epoll_event*, int, const timespec*, const sigset_t*);
    int (*pthread_cancel)(pthread_t);
};

// Resolved on first use (constructors of other libraries may call us early).
const Calls& calls();
// The subset the connection logic needs.
const SocketOps& socket_ops();

// A function found after the shim in lookup order (libc's, or another
// library's such as liburing's), for an interposer the table above lacks.
template <class F>
F next(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace rdmasock::real
