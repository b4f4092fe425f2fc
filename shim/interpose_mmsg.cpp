// sendmmsg/recvmmsg on a stream socket carried by the ring: one sendmsg or
// recvmsg per entry, with the kernel's rules for when the batch stops
// (net/socket.c __sys_sendmmsg, do_recvmmsg).
#include <sys/socket.h>
#include <time.h>

#include <cerrno>

#include "errno_keep.hpp"
#include "io_path.hpp"
#include "real_calls.hpp"

using namespace rdmasock;
using namespace rdmasock::shim;
using rdmasock::real::calls;

namespace {

int64_t now_ns() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

// do_recvmmsg's batch, one `receive(msghdr&, flags)` per entry: it stops at
// an error (the first entry's fails the call, a later one's is left in
// `err`), MSG_WAITFORONE makes every entry after the first nonblocking, and
// the timeout is looked at after each entry, not while one waits (recvmmsg(2)
// BUGS). Returns the entries filled, or -1.
template <class Receive>
int recv_batch(mmsghdr* msgs, unsigned vlen, int flags, timespec* timeout, int& err, Receive receive) {
    const int64_t end = timeout ? now_ns() + timeout->tv_sec * 1000000000LL + timeout->tv_nsec : 0;
    const unsigned max = vlen > UIO_MAXIOV ? UIO_MAXIOV : vlen;
    if (max == 0) return 0;
    int each = flags & ~MSG_WAITFORONE;
    unsigned done = 0;
    for (; done < max; ++done) {
        msghdr& m = msgs[done].msg_hdr;
        const ssize_t n = bad_name_len(&m) ? (errno = EINVAL, -1)
                                           : no_peer_name(receive(m, each), static_cast<sockaddr*>(m.msg_name), &m.msg_namelen);
        if (n < 0) {
            err = errno;
            break;
        }
        m.msg_controllen = 0;
        m.msg_flags = 0;
        msgs[done].msg_len = static_cast<unsigned>(n);
        if (flags & MSG_WAITFORONE) each |= MSG_DONTWAIT;
        if (timeout) {
            int64_t left = end - now_ns();
            if (left < 0) left = 0;
            timeout->tv_sec = left / 1000000000LL;
            timeout->tv_nsec = left % 1000000000LL;
            if (left == 0) {
                ++done;
                break;
            }
        }
    }
    if (done == 0) {
        errno = err;
        return -1;
    }
    return static_cast<int>(done);
}

}  // namespace

extern "C" {

int sendmmsg(int fd, mmsghdr* msgs, unsigned vlen, int flags) {
    shim::ErrnoKept kept;
    for (unsigned i = 0; msgs && i < vlen && i < UIO_MAXIOV; ++i)
        if (msgs[i].msg_hdr.msg_controllen) before_passing_fds(&msgs[i].msg_hdr, -1);
    auto through_shim = [&](Socket& s) -> int {
        const unsigned max = vlen > UIO_MAXIOV ? UIO_MAXIOV : vlen;  // the kernel's cap
        if (max == 0) return 0;
        unsigned done = 0;
        for (; done < max; ++done) {
            const msghdr& m = msgs[done].msg_hdr;
            ssize_t n = conn_send(s, m.msg_iov, m.msg_iovlen, flags, EMSGSIZE);
            if (n < 0) break;
            msgs[done].msg_len = static_cast<unsigned>(n);
            size_t want = 0;
            for (size_t i = 0; i < m.msg_iovlen; ++i) want += m.msg_iov[i].iov_len;
            if (static_cast<size_t>(n) < want) {  // a short send ends the batch
                ++done;
                break;
            }
        }
        return done > 0 ? static_cast<int>(done) : -1;  // after one sent, a later error is lost
    };
    auto through_kernel = [&] {
        int r = calls().sendmmsg(fd, msgs, vlen, flags);
        for (int i = 0; i < r; ++i) count(fd, msgs[i].msg_len, true);
        return r;
    };
    return kept(data_call(fd, through_shim, through_kernel));
}

int recvmmsg(int fd, mmsghdr* msgs, unsigned vlen, int flags, timespec* timeout) {
    shim::ErrnoKept kept;
    if (flags & MSG_ERRQUEUE) return kept(calls().recvmmsg(fd, msgs, vlen, flags, timeout));  // io_path.hpp
    if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000L)) {
        errno = EINVAL;
        return -1;
    }
    auto through_shim = [&](Socket& s) -> int {
        // do_recvmmsg reports the socket's pending error (a RST's) before any byte.
        if (const int e = s.conn->take_socket_error()) {
            errno = e;
            return -1;
        }
        int err = 0;
        const int done = recv_batch(msgs, vlen, flags, timeout, err, [&](msghdr& m, int each) {
            return conn_recv(s, m.msg_iov, m.msg_iovlen, each, EMSGSIZE);
        });
        // A later entry's error (the reset's) the kernel keeps for the next call (sk_err).
        if (done > 0 && err != 0 && err != EAGAIN && err != EWOULDBLOCK) s.conn->owe_again(err);
        return done;
    };
    auto through_kernel = [&] {
        // Bytes a hand-over kept for this plain socket: one receive per entry
        // through the shim's recvmsg, which serves them in their place.
        if (kept_owed(fd)) {
            int err = 0;
            return recv_batch(msgs, vlen, flags, timeout, err,
                              [&](msghdr& m, int each) { return ::recvmsg(fd, &m, each); });
        }
        int r = calls().recvmmsg(fd, msgs, vlen, flags, timeout);
        for (int i = 0; i < r; ++i) count(fd, msgs[i].msg_len, false);
        return r;
    };
    return kept(data_call(fd, through_shim, through_kernel));
}

}  // extern "C"
