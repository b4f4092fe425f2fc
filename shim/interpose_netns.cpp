// setns and unshare: the calls that move a thread to another network namespace.
// The rendezvous checks the thread's namespace against its socket's before every
// look-up (common/sys/netns.hpp) and keeps the thread's from one check to the
// next; after either call it is read again. (syscall(SYS_setns) and
// syscall(SYS_unshare) reach the same note: interpose_syscall.cpp.)
#include <sched.h>

#include "real_calls.hpp"
#include "sys/netns.hpp"

extern "C" {

int setns(int fd, int nstype) {
    static auto next = rdmasock::real::next<int (*)(int, int)>("setns");
    const int r = next(fd, nstype);
    rdmasock::netns::thread_moved();  // even on failure: what it did is the kernel's to say
    return r;
}

int unshare(int flags) {
    static auto next = rdmasock::real::next<int (*)(int)>("unshare");
    const int r = next(flags);
    rdmasock::netns::thread_moved();
    return r;
}

}  // extern "C"
