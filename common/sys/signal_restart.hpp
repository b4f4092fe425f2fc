// Whether a blocking socket call that a signal handler interrupted restarts.
//
// The kernel restarts recv/send after a handler installed with SA_RESTART, and
// fails them with EINTR otherwise, or whenever the socket has a timeout for
// that direction (SO_RCVTIMEO/SO_SNDTIMEO; signal(7)). The shim's trampoline
// (signal_seen.hpp) counts the handlers that ran and those without SA_RESTART,
// so a wait knows exactly. Where no counted handler ran (one installed past
// the interposers, with a raw system call) the shim cannot tell which signal
// arrived, so the call restarts only when every installed handler has
// SA_RESTART: a program that relies on EINTR (Python's KeyboardInterrupt,
// alarm() timeouts) gets it.
#pragma once

#include "sys/signal_seen.hpp"

namespace rdmasock {

// A wait that began at `since` ended with EINTR.
bool signal_restarts_call(const signals::Seen& since, bool socket_has_timeout);

// Without a count: from the handlers installed now.
bool signal_restarts_call(bool socket_has_timeout);

}  // namespace rdmasock
