// epoll emulation for shimmed sockets.
//
// Every TCP socket the shim tracks is registered with the kernel under a tagged
// data word (kTag | fd); the application's own data word is kept here. A socket
// on plain TCP (or not yet connected) is registered with the app's events
// verbatim and its kernel events are passed through with the app's data. A
// connection that is negotiating or upgraded is registered level-triggered for
// what its phase needs (the doorbell stream, a handshake reply) and its
// readiness comes from the rings, with LT, EPOLLET, EPOLLONESHOT and EPOLLRDHUP
// emulated here.
//
// At scale: a ring-driven connection is "hot" (looked at by every wait) while
// it has traffic, and "cold" once idle: armed, its doorbell drain owned by the
// set, and looked at again only when the kernel reports its eventfd or TCP
// socket. So epoll_wait over 10,000 idle connections costs what the ready ones
// cost (docs/waiting.md). One still on TCP whose move to the rings rings the
// set's bell is looked at by no wait until it moves: a set of such connections
// waits as the kernel's set alone.
//
// Nesting: a set's fd watched through the kernel (poll/select on it, or a set
// that holds it) is "exposed" first, so that the kernel's readiness of that fd
// is true of its ring-driven members too (expose_set).
#pragma once

#include <signal.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cstdint>

#include "wait/wait_engine.hpp"  // wait::capped

namespace rdmasock {
struct Socket;
class Connection;
}

namespace rdmasock::shim {

// What exposing a set found (epoll_sets.cpp, "exposing a set").
struct Exposed {
    bool ready = false;         // a ring-driven member is ready now (the set's fd reads so)
    int64_t max_sleep_us = -1;  // >= 0: expose again by then (no doorbell reports something)
    void cap(int64_t us) { max_sleep_us = wait::capped(max_sleep_us, us); }
    void merge(const Exposed& o) {
        ready |= o.ready;
        if (o.max_sleep_us >= 0) cap(o.max_sleep_us);
    }
};

// epoll_create/epoll_create1 made `fd` (known to be a set if it is nested later).
void epoll_created(int fd);
int epoll_ctl_impl(int epfd, int op, int fd, epoll_event* ev);
// dup, dup2, dup3 or fcntl(F_DUPFD*) made `newfd` another number of `oldfd`'s
// epoll instance: one emulated set answers for both (tokio's mio registers
// through a dup and waits on the original). Nothing for other fds.
void epoll_dup(int oldfd, int newfd);
// Whether epfd names a set holding (or having held) a tracked socket.
bool epoll_emulated(int epfd);
// Whether any set is emulated at all (a cheap look, no lock).
bool epoll_any();
int epoll_wait_impl(int epfd, epoll_event* events, int max, int timeout_ms, const sigset_t* mask);
// Before a kernel wait that looks at the set's fd itself (poll or select on
// it): makes the kernel's readiness of that fd true of the ring-driven members.
// Nothing to do (ready false, no cap) when epfd names no emulated set.
Exposed expose_set(int epfd);
// After such a wait found epfd readable: whether it is for something the
// program would get (a member's doorbell may ring for bytes already read).
// Drains the doorbells that rang for nothing. True when epfd names no emulated set.
bool confirm_set_ready(int epfd);
// close() of an fd: drop the set it names, and (for a tracked socket) drop it
// from every set.
void epoll_forget(int fd, bool tracked_socket);
// A hand-over in a call on this connection (a forked child's first use,
// Connection::Unread::claim_when_sole) kept bytes that come before the
// kernel's: every set holding the socket reports it readable until they are
// read (epoll_kept.hpp), as the kernel reports bytes it queued.
void epoll_note_claimed(const Connection* conn);
// The last fd of a socket that was ever dup'd closed: its registrations may sit
// under another number (the kernel keys them by file, we by fd): drop them all.
void epoll_forget_socket(const Socket* sock);
// Around fork (pthread_atfork): the child walks the registry, so the prepare
// handler holds its locks (no other thread is halfway through changing a map
// then); the parent's handler lets them go. In the child (one thread) the
// sets' locks are nobody's, and every interest made so far is the parent's to undo.
void epoll_before_fork();
void epoll_after_fork_parent();
void epoll_after_fork_child();
// close_range/closefrom: drop every set named by an fd in [first, last] (their
// idle interests give back their arms and drains).
void epoll_forget_sets_in(unsigned first, unsigned last);

}  // namespace rdmasock::shim
