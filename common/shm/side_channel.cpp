#include "shm/side_channel.hpp"
#include "shm/fd_reaper.hpp"
#include "sys/kernel_calls.hpp"
#include "sys/own_fd.hpp"
#include "sys/sandbox.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

namespace rdmasock::side_channel {

namespace {

socklen_t name_of(uint64_t ino, sockaddr_un& a) {
    std::memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int n = std::snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "rdmasock/v2/tcp-inode/%llu",
                          static_cast<unsigned long long>(ino));
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83  // Linux 6.16 (asm-generic/socket.h); older kernels: ENOPROTOOPT
#endif

// Before bind or connect: from its first moment on, no stranger's fd can be queued to it.
int unix_socket(bool& fds_refused, bool may_refuse) {
    fds_refused = false;
    int fd = kernel::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;  // the kernel attaches the sender's credentials to every message we receive
    kernel::setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
    fds_refused = may_refuse && allow_fds(fd, false);
    return adopt_own_fd(fd);
}

// Files whose close never waits for anyone: a memfd (only shmem and hugetlbfs
// files have seals), an eventfd, a pipe or FIFO (no flush, no linger).
bool closes_at_once(int fd) {
    struct stat st {};
    if (kernel::fstat(fd, &st) != 0) return true;  // nothing to close
    if (S_ISFIFO(st.st_mode)) return true;
    if (S_ISREG(st.st_mode)) return kernel::fcntl(fd, F_GET_SEALS) >= 0;
    char path[64], link[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = kernel::readlink(path, link, sizeof link - 1);
    return n > 0 && (link[n] = 0, std::strcmp(link, "anon_inode:[eventfd]") == 0);
}

}  // namespace

bool allow_fds(int fd, bool on) {
    int saved = errno;
    int v = on ? 1 : 0;
    bool ok = kernel::setsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &v, sizeof v) == 0;
    errno = saved;
    return ok;
}

bool peer_credentials(int fd, pid_t& pid, uid_t& uid) {
    ucred cr{};
    socklen_t l = sizeof cr;
    int saved = errno;
    bool ok = kernel::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0 && l == sizeof cr && cr.pid > 0;
    errno = saved;
    if (ok) pid = cr.pid, uid = cr.uid;
    return ok;
}

int listen_for(uint64_t ino, bool& fds_refused, bool may_refuse) {
    int saved = errno;
    int fd = unix_socket(fds_refused, may_refuse);
    sockaddr_un a;
    socklen_t len = name_of(ino, a);
    if (fd >= 0 && (kernel::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || kernel::listen(fd, 4) != 0)) {
        close_own_fd(fd);  // never listened: nothing queued
        fd = -1;
    }
    errno = saved;
    return fd;
}

int connect_to(uint64_t ino, bool& fds_refused, bool may_refuse) {
    int saved = errno;
    int fd = unix_socket(fds_refused, may_refuse);
    sockaddr_un a;
    socklen_t len = name_of(ino, a);
    // A Unix stream connect completes at once or fails (EAGAIN: backlog full).
    if (fd >= 0 && kernel::connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
        close_own_fd(fd);  // never connected: nothing queued
        fd = -1;
    }
    errno = saved;
    return fd;
}

int accept_peer(int listen_fd) {
    int saved = errno;
    int fd = kernel::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
        int one = 1;
        kernel::setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
    }
    errno = saved;
    return adopt_own_fd(fd);
}

Received receive(int fd, void* buf, size_t len, bool peek) {
    Received r;
    int saved = errno;
    iovec iov{buf, len};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int) * kKernelMaxFds)];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    r.bytes = kernel::recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | (peek ? MSG_PEEK : 0));
    if (r.bytes < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) r.error = errno;
    if (r.bytes >= 0) {
        r.truncated = mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC);
        for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level != SOL_SOCKET) continue;
            if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(ucred))) {
                ucred cr;
                std::memcpy(&cr, CMSG_DATA(c), sizeof cr);
                r.pid = cr.pid, r.uid = cr.uid;
            } else if (c->cmsg_type == SCM_RIGHTS) {
                size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < n; ++i) {
                    int f;
                    std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
                    if (r.nfds < kMaxFds) r.fds[r.nfds++] = f;
                    else discard_fd(f), r.truncated = true;
                }
            }
        }
    }
    errno = saved;
    return r;
}

bool send(int fd, const void* buf, size_t len, const int* fds, int nfds) {
    int saved = errno;
    iovec iov{const_cast<void*>(buf), len};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (nfds > 0) {
        mh.msg_control = control;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    ssize_t n = kernel::sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(len)) errno = saved;  // on failure errno says why
    return n == static_cast<ssize_t>(len);
}

void close_fds(Received& r) {
    for (int i = 0; i < r.nfds; ++i) discard_fd(r.fds[i]);
    r.nfds = 0;
}

void discard_fd(int fd) {
    if (fd < 0) return;
    int saved = errno;
    if (closes_at_once(fd)) close_own_fd(fd);
    else fd_reaper::close_later(fd);
    errno = saved;
}

void close_channel(int fd, bool may_hold_fds) {
    if (fd < 0) return;
    // Under a seccomp filter the ioctl (and the reaper's thread) may kill the
    // process, and a plain close may be the blocking last close of a queued
    // file: left open (sys/sandbox.hpp).
    if (may_hold_fds && sandbox::inside()) return;
    int saved = errno;
    int queued = 0;
    // After the shutdown no sender can queue anything (the kernel checks it under
    // the same lock it queues under), so an empty queue stays empty. A stream
    // message carrying fds carries at least one byte.
    if (may_hold_fds && (kernel::shutdown(fd, SHUT_RDWR) != 0 || kernel::ioctl(fd, SIOCINQ, &queued) != 0))
        queued = 1;  // cannot tell: assume the worst
    errno = saved;
    if (queued > 0) fd_reaper::close_later(fd);
    else close_own_fd(fd);
}

void close_listener(int fd, bool may_hold_fds) {
    if (fd < 0) return;
    if (may_hold_fds && sandbox::inside()) return;  // as close_channel
    int saved = errno;
    // Refuses new connections; the pending ones stay to be accepted.
    if (may_hold_fds && kernel::shutdown(fd, SHUT_RDWR) == 0) {
        for (int i = 0; i < 64; ++i) {  // the backlog bounds it (listen(4))
            int c = kernel::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (c < 0) break;
            close_channel(c, true);
        }
        // Its accept queue is empty now and can receive nothing more: closing it drops nothing.
        close_own_fd(fd);
    } else if (may_hold_fds) {
        fd_reaper::close_later(fd);
    } else {
        close_own_fd(fd);
    }
    errno = saved;
}

}  // namespace rdmasock::side_channel
