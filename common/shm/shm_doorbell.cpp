#include "shm/shm_doorbell.hpp"

#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>

#include "shm/fd_reaper.hpp"
#include "shm/side_channel.hpp"
#include "sys/kernel_calls.hpp"
#include "sys/own_fd.hpp"
#include "sys/sandbox.hpp"

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83  // Linux 6.16 (asm-generic/socket.h)
#endif

namespace rdmasock::shm_doorbell {

namespace {
// Every sleep end refuses fds (SO_PASSRIGHTS, Linux 6.16+): a drain is a plain recv.
std::atomic<bool> g_fds_refused{false};
}  // namespace

bool create(int& sleep_end, int& ring_end) {
    int sv[2];
    if (kernel::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return false;
    // The peer's sends reach the sleep end: with fds refused there (Linux 6.16+)
    // it can queue no file whose last close would be ours. Older kernels: drain
    // takes them like the side channel does (side_channel::receive).
    const bool refused = side_channel::allow_fds(sv[0], false);
    if (refused) {
        g_fds_refused.store(true, std::memory_order_relaxed);
    } else if (g_fds_refused.load(std::memory_order_relaxed)) {
        // The kernel refuses fds at every other sleep end: close_sleep_end counts on it.
        const int e = errno;
        kernel::close(sv[0]), kernel::close(sv[1]);
        errno = e;
        return false;
    }
    sleep_end = sv[0], ring_end = sv[1];
    return true;
}

bool is_ring_end(int fd) {
    int saved = errno;
    struct stat st{};
    int domain = 0, type = 0, listening = 1;
    socklen_t l1 = sizeof domain, l2 = sizeof type, l3 = sizeof listening;
    sockaddr_storage a{};
    socklen_t la = sizeof a;
    bool ok = kernel::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
              kernel::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l1) == 0 && domain == AF_UNIX &&
              kernel::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l2) == 0 && type == SOCK_STREAM &&
              kernel::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l3) == 0 && listening == 0 &&
              kernel::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &la) == 0;
    errno = saved;
    return ok;
}

void ring(int ring_end) {
    if (ring_end < 0) return;
    int saved = errno;
    const char b = 1;
    // EAGAIN: the sleeper's queue is full, so a wake-up is pending already.
    // EPIPE (the end was shut): no signal, nothing to wake.
    [[maybe_unused]] ssize_t n = kernel::send_nowait(ring_end, &b, 1);
    errno = saved;
}

bool drain(int sleep_end) {
    constexpr int kReads = 4;  // an honest peer rings once per sleep: a ringing peer cannot keep us here
    int saved = errno;
    char buf[256];
    bool open = true;
    for (int i = 0; i < kReads; ++i) {
        // Never waits (MSG_DONTWAIT), and takes any fd that came along (kernels
        // without SO_PASSRIGHTS) so that none is dropped by a close of ours.
        ssize_t n;
        if (g_fds_refused.load(std::memory_order_relaxed)) {
            n = kernel::recv(sleep_end, buf, sizeof buf, MSG_DONTWAIT);
        } else {
            auto r = side_channel::receive(sleep_end, buf, sizeof buf);
            side_channel::close_fds(r);
            n = r.bytes;
        }
        if (n == 0) open = false;
        if (n < static_cast<ssize_t>(sizeof buf)) break;
    }
    errno = saved;
    return open;
}

void close_sleep_end(int fd) {
    if (fd < 0) return;
    // SO_PASSRIGHTS off since create() (every sleep end, once one is): nothing
    // queued there holds a file. Known without asking the kernel: a close may
    // come under a seccomp filter that kills a getsockopt (sys/sandbox.hpp).
    if (g_fds_refused.load(std::memory_order_relaxed)) close_own_fd(fd);
    else if (!sandbox::inside()) side_channel::close_channel(fd, true);
}

void close_peer_ring(int fd) {
    if (fd < 0 || sandbox::inside()) return;  // no ioctl there: left open (sys/sandbox.hpp)
    int saved = errno;
    // Its queue is fed by the peer's sleep end: a file queued there (SCM_RIGHTS)
    // would be released by the last close, which may be ours. Not shut (the
    // peer would read that as a hostile EOF): closed here only when empty.
    int queued = 1;
    if (kernel::ioctl(fd, SIOCINQ, &queued) != 0) queued = 1;
    if (queued > 0) fd_reaper::close_later(fd);
    else close_own_fd(fd);
    errno = saved;
}

void renew(int sleep_end, int self_ring) {
    int saved = errno;
    int s = -1, r = -1;
    if (create(s, r)) {
        const int old = kernel::fcntl(sleep_end, F_DUPFD_CLOEXEC, 0);
        // Same numbers: the waits and epoll sets that know them keep them. Our
        // old ring end's queue was fed by our old sleep end only (never written).
        (void)kernel::dup3(s, sleep_end, O_CLOEXEC);
        (void)kernel::dup3(r, self_ring, O_CLOEXEC);
        kernel::close(s), kernel::close(r);
        if (old >= 0) mark_own_fd(old), close_sleep_end(old);
    }
    errno = saved;
}

Confirm receive_ring_end(int chan, uint8_t tag, int& ring_end, bool shared) {
    int saved = errno;
    uint8_t b = 0;
    // Shared, it is peeked: CONFIRM is the channel's last message, and a process
    // forked before it arrived shares this channel with its parent. Whichever
    // reads first must leave the message for the other, or the other never gets
    // the server's doorbell and its wake-ups reach nobody (a forked child's
    // take-back then waited for good: mt_fuzz, seeds 3 and 37). Each peek brings
    // its own copy of the ring end; the channel's last close frees the message.
    auto r = side_channel::receive(chan, &b, 1, shared);
    Confirm c = Confirm::refused;
    if (r.bytes < 0 && r.error == 0) {
        c = Confirm::waiting;
    } else if (r.bytes == 1 && !r.truncated && b == tag && r.nfds == 1 && is_ring_end(r.fds[0])) {
        ring_end = r.fds[0];
        r.nfds = 0;  // ours now
        c = Confirm::done;
    }
    side_channel::close_fds(r);  // whatever else came (closed where it cannot block: fd_reaper.hpp)
    errno = saved;
    return c;
}

}  // namespace rdmasock::shm_doorbell
