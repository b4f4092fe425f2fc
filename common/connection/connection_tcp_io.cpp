// The data path's calls on the TCP socket that may block: before the switch to
// the rings (the rendezvous), and after a connection went back to TCP.
//
// They run holding a direction's lock (read_mu_ keeps the rendezvous step from
// passing a reader asleep on the socket). A blocking kernel recv or send there
// had to run signal handlers at once, as a restarted system call would hold
// them back for as long as it blocks: a handler that jumped out (the
// alarm/siglongjmp timeout idiom) left the lock taken and the connection hung,
// and one that read the socket waited for the lock its own thread held. So the
// socket is asked without waiting, and a wait is a shim sleep like the ring
// waits' (interruptible_sleep.hpp): a signal ends it, the call lets go of the
// lock, the handlers held back meanwhile run on the interposer's way out, and
// the call restarts from the top where the kernel would restart it
// (Connection::wait_failed, shim/io_path.hpp). A call the kernel's socket must
// answer alone (an option only the kernel has, kernel_only.hpp) keeps the
// kernel's blocking call.
#include "sys/raw_syscall.hpp"
#include "connection/connection_detail.hpp"

#include <fcntl.h>

#include "sys/interruptible_sleep.hpp"
#include "sys/signal_restart.hpp"
#include "sys/signal_seen.hpp"
#include "sys/thread_cancel.hpp"

namespace rdmasock {

using namespace detail;

ssize_t Connection::kernel_io(bool write, const iovec* iov, int iovcnt, int flags) {
    // One buffer (read, write, recv, send): the kernel's plain call, which
    // copies no msghdr in (a short connection makes several of these).
    if (iovcnt == 1)
        return write ? ops_.send(fd(), iov[0].iov_base, iov[0].iov_len, flags) : ops_.recv(fd(), iov[0].iov_base, iov[0].iov_len, flags);
    msghdr mh{};
    mh.msg_iov = const_cast<iovec*>(iov);
    mh.msg_iovlen = static_cast<size_t>(iovcnt);
    return write ? ops_.sendmsg(fd(), &mh, flags) : ops_.recvmsg(fd(), &mh, flags);
}

ssize_t Connection::tcp_io(bool write, const iovec* iov, int iovcnt, int flags) {
    // A blocking send queues all of it; a blocking recv returns what is there,
    // or all of it with MSG_WAITALL (less only at EOF, an error, a signal or the timeout).
    const bool whole = write || (flags & MSG_WAITALL);
    const bool may_wait = !nonblocking() && !(flags & MSG_DONTWAIT);
    // A peek for all of it sees the same bytes again and again: the kernel waits for the rest.
    const bool peek_whole = !write && (flags & MSG_PEEK) && whole;
    // Urgent data: a recv of it never waits (EAGAIN, EINVAL or 0 at once), a send of it is rare.
    if (!may_wait || tcp_only_.load() || peek_whole || (flags & MSG_OOB) || iovcnt > 64) {
        signals::HandlersNow now;  // a blocking one: handlers run at once, as they did before
        return kernel_io(write, iov, iovcnt, flags);
    }
    const size_t want = iov_total(iov, iovcnt);
    const int64_t timeout = timeout_for(write);
    const CallTimeout tmo(timeout);
    const signals::Seen since = signals::seen();
    size_t total = 0;
    bool flags_read = false;
    for (;;) {
        // Ask the socket; after a part moved, wait before asking again. (A send
        // after a part ended by a local shutdown returns the count, SIGPIPE is the
        // next call's, as TCP's.)
        IovCursor cur(iov, iovcnt, total);
        const ssize_t n = kernel_io(write, cur.v, cur.n, flags | MSG_DONTWAIT | (write && total > 0 ? MSG_NOSIGNAL : 0));
        if (n == 0) return static_cast<ssize_t>(total);  // EOF, or nothing asked for
        if (n > 0) {
            total += static_cast<size_t>(n);
            if (!whole || total >= want) return static_cast<ssize_t>(total);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            return total > 0 ? static_cast<ssize_t>(total) : -1;
        }
        // The file's own flag, as the kernel's call would read it: another
        // process sharing the file may have set O_NONBLOCK since (fcntl's own
        // call: the shim's fcntl refuses a private dup of ours).
        if (!flags_read) {
            flags_read = true;
            if (file_now_nonblocking()) {
                if (total > 0) return static_cast<ssize_t>(total);
                errno = EAGAIN;
                return -1;
            }
        }
        // A blocking recv of nothing waits once for data (or its end) and then
        // returns 0, whatever ended the wait: tcp_recvmsg's loop runs while
        // len > 0, so neither the timeout nor a signal becomes its error.
        const bool zero_read = !write && want == 0;
        const int64_t left = tmo.left_us();
        if (left == 0) {  // SO_RCVTIMEO/SO_SNDTIMEO passed
            if (total > 0) return static_cast<ssize_t>(total);
            if (zero_read) return 0;
            errno = EAGAIN;
            return -1;
        }
        pollfd p{fd(), static_cast<short>(write ? POLLOUT : POLLIN), 0};
        const int rc = sleep::poll(&p, 1, left, nullptr, since);
        if (rc < 0 && errno == EINTR) {
            if (total > 0) return static_cast<ssize_t>(total);
            // (A pthread_cancel request ended it: EINTR below, on which the
            // interposer unwinds the thread, as for the ring's recv_nothing.)
            if (zero_read && !cancel::pending()) return 0;
            errno = signal_restarts_call(since, timeout > 0) ? ERESTART : EINTR;
            return -1;
        }
        // An error (a reset) after a part moved: TCP's call returns the count
        // and leaves the error, and SIGPIPE, to the next call; asking the socket
        // again would take them. (Bytes still queued are read first, as TCP does.)
        if (rc > 0 && total > 0 && (p.revents & POLLERR) && (write || kernel::inq(fd()) == 0)) return static_cast<ssize_t>(total);
        // Ready, or the deadline: the next look says which.
    }
}

// A look at the TCP socket (MSG_PEEK) by the shim itself. With nothing queued a
// recv returns the socket's pending error and clears it (sock_error), a peek
// too: the program's next call then saw EPIPE or EOF where TCP reports
// ECONNRESET. So a socket with an error pending and nothing queued is not
// asked: -1 with ECONNRESET, the error left for the program.
ssize_t Connection::peek_tcp(void* buf, size_t n) {
    pollfd p{fd(), 0, 0};  // POLLERR is reported whatever is asked
    if (ops_.poll(&p, 1, 0) > 0 && (p.revents & POLLERR) && kernel::inq(fd()) == 0) {
        errno = ECONNRESET;
        return -1;
    }
    return ops_.recv(fd(), buf, n, MSG_PEEK | MSG_DONTWAIT);
}

}  // namespace rdmasock
