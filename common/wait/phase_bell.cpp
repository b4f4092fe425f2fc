#include "wait/phase_bell.hpp"

#include <sys/eventfd.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstdint>

#include "sys/own_fd.hpp"
#include "sys/process_id.hpp"
#include "sys/raw_syscall.hpp"

namespace rdmasock::bell {

namespace {

struct ThreadBell {
    int fd = -1;
    uint64_t gen = 0;  // fork_generation() when made: a child's copy is its parent's eventfd
    ~ThreadBell() {
        if (fd >= 0 && gen == fork_generation()) close_own_fd(fd);
    }
};

thread_local ThreadBell t_bell;

}  // namespace

int make_bell() {
    const int saved = errno;
    int fd = adopt_own_fd(static_cast<int>(raw_syscall(SYS_eventfd2, 0, EFD_NONBLOCK | EFD_CLOEXEC)));
    errno = saved;
    return fd;
}

int thread_bell() {
    ThreadBell& b = t_bell;
    if (b.fd >= 0 && b.gen == fork_generation()) return b.fd;
    // The copy a fork left us shares the parent thread's eventfd: a ring of ours
    // would wake it, its drain would take ours.
    if (b.fd >= 0) close_own_fd(b.fd);
    b.fd = make_bell();
    b.gen = fork_generation();
    return b.fd;
}

void ring(int bell) {
    const int saved = errno;
    uint64_t one = 1;
    raw_syscall(SYS_write, bell, &one, sizeof one);
    errno = saved;
}

void drain(int bell) {
    const int saved = errno;
    uint64_t v;
    raw_syscall(SYS_read, bell, &v, sizeof v);
    errno = saved;
}

}  // namespace rdmasock::bell
