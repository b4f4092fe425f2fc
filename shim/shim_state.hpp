// Process-wide shim state: configuration, statistics, fork bookkeeping.
#pragma once

#include <cerrno>

#include <memory>

#include "base/config.hpp"
#include "fd_table.hpp"

namespace rdmasock::shim {

const Config& config();
// Ends one fd's reference to a socket: after the last one, and the last call
// in progress on it, the stream ends and the statistics line is printed
// (Socket::release). `now` (at exit): without waiting for calls in progress.
// Drops one fd's reference; true when it was the socket's last (the decrement
// decides: two closes of dup'd fds at once cannot both see "not the last").
bool release_socket(const std::shared_ptr<Socket>& s, bool now = false);
void print_stats(const Socket& s);
// A vfork child (or a posix_spawn/clone child sharing our memory) runs in the
// parent's memory until it execs: it must not change the shim's tables. Only
// fork() refreshes the cached pid (pthread_atfork), so a pid that differs from
// the cache is such a child. Costs a getpid() syscall: only for calls that
// would change the fd table.
bool in_vfork_child();

// The program does I/O the interposers never see (it set up an io_uring):
// every tracked connection goes back to TCP now, and none leaves it from then
// on (interpose_uring.cpp). `why` names it in the statistics line.
void keep_every_connection_on_tcp(const char* why);
// The reason above, or null while there is none.
const char* process_on_tcp_reason();
// The program asks for an io_uring (liburing, or syscall(SYS_io_uring_setup)).
void io_uring_requested();
// A descriptor-making call of the program failed with EMFILE: rendezvous that
// made no rings give their side-channel sockets back (common/sys/fd_budget.hpp).
// True when some did: the call is worth making again.
bool give_back_fds();
// `call` once, and once more if it failed with EMFILE and give_back_fds() freed some.
template <class Call>
int again_if_table_full(Call call) {
    int fd = call();
    if (fd < 0 && errno == EMFILE && give_back_fds()) fd = call();
    return fd;
}

}  // namespace rdmasock::shim
