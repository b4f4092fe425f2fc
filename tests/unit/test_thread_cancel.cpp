// pthread_cancel reaching a shim sleep (thread_cancel.hpp): the request ends
// the sleep, which a cancellation point then acts on; with cancellation
// disabled the sleep goes on and says nothing. The unit binary has no
// interposer, so each test calls requested() after libc's pthread_cancel as
// the shim's pthread_cancel does.
#include <catch2/catch.hpp>

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "sys/interruptible_sleep.hpp"
#include "sys/signal_restart.hpp"
#include "sys/thread_cancel.hpp"

using namespace rdmasock;

namespace {

// A cancelled thread's frames are unwound by glibc's forced unwind, which
// AddressSanitizer does not see: their stack poisoning would stay behind and
// fail the thread's own teardown. A cleanup handler clears it, as ASan does
// for a C++ throw (the unit tests also run under ASan: scripts/run-tests --asan).
void forget_stack(void*) {
#if defined(__SANITIZE_ADDRESS__)
    __asan_handle_no_return();
#endif
}

struct Sleeper {
    int fd;                      // never readable unless written
    std::atomic<int> state{0};   // 1: sleeping, 2: returned from its loop
    int last_rc = -2;
    int last_errno = 0;
    bool disable = false;
};

// A blocking call's shape (the shim's recv): one span, a sleep until
// readable, the way out; restarted when nothing was said.
void* sleeper(void* arg) {
    pthread_cleanup_push(forget_stack, nullptr);
    auto* s = static_cast<Sleeper*>(arg);
    if (s->disable) pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
    s->state.store(1);
    for (;;) {
        cancel::Span span;
        pollfd p{s->fd, POLLIN, 0};
        const signals::Seen since = signals::seen();
        int rc = sleep::poll(&p, 1, -1, nullptr, since);
        s->last_rc = rc;
        s->last_errno = rc < 0 ? errno : 0;
        const bool again = rc == 0 || (rc < 0 && signal_restarts_call(since, false));
        span.leave(rc);
        if (!again) break;
    }
    s->state.store(2);
    pthread_cleanup_pop(0);
    return nullptr;
}

void cancel_thread(pthread_t t) {
    REQUIRE(pthread_cancel(t) == 0);
    cancel::requested(t);
}

}  // namespace

TEST_CASE("a request ends a shim sleep and the thread is cancelled on its way out", "[cancel]") {
    int p[2];
    REQUIRE(pipe(p) == 0);
    Sleeper s{p[0]};
    pthread_t t;
    REQUIRE(pthread_create(&t, nullptr, sleeper, &s) == 0);
    while (s.state.load() == 0) usleep(1000);
    usleep(50000);
    cancel_thread(t);
    void* rv = nullptr;
    REQUIRE(pthread_join(t, &rv) == 0);
    CHECK(rv == PTHREAD_CANCELED);
    CHECK(s.state.load() == 1);
    CHECK(cancel::any());
    close(p[0]);
    close(p[1]);
}

TEST_CASE("with cancellation disabled the request leaves the sleep alone", "[cancel]") {
    int p[2];
    REQUIRE(pipe(p) == 0);
    Sleeper s{p[0]};
    s.disable = true;
    pthread_t t;
    REQUIRE(pthread_create(&t, nullptr, sleeper, &s) == 0);
    while (s.state.load() == 0) usleep(1000);
    usleep(50000);
    cancel_thread(t);
    usleep(150000);  // several capped naps and the SIGCANCEL wake-up: none ends the wait
    CHECK(s.state.load() == 1);
    REQUIRE(write(p[1], "x", 1) == 1);
    void* rv = nullptr;
    REQUIRE(pthread_join(t, &rv) == 0);
    CHECK(rv != PTHREAD_CANCELED);
    CHECK(s.last_rc == 1);
    close(p[0]);
    close(p[1]);
}

TEST_CASE("a thread already asked does not begin its sleep", "[cancel]") {
    struct Asked {
        int rc = 0, err = 0;
        bool pending = false;
        std::atomic<bool> go{false};
    } a;
    pthread_t t;
    REQUIRE(pthread_create(&t, nullptr, [](void* arg) -> void* {
        auto* a = static_cast<Asked*>(arg);
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
        cancel::point();  // a call's entry: the thread is listed (and not cancelled: disabled)
        while (!a->go.load()) usleep(1000);
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);
        a->pending = cancel::pending();
        pollfd none{-1, 0, 0};
        a->rc = sleep::poll(&none, 1, -1, nullptr, signals::seen());
        a->err = errno;
        return nullptr;  // (no cancellation point: the thread returns)
    }, &a) == 0);
    usleep(20000);
    cancel_thread(t);
    a.go.store(true);
    void* rv = nullptr;
    REQUIRE(pthread_join(t, &rv) == 0);
    CHECK(a.pending);
    CHECK(a.rc == -1);
    CHECK(a.err == EINTR);
}

TEST_CASE("a shield keeps a pending request from acting inside, and nests", "[cancel]") {
    struct Shielded {
        bool returned_from_inner = false;
        bool returned_from_outer = false;
        std::atomic<bool> go{false};
    } s;
    pthread_t t;
    REQUIRE(pthread_create(&t, nullptr, [](void* arg) -> void* {
        auto* s = static_cast<Shielded*>(arg);
        pthread_cleanup_push(forget_stack, nullptr);
        // usleep is a cancellation point: the request, sent meanwhile, waits
        // (it acted here whenever it came before `go`, as under ThreadSanitizer).
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
        while (!s->go.load()) usleep(1000);
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);
        {
            cancel::Shield outer;
            {
                cancel::Shield inner;
                pthread_testcancel();  // a libc cancellation point inside: not acted on
                usleep(1000);
            }
            s->returned_from_inner = true;
            pthread_testcancel();  // still inside the outer one
            s->returned_from_outer = true;
        }
        pthread_testcancel();  // the application's next cancellation point
        pthread_cleanup_pop(0);
        return nullptr;
    }, &s) == 0);
    REQUIRE(pthread_cancel(t) == 0);
    s.go.store(true);
    void* rv = nullptr;
    REQUIRE(pthread_join(t, &rv) == 0);
    CHECK(s.returned_from_inner);
    CHECK(s.returned_from_outer);
    CHECK(rv == PTHREAD_CANCELED);
}
