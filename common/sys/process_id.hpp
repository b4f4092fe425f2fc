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

}  // namespace rdmasock
