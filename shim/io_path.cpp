#include "io_path.hpp"

#include <cerrno>

#include "epoll_sets.hpp"
#include "errno_keep.hpp"
#include "real_calls.hpp"
#include "sys/fault_guard.hpp"
#include "sys/iov_check.hpp"
#include "shm/leftover.hpp"
#include "stat_hooks.hpp"
#include "sys/thread_cancel.hpp"

namespace rdmasock::shim {

Connection* active(int fd, Call& call) {
    auto s = fd_table().contains(fd) ? fd_table().get(fd) : nullptr;
    if (!s) {
        // Not (or no longer: a close between the two looks) in the table: its
        // close may not have reached the kernel yet (FdTable::take).
        call.closing = fd_table().closing(fd);
        return nullptr;
    }
    if (!s->conn || s->conn->is_plain()) return nullptr;
    if (!s->enter()) {  // its last close began after our look
        call.closing = true;
        return nullptr;
    }
    call.s = std::move(s);
    return call.s->conn.get();
}

ssize_t count(int fd, ssize_t n, bool tx) {
    if (n > 0 && fd_table().contains(fd))
        if (auto s = fd_table().get(fd)) {
            if (config().stats) (tx ? s->plain_tx : s->plain_rx).fetch_add(static_cast<uint64_t>(n));
            stat_bytes(*s, n, tx);
        }
    return n;
}

namespace {

// The call that settles a handshake into TCP (and every send while a HELLO is
// being stripped) goes through the Connection, not libc: count it as plain bytes
// too. The phase only moves forward, so plain/strip_hello after the call means
// the kernel carried its bytes.
ssize_t settled(Socket& s, ssize_t n, bool tx, int flags = 0) {
    if (!(flags & MSG_PEEK)) stat_bytes(s, n, tx);
    // (The side-channel path and a connection once upgraded count their TCP bytes themselves.)
    if (n > 0 && config().stats && !s.conn->counts_own_bytes()) {
        Phase ph = s.conn->phase();
        if (ph == Phase::plain || ph == Phase::strip_hello) (tx ? s.plain_tx : s.plain_rx).fetch_add(static_cast<uint64_t>(n));
    }
    return n;
}

}  // namespace

// A hand-over in this call (a forked child's first use: the connection was
// not plain before it) claimed bytes that come before the kernel's: the epoll
// sets holding the socket report them. Once, at the claim: a one-shot
// interest the kept list disarmed stays disarmed until the program re-arms it.
static void note_claimed(Socket& s, bool was_plain) {
    if (!was_plain && leftover::any_first() && s.conn->is_plain() && leftover::first_pending(s.conn->socket_inode()))
        epoll_note_claimed(s.conn.get());
}

// recv and send are cancellation points (thread_cancel.hpp).
ssize_t conn_recv(Socket& s, const iovec* iov, size_t cnt, int flags, int too_many) {
    cancel::Span span;
    if (!iov_count_ok(cnt)) return errno = too_many, -1;
    ErrnoKept kept;
    const bool was_plain = s.conn->is_plain();
    ssize_t r = s.conn->recv(iov, static_cast<int>(cnt), flags);
    // A hand-over in this call (a forked child's first read) may have kept the
    // ring's last bytes: they come before the kernel's end.
    if (r <= 0 && leftover::any() && !(flags & MSG_OOB) && iov_total(iov, cnt) > 0)
        r = leftover::after_kernel(s.conn->socket_inode(), iov, static_cast<int>(cnt), flags, r, errno);
    note_claimed(s, was_plain);
    return span.leave(kept(settled(s, r, false, flags)));
}

ssize_t after_kernel_recv(int fd, const iovec* iov, size_t cnt, int flags, ssize_t r) {
    if (r > 0 || !leftover::any() || (flags & (MSG_OOB | MSG_ERRQUEUE)) || cnt > 1024 || iov_total(iov, cnt) == 0) return r;
    const int e = errno;
    return leftover::after_kernel(leftover::inode_of(fd), iov, static_cast<int>(cnt), flags, r, e);
}

ssize_t no_peer_name(ssize_t r, const sockaddr* addr, socklen_t* len) {
    if (r < 0 || !addr) return r;
    int old = 0;
    const int zero = 0;
    if (!len || guard::copy_from_user(&old, len, sizeof old) != 0) return errno = EFAULT, -1;
    if (old < 0) return errno = EINVAL, -1;
    if (guard::copy_to_user(len, &zero, sizeof zero) != 0) return errno = EFAULT, -1;
    return r;
}

bool recv_first(int fd, const iovec* iov, size_t cnt, int flags, ssize_t& out) {
    if (!leftover::any_first()) return false;
    return leftover::receive_first(fd, leftover::inode_of(fd), iov, cnt, flags, out, real::calls().recvmsg);
}

bool kept_owed(int fd) { return leftover::any() && leftover::pending(leftover::inode_of(fd)); }

ssize_t conn_send(Socket& s, const iovec* iov, size_t cnt, int flags, int too_many) {
    cancel::Span span;
    if (!iov_count_ok(cnt)) return errno = too_many, -1;
    ErrnoKept kept;
    const bool was_plain = s.conn->is_plain();
    const ssize_t r = s.conn->send(iov, static_cast<int>(cnt), flags);
    note_claimed(s, was_plain);
    return span.leave(kept(settled(s, r, true)));
}

ssize_t recv_one(Socket& s, void* buf, size_t n, int flags) {
    iovec v{buf, n};
    return conn_recv(s, &v, 1, flags);
}

ssize_t send_one(Socket& s, const void* buf, size_t n, int flags) {
    iovec v{const_cast<void*>(buf), n};
    return conn_send(s, &v, 1, flags);
}

}  // namespace rdmasock::shim
