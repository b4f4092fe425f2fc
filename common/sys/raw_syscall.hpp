// The shim's own system calls. The shim interposes libc's syscall() (a program
// that closes its sockets with syscall(SYS_close), as libuv does, must be
// seen: shim/interpose_syscall.cpp), so its own raw calls (closing its own
// fds, fcntl on fds it hides) must not go through that function: they are
// made here, with libc's convention (-1 and errno on failure). Async-signal-
// and vfork-safe: no lookup, no lock.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace rdmasock {

template <class... Args>
inline long raw_syscall(long n, Args... args) {
    static_assert(sizeof...(Args) <= 6, "a system call takes at most six arguments");
#if defined(__x86_64__)
    long a[6] = {(long)args...};
    register long r10 __asm__("r10") = a[3];
    register long r8 __asm__("r8") = a[4];
    register long r9 __asm__("r9") = a[5];
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a[0]), "S"(a[1]), "d"(a[2]), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    if (ret < 0 && ret > -4096) {
        errno = static_cast<int>(-ret);
        return -1;
    }
    return ret;
#else
    // Elsewhere libc's own: the interposer of syscall() is built for x86-64 only.
    return ::syscall(n, args...);
#endif
}

}  // namespace rdmasock
