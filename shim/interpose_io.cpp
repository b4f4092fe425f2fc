// Data interposers: find the connection, call it. An fd the shim does not
// manage, or a connection that stayed on TCP, goes straight to libc.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "real_calls.hpp"
#include "shim_state.hpp"
#include "stat_hooks.hpp"

using namespace rdmasock;
using rdmasock::real::calls;

namespace {

// The connection of an fd whose bytes the shim carries, or null.
Connection* active(int fd, std::shared_ptr<Socket>& hold) {
    if (!fd_table().contains(fd)) return nullptr;
    hold = fd_table().get(fd);
    if (!hold || !hold->conn || hold->conn->is_plain()) return nullptr;
    return hold->conn.get();
}

// Counts bytes of a tracked socket that stayed on TCP, for the statistics line.
ssize_t count(int fd, ssize_t n, bool tx) {
    if (n > 0 && fd_table().contains(fd))
        if (auto s = fd_table().get(fd)) {
            if (shim::config().stats) (tx ? s->plain_tx : s->plain_rx).fetch_add(static_cast<uint64_t>(n));
            shim::stat_bytes(*s, n, tx);
        }
    return n;
}

// The call that settles a handshake into TCP (and every send while a HELLO is
// being stripped) goes through the Connection, not libc: count it as plain bytes
// too. The phase only moves forward, so plain/strip_hello after the call means
// the kernel carried its bytes.
ssize_t settled(Socket& s, ssize_t n, bool tx, int flags = 0) {
    if (!(flags & MSG_PEEK)) shim::stat_bytes(s, n, tx);
    // (The side-channel path counts its TCP bytes itself.)
    if (n > 0 && shim::config().stats && !s.conn->side_channel_tried()) {
        Phase ph = s.conn->phase();
        if (ph == Phase::plain || ph == Phase::strip_hello) (tx ? s.plain_tx : s.plain_rx).fetch_add(static_cast<uint64_t>(n));
    }
    return n;
}

ssize_t conn_recv(Socket& s, const iovec* iov, int cnt, int flags) { return settled(s, s.conn->recv(iov, cnt, flags), false, flags); }
ssize_t conn_send(Socket& s, const iovec* iov, int cnt, int flags) { return settled(s, s.conn->send(iov, cnt, flags), true); }

ssize_t recv_one(Socket& s, void* buf, size_t n, int flags) {
    iovec v{buf, n};
    return conn_recv(s, &v, 1, flags);
}

ssize_t send_one(Socket& s, const void* buf, size_t n, int flags) {
    iovec v{const_cast<void*>(buf), n};
    return conn_send(s, &v, 1, flags);
}

}  // namespace

extern "C" {

ssize_t read(int fd, void* buf, size_t n) {
    std::shared_ptr<Socket> h;
    if (active(fd, h)) return recv_one(*h, buf, n, 0);
    return count(fd, calls().read(fd, buf, n), false);
}

ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
    if (n > buflen) abort();  // what glibc's fortified read does on overflow
    return read(fd, buf, n);
}

ssize_t readv(int fd, const iovec* iov, int cnt) {
    std::shared_ptr<Socket> h;
    if (active(fd, h)) return conn_recv(*h, iov, cnt, 0);
    return count(fd, calls().readv(fd, iov, cnt), false);
}

ssize_t recv(int fd, void* buf, size_t n, int flags) {
    std::shared_ptr<Socket> h;
    if (active(fd, h)) return recv_one(*h, buf, n, flags);
    return count(fd, calls().recv(fd, buf, n, flags), false);
}

ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
    if (n > buflen) abort();
    return recv(fd, buf, n, flags);
}

ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* addr, socklen_t* len) {
    std::shared_ptr<Socket> h;
    if (active(fd, h)) return recv_one(*h, buf, n, flags);  // TCP leaves addr untouched
    return count(fd, calls().recvfrom(fd, buf, n, flags, addr, len), false);
}

ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, sockaddr* addr, socklen_t* len) {
    if (n > buflen) abort();
    return recvfrom(fd, buf, n, flags, addr, len);
}

ssize_t recvmsg(int fd, msghdr* msg, int flags) {
    std::shared_ptr<Socket> h;
    if (active(fd, h)) {
        ssize_t r = conn_recv(*h, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
        if (r >= 0) {
            msg->msg_controllen = 0;
            msg->msg_flags = 0;
        }
        return r;
    }
    return count(fd, calls().recvmsg(fd, msg, flags), false);
}

ssize_t write(int fd, const void* buf, size_t n) {
    std::shared_ptr<Socket> h;
    if (active(fd, h)) return send_one(*h, buf, n, 0);
    return count(fd, calls().write(fd, buf, n), true);
}

ssize_t writev(int fd, const iovec* iov, int cnt) {
    std::shared_ptr<Socket> h;
    if (active(fd, h)) return conn_send(*h, iov, cnt, 0);
    return count(fd, calls().writev(fd, iov, cnt), true);
}

ssize_t send(int fd, const void* buf, size_t n, int flags) {
    std::shared_ptr<Socket> h;
    if (active(fd, h)) return send_one(*h, buf, n, flags);
    return count(fd, calls().send(fd, buf, n, flags), true);
}

ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* addr, socklen_t len) {
    std::shared_ptr<Socket> h;
    if (active(fd, h)) return send_one(*h, buf, n, flags);  // connected: addr ignored, as TCP does
    return count(fd, calls().sendto(fd, buf, n, flags, addr, len), true);
}

ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
    std::shared_ptr<Socket> h;
    if (active(fd, h)) return conn_send(*h, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
    return count(fd, calls().sendmsg(fd, msg, flags), true);
}

ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t n) {
    std::shared_ptr<Socket> h;
    if (!active(out_fd, h)) return count(out_fd, calls().sendfile(out_fd, in_fd, offset, n), true);
    // The ring is user memory: copy through a buffer, as a read+send would.
    char buf[65536];
    size_t chunk = n < sizeof buf ? n : sizeof buf;
    ssize_t got = offset ? pread(in_fd, buf, chunk, *offset) : calls().read(in_fd, buf, chunk);
    if (got <= 0) return got;
    ssize_t sent = send_one(*h, buf, static_cast<size_t>(got), 0);
    if (sent > 0) {
        if (offset) *offset += sent;
        else if (sent < got) lseek(in_fd, sent - got, SEEK_CUR);
    }
    return sent;
}

ssize_t sendfile64(int out_fd, int in_fd, off_t* offset, size_t n) { return sendfile(out_fd, in_fd, offset, n); }

}  // extern "C"
