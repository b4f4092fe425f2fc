// Doorbells of the shared-memory transport (docs/waiting.md, "Doorbells a peer
// cannot block"). A peer is not trusted: it may be another user, and whatever
// file it shares with us it can fcntl (clear O_NONBLOCK), fill or shut. So:
// - each side creates the doorbell it sleeps on: a Unix stream socket pair.
//   The sleep end never leaves this process (the peer cannot steal our
//   wake-ups); the ring end goes to the peer, and we keep it too, to wake our
//   own sleepers (wake_self: shutdown from another thread) through the same fd;
// - every operation is non-blocking per call, whatever the file's flags:
//   send with MSG_DONTWAIT | MSG_NOSIGNAL (a full queue means a wake-up is
//   pending anyway; a shut or closed end costs no SIGPIPE), recv with
//   MSG_DONTWAIT, a bounded number of reads per drain (a peer ringing
//   non-stop cannot keep us there);
// - there is no counter to saturate (an eventfd's write sleeps at 2^64-2);
// - the peer's exit closes nothing of ours: we hold both ends of our pair, so
//   our sleep end never reads EOF unless the peer shut the shared ring end on
//   purpose, which drain() reports: the transport then fails (the connection
//   leaves the rings) and renews its pair, so no wait keeps waking on that EOF.
// The server's ring end travels with CONFIRM (the client's side channel takes
// fds only once it has authenticated the OFFER), the client's with ACCEPT.
#pragma once

#include <cstdint>

namespace rdmasock::shm_doorbell {

// The pair this side sleeps on: `sleep_end` stays here, `ring_end` is ours
// and the peer's. Both close-on-exec, nonblocking. False with errno.
bool create(int& sleep_end, int& ring_end);
// Whether `fd`, received from the peer, is what create() makes for a ring end:
// a connected Unix stream socket (not a listener, not a pipe or a TCP socket
// of someone else's that our rings would write into).
bool is_ring_end(int fd);
// One wake-up; never sleeps, never signals. errno kept.
void ring(int ring_end);
// Takes pending wake-ups (a bounded number of reads). False: the sleep end
// reads EOF (the peer shut the ring end it shares with us). errno kept.
bool drain(int sleep_end);
// Closes of our fds that never run a peer-queued file's last close here: the
// sleep end (fds refused since create(), else shut and closed where it cannot
// block), the peer's ring end (its queue is the peer's to fill). Our own ring
// end's queue is never written: a plain close_own_fd.
void close_sleep_end(int fd);
void close_peer_ring(int fd);
// After drain() said EOF: a fresh pair of ours under the same two fd numbers
// (epoll sets and sleepers keep their numbers), which the peer no longer
// holds. errno kept.
void renew(int sleep_end, int self_ring);

// The client's side of CONFIRM: one byte `tag` with exactly one fd that
// is_ring_end(). waiting: nothing queued yet; refused: anything else (the
// channel closed, a malformed message); done: `ring_end` is ours (close-on-exec).
// `shared`: another process may hold the channel too (we forked since ACCEPT):
// the message is peeked and left for it (MSG_PEEK brings each its own copy of
// the fd); the channel's close then goes to fd_reaper (a file is queued).
enum class Confirm { waiting, done, refused };
Confirm receive_ring_end(int chan, uint8_t tag, int& ring_end, bool shared = false);

}  // namespace rdmasock::shm_doorbell
