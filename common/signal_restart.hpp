// Whether a blocking socket call that a signal handler interrupted restarts.
//
// The kernel restarts recv/send after a handler installed with SA_RESTART, and
// fails them with EINTR otherwise, or whenever the socket has a timeout for
// that direction (SO_RCVTIMEO/SO_SNDTIMEO; signal(7)). A shim sleeping in
// poll() gets EINTR either way and cannot tell which signal arrived, so the
// call restarts only when every installed handler has SA_RESTART: a program
// that relies on EINTR (Python's KeyboardInterrupt, alarm() timeouts) gets it.
#pragma once

namespace rdmasock {

bool signal_restarts_call(bool socket_has_timeout);

}  // namespace rdmasock
