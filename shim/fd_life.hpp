// Keeps the fd table exact when fds are closed, duplicated or replaced: every
// fd of one socket shares one Socket, the last close ends its stream, and a
// number that stops naming the socket stops being used by the shim at once.
#pragma once

namespace rdmasock::shim {

// `fd` is about to stop naming its socket (close, dup2 over it, close_range,
// fclose): drop its entry before the kernel frees the number. Safe for any fd.
// for_close: the caller (close, fclose, dup2/dup3 over it, close_range, closefrom)
// calls FdTable::closed(fd) once the kernel's call returned; until then data calls
// on the number answer EBADF (FdTable::take).
void forget_fd(int fd, bool for_close = false);
// The kernel has just handed out `fd` (socket, accept, dup, epoll_create): an
// entry still under that number is a socket closed where the shim could not
// see it. Its connection lets go of the number, then it is forgotten as at a
// close. Safe for any fd, and for -1.
void forget_stale_fd(int fd);
// `newfd` (a dup of `oldfd`, or a failure < 0) now names oldfd's socket too.
int track_dup(int oldfd, int newfd);
// dup2/dup3 over `newfd` (a tracked socket, an epoll set, a set's eventfd):
// forget it first, unless the call will fail anyway (oldfd not open), which
// must leave newfd as it is.
void before_replace(int oldfd, int newfd);
// A close of the numbers [first, last] (close, dup2/dup3 over a number,
// close_range, closefrom) is about to take the last descriptor here of a plain
// socket with kept bytes (leftover.hpp: an exec'd image's, an SCM_RIGHTS
// receiver's): leftover::closing_last (a RST when they are unread, as TCP's
// close). A tracked connection does this at its own last close.
void closing_kept(unsigned first, unsigned last);
// A vfork child about to dup2 a socket / close a range: hand the sockets it
// keeps back to TCP first (interpose_handover.cpp).
void vfork_child_dup(int oldfd);
void vfork_child_closing(unsigned first, unsigned last);

}  // namespace rdmasock::shim
