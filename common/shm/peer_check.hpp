// Who may join a same-host connection: only the process at the other end of it.
//
// The kernel knows every TCP socket by its address pair. sock_diag answers, for
// the pair (local, remote) of our connection seen from the peer's side, the
// inode and owner uid of the peer's socket. A side-channel message carries its
// sender's pid and uid, verified by the kernel (SCM_CREDENTIALS), and the fd
// number the sender claims for its socket. The sender is the peer when:
//   - its uid is the uid that owns the peer socket, and
//   - /proc/<pid>/fd/<claimed fd> is that very socket, whenever we may look
//     (same user, or root); a process of another user can only be checked by uid,
//     and the uid check already excludes everyone but that user and root, who
//     could take over the peer process anyway.
// docs/protocol.md gives the whole argument.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace rdmasock::peer_check {

struct SocketId {
    uint64_t inode = 0;
    uid_t uid = static_cast<uid_t>(-1);
};

// The TCP socket whose local address is `src` and remote address is `dst` (both
// AF_INET or AF_INET6), by sock_diag. False with `err` when there is none, or
// when it has no inode: an orphan (closed: FIN_WAIT, TIME_WAIT...), or a
// connection still in its listener's accept queue, which no process holds yet
// (`*queued` true then: the server may still accept it).
bool find_socket(const sockaddr_storage& src, const sockaddr_storage& dst, SocketId& out, std::string& err,
                 bool* queued = nullptr);
// Our own socket's inode (fstat).
uint64_t inode_of(int fd);
// Whether the process (pid, uid) claiming fd `claimed_fd` holds socket `expected`.
// `same_user_only`: refuse peers of another uid than ours.
bool holds(pid_t pid, uid_t uid, int claimed_fd, const SocketId& expected, bool same_user_only, std::string& why);
// Whether process `pid` has socket `inode` open at any fd number (/proc/PID/fd):
// a process of our own end (a fork, an fd passed by SCM_RIGHTS). False when we
// may not look (another user's process) or it has none.
bool holds_socket(pid_t pid, uint64_t inode);
// Whether no other process has socket `inode` open (every /proc/PID/fd we may
// read; a process of our own user whose table we may not read counts as a
// holder). A scan of every process: for a hand-over that would otherwise wait.
bool held_only_here(uint64_t inode);
// How many of this process's descriptors name socket `inode`: 0, 1, or 2 for
// two or more; -1 when /proc cannot be read.
int descriptors_here(uint64_t inode);
// For a close of the numbers [first, last]: how many of this process's
// descriptors of socket `inode` stay open (0, 1, or 2 for more; -1 when /proc
// cannot be read), and in *inside one that the close takes (-1 if none).
int descriptors_left_after(uint64_t inode, unsigned first, unsigned last, int* inside);
// Whether process `pid` has this shim loaded (/proc/PID/maps names librdmasock).
// False when we may not look (another user's process).
bool loads_shim(pid_t pid);
// Whether process `pid` can read kept bytes (leftover.hpp) of a socket passed
// to it: it loads the shim, and its program is not one whose runtime reads
// around libc (a Go program, sys/exec_image.hpp).
bool serves_kept_bytes(pid_t pid);

}  // namespace rdmasock::peer_check
