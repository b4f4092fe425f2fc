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

// Who may put fds in our queue. A side-channel socket is made with SO_PASSRIGHTS
// off (Linux 6.16+; a listener's connections inherit it): a stranger's
// SCM_RIGHTS then fails in its own sendmsg and nothing of it ever reaches us.
// Only the server turns it on, for the ACCEPT, once it knows who listens.
// Without the option every close of ours goes through close_channel.

// Listens (nonblocking, close-on-exec) on the name of TCP socket inode `ino`;
// -1 when the name is taken or sockets are exhausted. `fds_refused`: whether the
// kernel refuses fds to it (and to every connection it accepts).
int listen_for(uint64_t ino, bool& fds_refused, bool may_refuse = true);
// Connects (nonblocking) to the listener of TCP socket inode `ino`; -1 if none.
int connect_to(uint64_t ino, bool& fds_refused, bool may_refuse = true);
// Accepts one pending peer on a listener without blocking; -1 when none.
int accept_peer(int listen_fd);
// SO_PASSRIGHTS on or off; false when the kernel has no such option.
bool allow_fds(int fd, bool on);
// The kernel's credentials of the other end, taken when it connected (or, for
// the connecting side, when the listener called listen()): who it is, before
// anything it sent is read.
bool peer_credentials(int fd, pid_t& pid, uid_t& uid);

constexpr int kMaxFds = 4;
// The most fds one message can carry (the kernel's SCM_MAX_FD): every receive
// has room for all of them, so the kernel never drops the surplus itself (its
// drop is a close in our thread, and may block: fd_reaper.hpp).
constexpr int kKernelMaxFds = 253;

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
// `peek`: the message stays queued, and its fds come as new copies (the
// kernel's MSG_PEEK dups a message's files for each peek).
Received receive(int fd, void* buf, size_t len, bool peek = false);
// One message with up to kMaxFds fds; true when all of it was queued at once.
bool send(int fd, const void* buf, size_t len, const int* fds, int nfds);
// Closes every fd a message brought (discard_fd).
void close_fds(Received& r);
// Closes an fd a peer handed us: here when its close cannot block (a memfd,
// an eventfd, a pipe), else on the shim's own thread (fd_reaper.hpp).
void discard_fd(int fd);
// Closes a side-channel socket of ours. `may_hold_fds`: fds were not refused to
// it all its life. Then: shut it (nothing more can be queued), and close it here
// only if its queue is empty (a queued file's last reference would be dropped
// by our close); else on the shim's own thread.
void close_channel(int fd, bool may_hold_fds);
// A listener: shut it (no more connections), take each pending connection and
// close it as above, then close the listener itself.
void close_listener(int fd, bool may_hold_fds);

}  // namespace rdmasock::side_channel
