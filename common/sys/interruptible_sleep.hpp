// The kernel sleep of a wait, entered only while no signal handler has run
// since the wait began (signal_seen.hpp).
//
// A wait looks at its rings, arms, looks again, then sleeps in the kernel. A
// signal whose handler runs anywhere before the sleep's system call would be
// lost to it: TCP, asleep in the kernel the whole time, would have returned
// EINTR. The spin checks the thread's delivery count between its looks; the
// last instructions before the system call are covered the way musl and
// glibc cover their cancellation points: a small assembly stub compares the
// count and enters the kernel, and the trampoline, when it interrupted the
// stub between the two, moves it to a return of -EINTR instead. A signal that
// comes once the thread is in the kernel ends the sleep with EINTR there.
//
// Both take the application's signal mask where its call had one (ppoll,
// pselect, epoll_pwait). -1 with errno, as the libc calls.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>

#include <cstdint>

#include "sys/signal_seen.hpp"

namespace rdmasock::sleep {

// ppoll; timeout_us < 0 waits forever.
int poll(pollfd* fds, nfds_t n, int64_t timeout_us, const sigset_t* mask, const signals::Seen& since);
// epoll_pwait; timeout_ms < 0 waits forever.
int epoll_wait(int epfd, epoll_event* events, int max, int timeout_ms, const sigset_t* mask,
               const signals::Seen& since);

// From the trampoline, with the interrupted context: a thread between the
// stub's look and its system call returns -EINTR instead of sleeping.
void cancel_entry(void* ucontext);

}  // namespace rdmasock::sleep
