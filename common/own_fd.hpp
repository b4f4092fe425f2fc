// Closing one of the shim's own fds (eventfds, shared-memory segments, the
// side channel's sockets, registry files).
//
// The raw system call, not libc's close: libc's is a cancellation point, and
// these closes run in destructors (a transport's, when the last reference to
// a connection goes), where a pending pthread_cancel unwinding the thread ends
// the program (std::terminate); and it does not pass the shim's own close
// interposer, which knows nothing of these fds. errno is kept.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace rdmasock {

inline void close_own_fd(int fd) {
    const int saved = errno;
    syscall(SYS_close, fd);
    errno = saved;
}

}  // namespace rdmasock
