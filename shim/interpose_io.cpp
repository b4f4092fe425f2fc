// Data interposers: find the connection, call it. An fd the shim does not
// manage, or a connection that stayed on TCP, goes straight to libc.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "errno_keep.hpp"
#include "io_path.hpp"
#include "splice_ring.hpp"
#include "real_calls.hpp"

using namespace rdmasock;
using namespace rdmasock::shim;
using rdmasock::real::calls;


namespace {
bool no_bytes(const iovec* iov, int cnt) {
    for (int i = 0; i < cnt; ++i)
        if (iov[i].iov_len) return false;
    return true;
}
}  // namespace

extern "C" {

// read() and readv() of no bytes return 0 without asking the socket
// (sock_read_iter); recv() of none asks (Connection::recv_nothing).
ssize_t read(int fd, void* buf, size_t n) {
    return data_call(
        fd, [&](Socket& s) { return n == 0 ? 0 : recv_one(s, buf, n, 0); },
        [&] {
            iovec v{buf, n};
            if (ssize_t r; recv_first(fd, &v, 1, 0, r)) return count(fd, r, false);
            return count(fd, after_kernel_recv(fd, &v, 1, 0, calls().read(fd, buf, n)), false);
        });
}

ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
    if (n > buflen) abort();  // what glibc's fortified read does on overflow
    return read(fd, buf, n);
}

ssize_t readv(int fd, const iovec* iov, int cnt) {
    return data_call(
        fd,
        [&](Socket& s) -> ssize_t {
            if (cnt >= 0 && cnt <= IOV_MAX && (cnt == 0 || iov) && no_bytes(iov, cnt)) return 0;
            return conn_recv(s, iov, static_cast<size_t>(cnt < 0 ? SIZE_MAX : cnt), 0);
        },
        [&] {
            const size_t n = cnt < 0 ? 0 : static_cast<size_t>(cnt);
            if (ssize_t r; cnt > 0 && cnt <= IOV_MAX && iov && recv_first(fd, iov, n, 0, r)) return count(fd, r, false);
            return count(fd, after_kernel_recv(fd, iov, n, 0, calls().readv(fd, iov, cnt)), false);
        });
}

ssize_t recv(int fd, void* buf, size_t n, int flags) {
    if (flags & MSG_ERRQUEUE) return calls().recv(fd, buf, n, flags);  // the kernel socket's queue (io_path.hpp)
    return data_call(
        fd, [&](Socket& s) { return recv_one(s, buf, n, flags); },
        [&] {
            iovec v{buf, n};
            if (ssize_t r; recv_first(fd, &v, 1, flags, r)) return count(fd, r, false);
            return count(fd, after_kernel_recv(fd, &v, 1, flags, calls().recv(fd, buf, n, flags)), false);
        });
}

ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
    if (n > buflen) abort();
    return recv(fd, buf, n, flags);
}

ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* addr, socklen_t* len) {
    if (flags & MSG_ERRQUEUE) return calls().recvfrom(fd, buf, n, flags, addr, len);
    return data_call(
        fd, [&](Socket& s) { return no_peer_name(recv_one(s, buf, n, flags), addr, len); },
        [&] {
            iovec v{buf, n};
            if (ssize_t r; recv_first(fd, &v, 1, flags, r)) return count(fd, no_peer_name(r, addr, len), false);
            return count(fd, after_kernel_recv(fd, &v, 1, flags, calls().recvfrom(fd, buf, n, flags, addr, len)), false);
        });
}

ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, sockaddr* addr, socklen_t* len) {
    if (n > buflen) abort();
    return recvfrom(fd, buf, n, flags, addr, len);
}

ssize_t recvmsg(int fd, msghdr* msg, int flags) {
    if (flags & MSG_ERRQUEUE) return calls().recvmsg(fd, msg, flags);
    return data_call(
        fd,
        [&](Socket& s) -> ssize_t {
            if (bad_name_len(msg)) return errno = EINVAL, -1;
            ssize_t r = conn_recv(s, msg->msg_iov, msg->msg_iovlen, flags, EMSGSIZE);
            if (r >= 0) {
                msg->msg_controllen = 0;
                msg->msg_flags = 0;
            }
            return no_peer_name(r, static_cast<sockaddr*>(msg->msg_name), &msg->msg_namelen);
        },
        [&] {
            if (ssize_t r; msg && !bad_name_len(msg) && (msg->msg_iovlen == 0 || msg->msg_iov) && recv_first(fd, msg->msg_iov, msg->msg_iovlen, flags, r)) {
                msg->msg_controllen = 0;
                msg->msg_flags = 0;
                return count(fd, no_peer_name(r, static_cast<sockaddr*>(msg->msg_name), &msg->msg_namelen), false);
            }
            ssize_t r = recvmsg_taking_leftovers(fd, msg, flags);
            if (r <= 0 && msg) r = after_kernel_recv(fd, msg->msg_iov, msg->msg_iovlen, flags, r);
            return count(fd, r, false);
        });
}

ssize_t write(int fd, const void* buf, size_t n) {
    return data_call(
        fd, [&](Socket& s) { return send_one(s, buf, n, 0); }, [&] { return count(fd, calls().write(fd, buf, n), true); });
}

ssize_t writev(int fd, const iovec* iov, int cnt) {
    return data_call(
        fd, [&](Socket& s) { return conn_send(s, iov, static_cast<size_t>(cnt < 0 ? SIZE_MAX : cnt), 0); },
        [&] { return count(fd, calls().writev(fd, iov, cnt), true); });
}

ssize_t send(int fd, const void* buf, size_t n, int flags) {
    return data_call(
        fd, [&](Socket& s) { return send_one(s, buf, n, flags); },
        [&] { return count(fd, calls().send(fd, buf, n, flags), true); });
}

ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* addr, socklen_t len) {
    return data_call(
        fd, [&](Socket& s) { return send_one(s, buf, n, flags); },  // connected: addr ignored, as TCP does
        [&] { return count(fd, calls().sendto(fd, buf, n, flags, addr, len), true); });
}

ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
    msghdr with;
    std::vector<char> ctl;
    if (msg && msg->msg_controllen) {
        before_passing_fds(msg, fd);
        msg = with_leftovers(msg, with, ctl);
    }
    return data_call(
        fd, [&](Socket& s) { return conn_send(s, msg->msg_iov, msg->msg_iovlen, flags, EMSGSIZE); },
        [&] { return count(fd, calls().sendmsg(fd, msg, flags), true); });
}

ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t n) {
    shim::ErrnoKept kept;
    // To a connection on a ring: read the file, send what was read.
    auto to_ring = [&](Socket& s) -> ssize_t {
        // The ring is user memory: copy through a buffer, as a read+send would.
        char buf[65536];
        size_t chunk = n < sizeof buf ? n : sizeof buf;
        ssize_t got = offset ? pread(in_fd, buf, chunk, *offset) : calls().read(in_fd, buf, chunk);
        if (got <= 0) return got;
        ssize_t sent = send_one(s, buf, static_cast<size_t>(got), 0);
        // The file's position moves by what was sent, nothing when nothing was
        // (a restart reads those bytes again).
        if (offset && sent > 0) *offset += sent;
        else if (!offset && sent < got) {
            const int e = errno;
            lseek(in_fd, (sent > 0 ? sent : 0) - got, SEEK_CUR);
            errno = e;
        }
        return sent;
    };
    auto by_kernel = [&] { return count(out_fd, calls().sendfile(out_fd, in_fd, offset, n), true); };
    // From a connection on a ring: the kernel would read its TCP socket, where
    // none of the ring's bytes are (splice_ring.hpp).
    return kept(data_call(
        in_fd, [&](Socket& s) { return sendfile_from_ring(s, out_fd, offset, n); },
        [&] { return data_call(out_fd, to_ring, by_kernel); }));
}

ssize_t sendfile64(int out_fd, int in_fd, off_t* offset, size_t n) { return sendfile(out_fd, in_fd, offset, n); }

}  // extern "C"
