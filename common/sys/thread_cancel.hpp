// pthread_cancel reaching a thread that sleeps in a shim wait.
//
// Over TCP a blocked recv, poll or epoll_wait is a cancellation point: glibc
// lets the request interrupt the system call and unwinds the thread. The
// shim's waits sleep in system calls of their own (interruptible_sleep.hpp),
// which glibc does not know: a deferred request only set a flag, and the
// thread slept on for good. Unwinding from inside a wait would leave its
// locks, arms and drains behind, so the request ends the wait instead and
// the thread is unwound on the interposer's way out:
//
//   request  pthread_cancel (interposed) marks the target's record `asked`
//            and, when the target sleeps in a shim wait, sends it glibc's own
//            SIGCANCEL, whose handler only notes the request (the thread is
//            in deferred mode) and ends the sleep with EINTR;
//   sleep    a thread asked, with its cancellation enabled, does not sleep:
//            EINTR, which signal_restarts_call() never restarts; a thread
//            asked with it disabled sleeps on, as glibc's call would;
//   point    the interposer, at its entry and on its way out with EINTR,
//            calls pthread_testcancel(): glibc unwinds the thread there.
//
// The request can land between a sleep's last look and its system call
// (SIGCANCEL's handler is glibc's, so the sleep stub cannot divert it): once a
// process has made a request, its shim sleeps last at most kNapAfterRequestUs
// before they look again.
#pragma once

#include <pthread.h>

#include <cerrno>
#include <cstdint>

namespace rdmasock::cancel {

constexpr int64_t kNapAfterRequestUs = 50000;

// From the pthread_cancel interposer, after libc's pthread_cancel succeeded.
void requested(pthread_t target);

// A request was made in this process (one relaxed load).
bool any();

// This thread was asked, and its cancellation is enabled now.
bool pending();

// A cancellation point: unwinds the thread if a request is pending and
// enabled (pthread_testcancel), else returns with errno untouched. Only where
// no shim lock is held and nothing is half done. It lists the thread first,
// so that a request made after this look finds it (a request made before is
// libc's to act on here).
void point();

// A cancellation point with no shim sleep behind it (close): acts on a request
// made in this process, before the call does anything, as libc's would.
inline void point_at_entry() {
    if (any()) point();
}

// One interposed call the shim carries (recv or send on the rings, the poll
// and epoll engines) is one cancellation point: the request acts at its
// entry, and on its way out when the call ended in EINTR (its wait ended for
// the request). In between, cancellation is disabled: libc calls the shim
// makes inside (a look at the TCP socket, a doorbell read, a close) must not
// unwind the thread halfway through a drain or an arm. The application's own
// state is kept for the sleep to consult.
class Span {
public:
    // act_at_entry false: the call already passed a cancellation point of
    // libc's and holds what it returned (events a kernel wait took).
    explicit Span(bool act_at_entry = true);
    ~Span() { restore(); }
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

    template <class T>
    T leave(T result) {
        restore();
        if (result < 0 && errno == EINTR) point();
        return result;
    }

private:
    void restore();
    int app_state_ = -1;  // the application's PTHREAD_CANCEL_* while the span is open, else -1
    int outer_ = -1;      // an enclosing span's
};

// Around a multi-step operation of the connection's own that may wait (a
// hand-over back to TCP, a close's end-of-stream, a shutdown's FIN): a
// pending request must not unwind the thread inside a libc call it makes
// (poll, usleep), halfway through. It acts at the application's next
// cancellation point. Nests; deferred cancellation only (asynchronous
// cancellation around socket calls is undefined).
class Shield {
public:
    Shield() { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_); }
    ~Shield() { pthread_setcancelstate(old_, nullptr); }
    Shield(const Shield&) = delete;
    Shield& operator=(const Shield&) = delete;

private:
    int old_ = PTHREAD_CANCEL_ENABLE;
};

// Around one kernel sleep of a shim wait (interruptible_sleep.cpp).
class Sleep {
public:
    explicit Sleep(int64_t timeout_us);
    ~Sleep();
    Sleep(const Sleep&) = delete;
    Sleep& operator=(const Sleep&) = delete;

    // Asked and enabled: the sleep must not begin (EINTR).
    bool skip() const { return skip_; }
    // The timeout to sleep with (capped once a request was made).
    int64_t timeout_us() const { return timeout_us_; }
    // The sleep ended with EINTR: true when only our SIGCANCEL ended it for a
    // thread that ignores the request now, a wake-up with nothing to say.
    bool only_a_request(bool handler_ran);

private:
    struct Record* rec_ = nullptr;
    int64_t timeout_us_;
    bool skip_ = false;
};

}  // namespace rdmasock::cancel
