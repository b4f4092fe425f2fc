// The shim's own fds: doorbell eventfds, an exposed epoll set's eventfd, a
// connection's private socket fd, side-channel sockets, the statistics page.
//
// The application never opened them, so what it does to fd numbers must not
// reach them: a daemon's closefrom(3), a loop that closes every number but its
// socket, close_range in a child. Before, such a program closed a connection's
// doorbells; its next open got the same number and the shim then wrote its
// 8-byte wake-ups into the program's file and slept on it. So:
// - long-lived ones live at high numbers (adopt_own_fd / dup_own_fd): the
//   program's next open, and its dup2 onto 0..2 or a shell's 3..9, find the
//   numbers they expect, as without the shim;
// - they are marked, and the close interposers answer for a marked number as
//   the kernel would for a number never opened (close: EBADF; close_range and
//   closefrom pass over it);
// - close_own_fd closes with the raw system call, then unmarks (a close of
//   that number by the program in between waits it out: the number may be its
//   next open's by then, and must not answer EBADF). Not libc's close: it
//   is a cancellation point, and these closes run in destructors (a
//   transport's), where a pending pthread_cancel unwinding the thread ends the
//   program (std::terminate). errno is kept by all of these.
#pragma once

#include <vector>

namespace rdmasock {

// Marks `fd` as the shim's, moved to a high number when one is free (the
// original number is closed); returns the number to use. -1 stays -1.
int adopt_own_fd(int fd);
// A new, marked, close-on-exec duplicate of `fd` at a high number; -1 on failure.
int dup_own_fd(int fd);
// Marks `fd` where it is (no move: moving closes the old number, and a close
// of a file a stranger handed us may block; fd_reaper.hpp).
void mark_own_fd(int fd);
// Unmarks without closing (the number's owner is about to close it itself).
void unmark_own_fd(int fd);
bool is_own_fd(int fd);
// How many numbers are the shim's now (fd_budget.hpp).
int own_fd_count();
// The marked numbers in [first, last], in order.
std::vector<int> own_fds_in(unsigned first, unsigned last);
void close_own_fd(int fd);

}  // namespace rdmasock
