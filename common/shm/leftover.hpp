// Bytes a connection's peer left in our receive ring when it was already gone
// at a hand-over (docs/protocol.md, "Downgrade", "A writer that is gone").
//
// Only a writer can put bytes on its TCP socket again, and this one closed or
// died: the receiver takes what the ring holds itself and keeps it here, in a
// sealed memfd, for whoever reads the socket next. The kernel socket then holds
// the peer's last TCP bytes (those before the switch) and its FIN (or RST), and
// the stream is: the kernel's bytes, these, then the kernel's end. So a receive
// on the socket asks the kernel first and, where the kernel says end of stream
// (or reports the peer's reset), serves these bytes before that end.
//
// The memfd travels with the socket: a forked child shares the mapping (and the
// consumed count in it, as two processes share a kernel receive queue), an
// SCM_RIGHTS message carries it beside the socket (the receiver's shim takes it
// out of the message), an exec names it in RDMASOCK_LEFTOVER.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rdmasock::leftover {

// True while any kept bytes of this process are unread (one relaxed load).
bool any();
// Keeps `len` bytes for the socket with inode `inode`. False on failure (the
// caller resets the connection loudly, as before).
bool keep(uint64_t inode, const void* data, size_t len);
// The socket inode of `fd`, 0 if none.
uint64_t inode_of(int fd);
// True when `inode` has unread kept bytes.
bool pending(uint64_t inode);
// After the kernel answered a receive on socket `inode` with `r` (errno `err`
// when r < 0): a receive of kept bytes where the kernel said end of stream or
// reported the peer's reset (which is then owed after them), else `r` itself
// with errno restored. Only for a receive of at least one byte.
ssize_t after_kernel(uint64_t inode, const iovec* iov, int cnt, int flags, ssize_t r, int err);
// The memfd holding `inode`'s bytes (owned by the registry), -1 if none.
int memfd_of(uint64_t inode);
// A received fd that is a kept-bytes memfd of a shim: its socket's inode, else 0.
uint64_t memfd_inode(int fd);
// Takes over a memfd received with its socket (SCM_RIGHTS) or inherited
// (exec): maps and registers it. Closes `fd` either way.
bool adopt(int fd);
// Every memfd with unread bytes, for an exec: "fd,fd,...", empty if none; the
// fds are made inheritable.
std::string for_exec();
// At load: adopts the memfds an exec named in RDMASOCK_LEFTOVER.
void adopt_from_env();

}  // namespace rdmasock::leftover
