#include "shm/side_channel.hpp"
#include "sys/kernel_calls.hpp"
#include "sys/own_fd.hpp"

#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rdmasock::side_channel {

namespace {

socklen_t name_of(uint64_t ino, sockaddr_un& a) {
    std::memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int n = std::snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "rdmasock/v2/tcp-inode/%llu",
                          static_cast<unsigned long long>(ino));
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

int unix_socket() {
    int fd = kernel::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;  // the kernel attaches the sender's credentials to every message we receive
    kernel::setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
    return adopt_own_fd(fd);
}

}  // namespace

int listen_for(uint64_t ino) {
    int saved = errno;
    int fd = unix_socket();
    sockaddr_un a;
    socklen_t len = name_of(ino, a);
    if (fd >= 0 && (kernel::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || kernel::listen(fd, 4) != 0)) {
        close_own_fd(fd);
        fd = -1;
    }
    errno = saved;
    return fd;
}

int connect_to(uint64_t ino) {
    int saved = errno;
    int fd = unix_socket();
    sockaddr_un a;
    socklen_t len = name_of(ino, a);
    // A Unix stream connect completes at once or fails (EAGAIN: backlog full).
    if (fd >= 0 && kernel::connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
        close_own_fd(fd);
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

Received receive(int fd, void* buf, size_t len) {
    Received r;
    int saved = errno;
    iovec iov{buf, len};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int) * kMaxFds)];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    r.bytes = kernel::recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
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
                    else close_own_fd(f), r.truncated = true;
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
    for (int i = 0; i < r.nfds; ++i) close_own_fd(r.fds[i]);
    r.nfds = 0;
}

}  // namespace rdmasock::side_channel
