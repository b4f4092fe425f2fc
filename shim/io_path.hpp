// The path every data interposer takes for a tracked socket: find its
// connection (holding it for the whole call), check the arguments the kernel
// would check, call the connection, count the bytes for the statistics.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "shim_state.hpp"
#include "sys/signal_seen.hpp"

namespace rdmasock::shim {

// Holds the socket for the length of one call: a close() from another thread
// meanwhile never lets this call reach a reused fd number (Socket::calls).
struct Call {
    std::shared_ptr<Socket> s;
    bool closing = false;  // active(): the number's last close has begun; the call answers EBADF
    Call() = default;
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    ~Call() {
        if (s) s->leave();
    }
};

// The connection of an fd whose bytes the shim carries, or null (the kernel's).
// (A read of the error queue, MSG_ERRQUEUE, never comes here: that queue is the
// kernel socket's, zero-copy completions and timestamps, never stream bytes.)
Connection* active(int fd, Call& call);

// Counts bytes of a tracked socket that stayed on TCP, for the statistics line.
ssize_t count(int fd, ssize_t n, bool tx);

// One data call on `fd`, as the kernel runs a system call: through the
// connection (`shim_call(Socket&)`, the socket held for the call) or, for an fd the shim does not carry, the
// kernel (`kernel_call()`). Signal handlers held back meanwhile (the
// connection's locks, signal_seen.hpp) run once the call has let go of the
// socket; where its wait says the kernel would restart (ERESTART, which never
// leaves here) it runs again from the top, the number looked up again: one
// the handler closed answers EBADF, as the kernel's restart does.
template <class ShimCall, class KernelCall>
auto data_call(int fd, ShimCall&& shim_call, KernelCall&& kernel_call) -> decltype(kernel_call()) {
    for (;;) {
        decltype(kernel_call()) r;
        int e;
        {
            signals::HandlersAtReturn at_return;
            Call h;
            if (!active(fd, h)) {
                // Not to the kernel: its socket still carries the ring's connection
                // until the close returns (FdTable::take).
                if (h.closing) {
                    errno = EBADF;
                    return -1;
                }
                break;
            }
            r = shim_call(*h.s);
            e = errno;
        }
        if (!(r < 0 && e == ERESTART)) {
            errno = e;
            return r;
        }
    }
    return kernel_call();
}

// Through the connection. More than IOV_MAX iovecs fails as in the kernel:
// EINVAL for readv/writev, EMSGSIZE for the msghdr calls (`too_many`).
ssize_t conn_recv(Socket& s, const iovec* iov, size_t cnt, int flags, int too_many = EINVAL);
ssize_t conn_send(Socket& s, const iovec* iov, size_t cnt, int flags, int too_many = EINVAL);
ssize_t recv_one(Socket& s, void* buf, size_t n, int flags);
ssize_t send_one(Socket& s, const void* buf, size_t n, int flags);
// A message passing fds (SCM_RIGHTS): each carried connection among them goes
// back to TCP first (interpose_handover.cpp).
// `via`: the socket that carries the message (-1: its kept bytes cannot go with it).
void before_passing_fds(const msghdr* msg, int via);
// sendmsg with SCM_RIGHTS after before_passing_fds: where a passed socket has
// kept bytes (leftover.hpp), `out` is the message with their memfds added
// (control in `ctl`) and the result is &out; else `msg`.
const msghdr* with_leftovers(const msghdr* msg, msghdr& out, std::vector<char>& ctl);
// recvmsg of an fd the shim does not carry, where fds may arrive: takes
// kept-bytes memfds out of the message and adopts them (leftover.hpp).
ssize_t recvmsg_taking_leftovers(int fd, msghdr* msg, int flags);
// The kernel's answer `r` to a receive on `fd`, or kept bytes of its socket
// where the kernel said end of stream (leftover.hpp).
ssize_t after_kernel_recv(int fd, const iovec* iov, size_t cnt, int flags, ssize_t r);
// Before the kernel is asked: bytes claimed from a writer that did not answer
// come first (leftover.hpp, Order::before_kernel). True with the result in
// `out` when they served this receive (MSG_WAITALL: the kernel gives the rest).
bool recv_first(int fd, const iovec* iov, size_t cnt, int flags, ssize_t& out);
// What a TCP receive says of the sender's address once `r` bytes came: none.
// The kernel writes a name length of 0 where the caller gave a name buffer
// (recvfrom's `len`, recvmsg's msg_namelen) and leaves the buffer alone; a
// length it cannot read or write makes the call EFAULT, one that reads
// negative EINVAL, the bytes taken all the same (move_addr_to_user).
ssize_t no_peer_name(ssize_t r, const sockaddr* addr, socklen_t* len);
// recvmsg's name length, read as the kernel's int before it receives: negative is EINVAL.
inline bool bad_name_len(const msghdr* msg) { return msg->msg_name && static_cast<int>(msg->msg_namelen) < 0; }
// Whether plain socket `fd` has kept bytes (or their end) still owed, in
// either order: a call the shim otherwise leaves to the kernel (recvmmsg,
// splice) then takes them through the shim's own receive.
bool kept_owed(int fd);

}  // namespace rdmasock::shim
