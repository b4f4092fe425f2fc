// The readiness engine behind poll, ppoll, select and pselect: ring readiness
// for shimmed fds, kernel readiness for everything else, spin-then-sleep.
#pragma once

#include <poll.h>
#include <signal.h>

#include <cstdint>

namespace rdmasock::shim {

// True when any fd of the set is a shimmed connection not on plain TCP, or an
// emulated epoll set (its fd must be exposed before the kernel looks at it).
bool any_shimmed(const pollfd* fds, nfds_t n);
// poll semantics; timeout_us < 0 waits forever; `mask` as for ppoll (may be null).
int poll_engine(pollfd* fds, nfds_t n, int64_t timeout_us, const sigset_t* mask);

int64_t now_us();

}  // namespace rdmasock::shim
