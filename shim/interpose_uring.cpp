// io_uring: a program that sets one up reads and writes its sockets through
// the kernel's rings, never through the calls the shim interposes, so a byte
// the shim carried in a ring would never reach it (and a byte it sent would
// land on the TCP stream behind the ring's). liburing makes its system calls
// itself, so the shim looks where a program asks liburing for a ring (these
// functions, found after the shim in lookup order like any libc call) and
// where it asks libc's syscall() for one (interpose_syscall.cpp): from then on
// every connection of the process goes back to TCP and stays there.
// Not seen: a program that makes the system call without libc or liburing's
// shared library (a static liburing, Go, Rust's io-uring crate), or that finds
// liburing through dlopen and dlsym.
#include <cerrno>

#include "errno_keep.hpp"
#include "real_calls.hpp"
#include "shim_state.hpp"

struct io_uring;
struct io_uring_params;

using rdmasock::real::next;

// Before the ring exists: nothing may be left in a ring of ours when the
// program's first io_uring read looks at the kernel socket.
void rdmasock::shim::io_uring_requested() {
    ErrnoKept kept;
    keep_every_connection_on_tcp("io_uring (its reads and writes bypass the shim)");
    kept(0);
}

extern "C" {

// liburing returns -errno from these.
int io_uring_queue_init(unsigned entries, io_uring* ring, unsigned flags) {
    rdmasock::shim::io_uring_requested();
    static auto real = next<int (*)(unsigned, io_uring*, unsigned)>("io_uring_queue_init");
    return real ? real(entries, ring, flags) : -ENOSYS;
}

int io_uring_queue_init_params(unsigned entries, io_uring* ring, io_uring_params* p) {
    rdmasock::shim::io_uring_requested();
    static auto real = next<int (*)(unsigned, io_uring*, io_uring_params*)>("io_uring_queue_init_params");
    return real ? real(entries, ring, p) : -ENOSYS;
}

int io_uring_queue_mmap(int fd, io_uring_params* p, io_uring* ring) {
    rdmasock::shim::io_uring_requested();
    static auto real = next<int (*)(int, io_uring_params*, io_uring*)>("io_uring_queue_mmap");
    return real ? real(fd, p, ring) : -ENOSYS;
}

int io_uring_setup(unsigned entries, io_uring_params* p) {
    rdmasock::shim::io_uring_requested();
    static auto real = next<int (*)(unsigned, io_uring_params*)>("io_uring_setup");
    return real ? real(entries, p) : -ENOSYS;
}

}  // extern "C"
