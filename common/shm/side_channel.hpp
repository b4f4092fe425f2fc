// The private side channel between the two shims of one same-host connection:
// a Unix stream socket, never the TCP stream.
//
// The client's shim listens on an abstract name derived from its TCP socket's
// inode, bound before the TCP connect, so the name exists before the server can
// know the connection. The server's shim finds that inode with sock_diag from the
// connection's address pair and connects. Names are only a rendezvous point:
// whoever holds one is checked against the TCP connection (peer_check.hpp)
// before anything is handed over. Every message carries the sender's kernel-
// verified credentials (SO_PASSCRED) and may carry fds (SCM_RIGHTS).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace rdmasock::side_channel {

// Listens (nonblocking, close-on-exec) on the name of TCP socket inode `ino`;
// -1 when the name is taken or sockets are exhausted.
int listen_for(uint64_t ino);
// Connects (nonblocking) to the listener of TCP socket inode `ino`; -1 if none.
int connect_to(uint64_t ino);
// Accepts one pending peer on a listener without blocking; -1 when none.
int accept_peer(int listen_fd);

constexpr int kMaxFds = 4;

struct Received {
    ssize_t bytes = -1;  // -1: nothing yet (EAGAIN) or error; 0: the peer closed
    int error = 0;       // errno of a failed receive (not EAGAIN)
    pid_t pid = 0;       // kernel-verified sender
    uid_t uid = static_cast<uid_t>(-1);
    int fds[kMaxFds] = {-1, -1, -1, -1};
    int nfds = 0;
    bool truncated = false;  // more bytes or fds than we asked for: a hostile peer
};

// One message, nonblocking. Received fds are close-on-exec; the caller owns them.
Received receive(int fd, void* buf, size_t len);
// One message with up to kMaxFds fds; true when all of it was queued at once.
bool send(int fd, const void* buf, size_t len, const int* fds, int nfds);
// Closes every fd a message brought.
void close_fds(Received& r);

}  // namespace rdmasock::side_channel
