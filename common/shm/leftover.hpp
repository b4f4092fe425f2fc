// Bytes a connection's peer left in our receive ring at a hand-over that the
// peer could not serve (docs/protocol.md, "Downgrade": "A writer that is gone",
// "A writer that does not answer").
//
// Only a writer can put bytes on its TCP socket again, and this one closed or
// died: the receiver takes what the ring holds itself and keeps it here, in a
// sealed memfd, for whoever reads the socket next. The kernel socket then holds
// the peer's last TCP bytes (those before the switch) and its FIN (or RST), and
// the stream is: the kernel's bytes, these, then the kernel's end. So a receive
// on the socket asks the kernel first and, where the kernel says end of stream
// (or reports the peer's reset), serves these bytes before that end
// (Order::at_kernel_end).
//
// A writer that is alive but does not answer (stopped, or blocked on another
// channel) cannot be waited for: an exec must go on at once, as over TCP. The
// receiver then claims the ring's cut itself (Connection::claim_receives): it
// had read every byte sent before the switch, so these bytes come before any
// the kernel holds or will get (Order::before_kernel), and the writer, once it
// runs again, sends on TCP what it writes after them.
//
// The memfd travels with the socket: a forked child shares the mapping (and the
// consumed count in it, as two processes share a kernel receive queue), an
// SCM_RIGHTS message carries it beside the socket (the receiver's shim takes it
// out of the message), an exec names it in RDMASOCK_LEFTOVER.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rdmasock::leftover {

enum class Order : uint32_t {
    at_kernel_end = 0,  // the writer is gone: the kernel's bytes, these, the kernel's end
    before_kernel = 1,  // claimed from a live writer: these, then the kernel's bytes
};

// True while any kept bytes of this process are unread (one relaxed load).
bool any();
// True while any kept bytes are to be served before the kernel's (one relaxed load).
bool any_first();
// Keeps `len` bytes for the socket with inode `inode`; `fin`: the writer's end
// of stream follows them (a claimed ring that ended with the writer's FIN).
// False on failure (the caller resets the connection loudly, as before).
bool keep(uint64_t inode, const void* data, size_t len, Order order = Order::at_kernel_end, bool fin = false);
// The socket inode of `fd`, 0 if none.
uint64_t inode_of(int fd);
// True when `inode` has unread kept bytes.
bool pending(uint64_t inode);
// After the kernel answered a receive on socket `inode` with `r` (errno `err`
// when r < 0): a receive of kept bytes where the kernel said end of stream or
// reported the peer's reset (which is then owed after them), else `r` itself
// with errno restored. Only for a receive of at least one byte.
// (Order::before_kernel bytes are served by before_kernel, never here.)
ssize_t after_kernel(uint64_t inode, const iovec* iov, int cnt, int flags, ssize_t r, int err);
// Before the kernel is asked: where `inode` has Order::before_kernel bytes
// unread (or their end of stream), serves them into `iov` and returns true with
// the result in `out` (bytes, or 0 for the writer's end after them). MSG_PEEK
// leaves them; MSG_WAITALL is the caller's (it asks the kernel for the rest).
bool before_kernel(uint64_t inode, const iovec* iov, int cnt, int flags, ssize_t& out);
// A receive on socket `fd` (inode `inode`): before_kernel, then what the kernel
// has queued behind them (through `kernel_recvmsg`, without waiting), and for
// MSG_WAITALL the rest, as one TCP receive waits for it. False when no kept
// bytes come first (the caller asks the kernel).
bool receive_first(int fd, uint64_t inode, const iovec* iov, size_t cnt, int flags, ssize_t& out,
                   ssize_t (*kernel_recvmsg)(int, msghdr*, int));
// True when a receive on `inode` would be served by before_kernel now (a poll
// or epoll reports the socket readable for it).
bool first_pending(uint64_t inode);
// Whether this process keeps an entry for `inode`, its bytes read or not.
bool known(uint64_t inode);
// Kept bytes of `inode` not yet read: FIONREAD counts them, as TCP counts what
// its receive queue holds.
size_t unread_bytes(uint64_t inode);
// The sockets this process keeps bytes for, read or not (a close_range looks
// for their last descriptors).
std::vector<uint64_t> known_inodes();
// This process closed its last descriptor of socket `inode`: its kept bytes
// (its mapping; a process that shares the memfd keeps its own) are no one's
// here, and a later socket that gets the same inode number must not find them.
void drop(uint64_t inode);
// This process's last descriptor `fd` of socket `inode` is about to close:
// with kept bytes unread and no other process holding the socket, the close
// is made a RST (SO_LINGER 0), as TCP's close with bytes unread; then drop.
void closing_last(int fd, uint64_t inode);
// The memfd holding `inode`'s bytes (owned by the registry), -1 if none.
int memfd_of(uint64_t inode);
// A received fd that is a kept-bytes memfd of a shim: its socket's inode, else 0.
uint64_t memfd_inode(int fd);
// Takes over a memfd received with its socket `inode` (SCM_RIGHTS) or
// inherited (exec): checks it (a safe memfd of this user or root, its header
// written for that socket), maps and registers it; refused with a log line.
// Closes `fd` either way.
bool adopt(int fd, uint64_t inode);
// Every memfd with unread bytes, for an exec: "fd,fd,...", empty if none; the
// fds are made inheritable.
std::string for_exec();
// At load: adopts the memfds an exec named in RDMASOCK_LEFTOVER.
void adopt_from_env();

}  // namespace rdmasock::leftover
