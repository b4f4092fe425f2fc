// Which process this is, without a system call on the data path: getpid() is
// one (glibc caches nothing), and RDMA code asks on every wake-up whether its
// verbs objects belong to the caller. A forked child gets a fresh value from a
// pthread_atfork handler registered at first use (and from the shim's own).
#pragma once

#include <cstdint>

namespace rdmasock {

int current_pid();
void refresh_current_pid();
// Grows in a process each time it forks (pthread_atfork, parent side): a
// connection upgraded before the last fork may have a child holding its socket.
uint64_t fork_generation();
void note_fork();
// Grows before each fork (pthread_atfork, prepare side), so the child's copy
// has grown too. A connection that claimed a rendezvous at one value and sees
// another may have a copy in a child made before its rings existed: that copy
// goes on over TCP, so this side's sends must never switch to the ring. The
// parent-side count cannot tell: a thread of the parent may switch between the
// child's creation and the parent's handler (mt_fuzz's "bytes on the TCP stream
// after the switch" with a fork burst). A failed fork counts too (only caution).
uint64_t forks_begun();
void note_fork_begins();

}  // namespace rdmasock
