// epoll interposers: thin wrappers over the emulation in epoll_sets.cpp.
#include "epoll_sets.hpp"

extern "C" {

int epoll_ctl(int epfd, int op, int fd, epoll_event* ev) { return rdmasock::shim::epoll_ctl_impl(epfd, op, fd, ev); }

int epoll_wait(int epfd, epoll_event* events, int max, int timeout) {
    return rdmasock::shim::epoll_wait_impl(epfd, events, max, timeout, nullptr);
}

int epoll_pwait(int epfd, epoll_event* events, int max, int timeout, const sigset_t* mask) {
    return rdmasock::shim::epoll_wait_impl(epfd, events, max, timeout, mask);
}

}  // extern "C"
