#include "splice_ring.hpp"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "sys/interruptible_sleep.hpp"
#include "io_path.hpp"
#include "sys/raw_syscall.hpp"
#include "real_calls.hpp"
#include "sys/signal_restart.hpp"

namespace rdmasock::shim {

namespace {

// The pipe end's checks of do_splice: open the right way, a pipe at all.
bool pipe_end_ok(int fd, bool write_end) {
    struct stat st {};
    const int fl = real::calls().fcntl(fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) == (write_end ? O_RDONLY : O_WRONLY)) return errno = EBADF, false;
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return errno = EINVAL, false;  // no pipe on either side
    return true;
}

// splice()'s blocking rule for the pipe side: SPLICE_F_NONBLOCK, not the
// pipe's O_NONBLOCK, says whether it waits (for room, or for bytes). A signal
// ends the wait as it ends the kernel's pipe wait: the call restarts after an
// SA_RESTART handler (ERESTART, which data_call turns into a rerun), else EINTR.
bool wait_on_pipe(int fd, short events, unsigned flags, const signals::Seen& since) {
    if (flags & SPLICE_F_NONBLOCK) {
        errno = EAGAIN;
        return false;
    }
    pollfd p{fd, events, 0};
    if (sleep::poll(&p, 1, -1, nullptr, since) >= 0) return true;
    if (errno == EINTR && signal_restarts_call(since, false)) errno = ERESTART;
    return false;
}

// A private, nonblocking pipe, closed with the call: it holds the bytes in
// between, so that the application's pipe gives or takes only what it can
// without blocking, whatever its own O_NONBLOCK (a pipe's room is counted in
// pages, not bytes: a write sized by FIONREAD blocked on a pipe that looked
// free enough).
struct PrivatePipe {
    int fd[2] = {-1, -1};
    PrivatePipe() {
        if (raw_syscall(SYS_pipe2, fd, O_CLOEXEC | O_NONBLOCK) != 0) fd[0] = fd[1] = -1;
    }
    ~PrivatePipe() {
        const int e = errno;
        for (int f : fd)
            if (f >= 0) raw_syscall(SYS_close, f);
        errno = e;
    }
    PrivatePipe(const PrivatePipe&) = delete;
    PrivatePipe& operator=(const PrivatePipe&) = delete;
};

constexpr size_t kChunk = 65536;  // a fresh pipe's capacity: a write of this much never blocks

// The bytes in between, one chunk per thread.
char* chunk_buffer() {
    thread_local std::vector<char> buf(kChunk);
    return buf.data();
}

}  // namespace

namespace {

// socket -> pipe through `receive(buf, n, flags)`: peeked, written to the
// pipe, and only what the pipe took is consumed.
template <class Receive>
ssize_t splice_from(Receive receive, loff_t* off_in, int pipe_fd, loff_t* off_out, size_t len, unsigned flags) {
    const signals::Seen since = signals::seen();  // a handler from here on ends a pipe wait
    // The kernel's checks, in its order (do_splice).
    if (!pipe_end_ok(pipe_fd, true)) return -1;
    if (off_out) return errno = ESPIPE, -1;
    if (off_in) return errno = EINVAL, -1;
    if (len == 0) return 0;
    PrivatePipe held;
    if (held.fd[0] < 0) return -1;  // EMFILE/ENFILE
    char* buf = chunk_buffer();
    // Peeked: the bytes stay in the ring until the application's pipe has them.
    const ssize_t n = receive(buf, std::min(len, kChunk), MSG_PEEK);
    if (n <= 0) return n;
    if (real::calls().write(held.fd[1], buf, static_cast<size_t>(n)) != n) return errno = EIO, -1;
    for (;;) {
        const ssize_t k = raw_syscall(SYS_splice, held.fd[0], nullptr, pipe_fd, nullptr, n, SPLICE_F_NONBLOCK);
        if (k > 0) return receive(buf, static_cast<size_t>(k), MSG_DONTWAIT);  // what the pipe took leaves the socket
        if (k == 0 || errno != EAGAIN || !wait_on_pipe(pipe_fd, POLLOUT, flags, since)) return k;
    }
}

}  // namespace

ssize_t splice_from_ring(Socket& s, loff_t* off_in, int pipe_fd, loff_t* off_out, size_t len, unsigned flags) {
    return splice_from([&](char* buf, size_t n, int f) { return recv_one(s, buf, n, f); }, off_in, pipe_fd, off_out,
                       len, flags);
}

ssize_t splice_from_kept(int fd, loff_t* off_in, int pipe_fd, loff_t* off_out, size_t len, unsigned flags) {
    return splice_from([fd](char* buf, size_t n, int f) { return ::recv(fd, buf, n, f); }, off_in, pipe_fd, off_out,
                       len, flags);
}

ssize_t sendfile_from_ring(Socket& s, int out_fd, off_t* offset, size_t count) {
    if (offset) return errno = ESPIPE, -1;  // checked before out_fd, as do_sendfile does
    const int fl = real::calls().fcntl(out_fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) return errno = EBADF, -1;
    struct stat st {};
    // Into anything but a pipe the kernel takes only a regular file or a block
    // device as the source (splice_direct_to_actor).
    if (fstat(out_fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return errno = EINVAL, -1;
    return splice_from_ring(s, nullptr, out_fd, nullptr, count, (fl & O_NONBLOCK) ? SPLICE_F_NONBLOCK : 0);
}

ssize_t splice_to_ring(int pipe_fd, loff_t* off_in, Socket& s, loff_t* off_out, size_t len, unsigned flags) {
    const signals::Seen since = signals::seen();
    if (!pipe_end_ok(pipe_fd, false)) return -1;
    if (off_in) return errno = ESPIPE, -1;
    if (off_out) return errno = EINVAL, -1;
    if (len == 0) return 0;
    PrivatePipe copy;
    if (copy.fd[0] < 0) return -1;
    char* buf = chunk_buffer();
    for (;;) {
        // Duplicated, not taken: the application's pipe keeps them until sent.
        const ssize_t n = raw_syscall(SYS_tee, pipe_fd, copy.fd[1], std::min(len, kChunk), SPLICE_F_NONBLOCK);
        if (n == 0) return 0;  // empty, and no writer left
        if (n < 0) {
            if (errno != EAGAIN || !wait_on_pipe(pipe_fd, POLLIN, flags, since)) return -1;
            continue;
        }
        if (real::calls().read(copy.fd[0], buf, static_cast<size_t>(n)) != n) return errno = EIO, -1;
        const ssize_t sent = send_one(s, buf, static_cast<size_t>(n), (flags & SPLICE_F_MORE) ? MSG_MORE : 0);
        if (sent <= 0) return sent;  // the pipe keeps every byte, as after the kernel's failed splice
        return real::calls().read(pipe_fd, buf, static_cast<size_t>(sent));  // what the ring took leaves the pipe
    }
}

}  // namespace rdmasock::shim
