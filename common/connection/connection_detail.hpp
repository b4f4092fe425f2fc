// Helpers shared by the Connection's files (connection*.cpp); not an interface.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "sys/raw_syscall.hpp"
#include "sys/kernel_calls.hpp"
#include "sys/iov_check.hpp"
#include "connection/connection.hpp"
#include "wait/wait_engine.hpp"

namespace rdmasock::detail {

// One clock and one pause for the whole library (wait_engine.hpp).
using wait::now_us;
using wait::cpu_relax;

// A copy of an iovec array advanced by `skip` bytes (for resuming partial I/O).
struct IovCursor {
    iovec v[64];
    int n = 0;
    IovCursor(const iovec* iov, int cnt, size_t skip) {
        for (int i = 0; i < cnt && n < 64; ++i) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            v[n].iov_base = static_cast<uint8_t*>(iov[i].iov_base) + skip;
            v[n].iov_len = iov[i].iov_len - skip;
            skip = 0;
            ++n;
        }
    }
    // At most `room` bytes from here on.
    void cap(size_t room) {
        size_t keep = 0;
        int i = 0;
        for (; i < n && keep < room; ++i) {
            if (v[i].iov_len > room - keep) v[i].iov_len = room - keep;
            keep += v[i].iov_len;
        }
        n = i;
    }
};

inline void raise_sigpipe(int flags) {
    if (!(flags & MSG_NOSIGNAL)) pthread_kill(pthread_self(), SIGPIPE);
}

// Doorbells and handshake messages are single small segments: Nagle would hold
// them back for a delayed ACK (~40 ms). After the upgrade the TCP stream carries
// nothing else, so this changes no application-visible behaviour of the data;
// the program still reads and sets its own value (Connection::program_nodelay).
inline void no_delay(int fd) {
    int one = 1;
    kernel::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}


// SOL_SOCKET options from the kernel itself: getsockopt is interposed (SO_ERROR
// takes what a ring owes), and the close path may hold the fd table's locks.
inline int kernel_sockopt_get(int fd, int name, void* value, socklen_t* len) {
    return static_cast<int>(raw_syscall(SYS_getsockopt, fd, SOL_SOCKET, name, value, len));
}
inline int kernel_sockopt_set(int fd, int name, const void* value, socklen_t len) {
    return static_cast<int>(raw_syscall(SYS_setsockopt, fd, SOL_SOCKET, name, value, len));
}

// TCP_CLOSE (reset, or ended both ways), where shutdown(2) says ENOTCONN:
// getpeername says the same there (inet_getname), and changes nothing.
inline bool kernel_stream_closed(int fd) {
    sockaddr_storage a{};
    socklen_t l = sizeof a;
    const int saved = errno;
    const bool closed = raw_syscall(SYS_getpeername, fd, &a, &l) != 0 && errno == ENOTCONN;
    errno = saved;
    return closed;
}

// The kernel's shutdown(2): ::shutdown is interposed, and for a connection
// still marked upgraded it would only end the ring.
inline void kernel_shutdown(int fd, int how) {
    int saved = errno;
    raw_syscall(SYS_shutdown, fd, how);
    errno = saved;
}

// Our own bytes on the TCP socket (a take-back, a back marker), whatever the
// socket's blocking mode: they were already "sent" as far as the application
// knows, like bytes in a kernel send queue. A full socket buffer waits for the
// reader. False when the socket failed (no one will read them).
inline bool send_all_ours(const SocketOps& ops, int fd, const void* data, size_t len) {
    const char* p = static_cast<const char*>(data);
    while (len > 0) {
        ssize_t n = ops.send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
        pollfd pw{fd, POLLOUT, 0};
        ops.poll(&pw, 1, 1000);
    }
    return true;
}

// A nap of the hand-over while it waits for the peer's next call, which may be
// long: signal handlers held back (signal_seen.hpp) run, and new ones run at
// once, as they did before (an exit() in a SIGINT handler must not wait for
// an idle peer).
template <class F>
void nap_for_peer(F&& nap) {
    signals::HandlersNow now;
    nap();
}

// Phases in which this side holds rings (and an eventfd on the side-channel path).
inline bool has_rings(Phase p) { return p == Phase::upgraded || p == Phase::rv_accepted; }
// The handshake is over, one way or the other: nothing left to progress.
inline bool settled(Phase p) { return p == Phase::upgraded || p == Phase::plain || p == Phase::failed; }

}  // namespace rdmasock::detail
