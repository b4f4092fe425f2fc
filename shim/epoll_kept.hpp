// epoll for plain sockets whose next bytes are kept in this process
// (leftover.hpp, Order::before_kernel: claimed from a writer that did not
// answer at a hand-over). The kernel has nothing to report for them, so their
// interests are remembered here and reported readable until the kept bytes
// are read. Only sockets that owed kept bytes when they were added (an exec'd
// image adds its inherited socket after load) are remembered.
#pragma once

#include <sys/epoll.h>

namespace rdmasock::shim {

// Whether anything is remembered (a relaxed load).
bool epoll_kept_any();
// epoll_ctl of an fd the shim does not carry, after the kernel accepted it.
void epoll_kept_ctl(int epfd, int op, int fd, const epoll_event* ev);
// The remembered interests of `epfd` whose socket still owes kept bytes, as
// events into `out` (at most `max`); interests that owe nothing are dropped.
int epoll_kept_ready(int epfd, epoll_event* out, int max);
// close of `fd`: a socket's interests, or a set's.
void epoll_kept_forget(int fd);

}  // namespace rdmasock::shim
