// The signal trampoline (signal_seen.hpp) and the sleep it can cancel
// (interruptible_sleep.hpp).
#include <catch2/catch.hpp>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "sys/interruptible_sleep.hpp"
#include "sys/signal_restart.hpp"
#include "sys/signal_seen.hpp"

using namespace rdmasock;

namespace {

volatile sig_atomic_t g_plain = 0;
volatile sig_atomic_t g_info_signo = 0;
void on_plain(int) { g_plain = g_plain + 1; }
void on_info(int sig, siginfo_t* si, void*) { g_info_signo = si ? si->si_signo : -sig; }

// Puts SIGUSR1's disposition back as the kernel had it, past the trampoline.
struct KeepUsr1 {
    struct sigaction old{};
    KeepUsr1() { sigaction(SIGUSR1, nullptr, &old); }
    ~KeepUsr1() { sigaction(SIGUSR1, &old, nullptr); }
};

struct sigaction handler_action(int flags) {
    struct sigaction sa{};
    sa.sa_handler = on_plain;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = flags;
    return sa;
}

}  // namespace

TEST_CASE("the trampoline counts a delivery and runs the application's handler") {
    KeepUsr1 keep;
    struct sigaction sa = handler_action(0);
    REQUIRE(signals::app_sigaction(SIGUSR1, &sa, nullptr) == 0);
    CHECK(signals::wrapped(SIGUSR1));

    const signals::Seen before = signals::seen();
    g_plain = 0;
    raise(SIGUSR1);
    CHECK(g_plain == 1);
    CHECK(signals::since(before));
    CHECK(signals::seen().delivered == before.delivered + 1);
    CHECK(signals::seen().interrupting == before.interrupting + 1);  // no SA_RESTART

    sa = handler_action(SA_RESTART);
    REQUIRE(signals::app_sigaction(SIGUSR1, &sa, nullptr) == 0);
    const signals::Seen again = signals::seen();
    raise(SIGUSR1);
    CHECK(g_plain == 2);
    CHECK(signals::seen().delivered == again.delivered + 1);
    CHECK(signals::seen().interrupting == again.interrupting);
    CHECK(signal_restarts_call(again, false));
    CHECK_FALSE(signal_restarts_call(again, true));  // a socket timeout: EINTR regardless
    CHECK_FALSE(signal_restarts_call(before, false));  // the one without SA_RESTART came after `before`
}

TEST_CASE("sigaction reads back the application's handler, not the trampoline") {
    KeepUsr1 keep;
    struct sigaction sa = handler_action(SA_RESTART | SA_NODEFER);
    sigaddset(&sa.sa_mask, SIGUSR2);
    REQUIRE(signals::app_sigaction(SIGUSR1, &sa, nullptr) == 0);
    struct sigaction back{};
    REQUIRE(signals::app_sigaction(SIGUSR1, nullptr, &back) == 0);
    CHECK(back.sa_handler == on_plain);
    CHECK_FALSE(back.sa_flags & SA_SIGINFO);
    CHECK(back.sa_flags & SA_RESTART);
    CHECK(back.sa_flags & SA_NODEFER);
    CHECK(sigismember(&back.sa_mask, SIGUSR2));

    struct sigaction info{};
    info.sa_sigaction = on_info;
    info.sa_flags = SA_SIGINFO;
    sigemptyset(&info.sa_mask);
    struct sigaction prev{};
    REQUIRE(signals::app_sigaction(SIGUSR1, &info, &prev) == 0);
    CHECK(prev.sa_handler == on_plain);  // the one replaced, as installed
    REQUIRE(signals::app_sigaction(SIGUSR1, nullptr, &back) == 0);
    CHECK(back.sa_sigaction == on_info);
    CHECK(back.sa_flags & SA_SIGINFO);
    g_info_signo = 0;
    raise(SIGUSR1);
    CHECK(g_info_signo == SIGUSR1);  // siginfo passed through

    struct sigaction ign{};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    REQUIRE(signals::app_sigaction(SIGUSR1, &ign, &prev) == 0);
    CHECK(prev.sa_sigaction == on_info);
    CHECK_FALSE(signals::wrapped(SIGUSR1));
    REQUIRE(signals::app_sigaction(SIGUSR1, nullptr, &back) == 0);
    CHECK(back.sa_handler == SIG_IGN);
}

TEST_CASE("SA_RESETHAND: after one delivery the disposition reads back as SIG_DFL") {
    KeepUsr1 keep;
    struct sigaction sa = handler_action(SA_RESETHAND);
    REQUIRE(signals::app_sigaction(SIGUSR1, &sa, nullptr) == 0);
    g_plain = 0;
    raise(SIGUSR1);
    CHECK(g_plain == 1);
    struct sigaction back{};
    REQUIRE(signals::app_sigaction(SIGUSR1, nullptr, &back) == 0);
    CHECK(back.sa_handler == SIG_DFL);
}

TEST_CASE("bad signals are refused as by sigaction, and the record stays as it was") {
    KeepUsr1 keep;
    struct sigaction sa = handler_action(0);
    errno = 0;
    CHECK(signals::app_sigaction(SIGKILL, &sa, nullptr) == -1);
    CHECK(errno == EINVAL);
    CHECK(signals::app_sigaction(0, &sa, nullptr) == -1);
    CHECK(signals::app_sigaction(NSIG + 5, &sa, nullptr) == -1);
}

TEST_CASE("the sleep is not entered once a handler ran since the wait began") {
    KeepUsr1 keep;
    struct sigaction sa = handler_action(SA_RESTART);
    REQUIRE(signals::app_sigaction(SIGUSR1, &sa, nullptr) == 0);
    int p[2];
    REQUIRE(pipe(p) == 0);
    pollfd fd{p[0], POLLIN, 0};

    signals::Seen since = signals::seen();
    CHECK(sleep::poll(&fd, 1, 1000, nullptr, since) == 0);  // nothing happened: a plain timeout
    raise(SIGUSR1);
    errno = 0;
    CHECK(sleep::poll(&fd, 1, -1, nullptr, since) == -1);  // forever, but a handler ran: at once
    CHECK(errno == EINTR);

    // A signal that comes while the thread sleeps ends the sleep too.
    std::atomic<bool> stop{false};
    const pthread_t self = pthread_self();
    since = signals::seen();
    std::thread kicker([&] {
        while (!stop.load()) {
            pthread_kill(self, SIGUSR1);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
    CHECK(sleep::poll(&fd, 1, -1, nullptr, since) == -1);
    CHECK(errno == EINTR);
    stop = true;
    kicker.join();
    close(p[0]);
    close(p[1]);
}

#if defined(__x86_64__)
extern "C" const char rdmasock_sleep_entry[], rdmasock_sleep_insn[], rdmasock_sleep_cancelled[];

TEST_CASE("a signal between the sleep's last look and its system call cancels the system call") {
    ucontext_t uc{};
    for (const char* ip : {rdmasock_sleep_entry, rdmasock_sleep_insn}) {
        uc.uc_mcontext.gregs[REG_RIP] = reinterpret_cast<greg_t>(ip);
        sleep::cancel_entry(&uc);
        CHECK(uc.uc_mcontext.gregs[REG_RIP] == reinterpret_cast<greg_t>(rdmasock_sleep_cancelled));
    }
    // In the kernel already (the instruction after the syscall) or elsewhere: untouched.
    uc.uc_mcontext.gregs[REG_RIP] = reinterpret_cast<greg_t>(rdmasock_sleep_insn + 2);
    sleep::cancel_entry(&uc);
    CHECK(uc.uc_mcontext.gregs[REG_RIP] == reinterpret_cast<greg_t>(rdmasock_sleep_insn + 2));
}
#endif

namespace {
volatile sig_atomic_t g_blocked_inside = -1;  // SIGUSR1 blocked while the held-back handler ran
volatile sig_atomic_t g_info_code = 0;
void on_info_mask(int, siginfo_t* si, void*) {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    g_blocked_inside = sigismember(&now, SIGUSR1);
    g_info_code = si ? si->si_code : -1;
    g_plain = g_plain + 1;
}
}  // namespace

TEST_CASE("a handler held back by DeferHandlers runs when the last section ends, under its mask") {
    KeepUsr1 keep;
    struct sigaction sa{};
    sa.sa_sigaction = on_info_mask;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    REQUIRE(signals::app_sigaction(SIGUSR1, &sa, nullptr) == 0);
    g_plain = 0;
    g_blocked_inside = -1;
    const signals::Seen before = signals::seen();
    {
        signals::DeferHandlers outer;
        {
            signals::DeferHandlers inner;
            CHECK(signals::deferring());
            raise(SIGUSR1);
            CHECK(g_plain == 0);              // held back
            CHECK(signals::since(before));    // but counted: a wait ends on it
        }
        CHECK(g_plain == 0);  // the outer section still holds it
        errno = EAGAIN;
    }
    CHECK(errno == EAGAIN);  // the call's errno survives the handler
    CHECK(!signals::deferring());
    CHECK(g_plain == 1);
    CHECK(g_blocked_inside == 1);  // as the kernel blocks the signal during its handler
    CHECK(g_info_code == SI_TKILL);
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    CHECK(!sigismember(&now, SIGUSR1));  // and unblocks it after
}

TEST_CASE("HandlersNow lets a handler run at once inside a held-back section") {
    KeepUsr1 keep;
    struct sigaction sa = handler_action(SA_RESTART);
    REQUIRE(signals::app_sigaction(SIGUSR1, &sa, nullptr) == 0);
    g_plain = 0;
    signals::DeferHandlers section;
    {
        signals::HandlersNow now;
        CHECK(!signals::deferring());
        raise(SIGUSR1);
        CHECK(g_plain == 1);
    }
    CHECK(signals::deferring());
}

TEST_CASE("inside an interposer (HandlersAtReturn) a held-back handler waits for the interposer's end") {
    KeepUsr1 keep;
    struct sigaction sa = handler_action(SA_RESTART);
    REQUIRE(signals::app_sigaction(SIGUSR1, &sa, nullptr) == 0);
    g_plain = 0;
    {
        signals::HandlersAtReturn call;
        {
            signals::DeferHandlers lock_held;
            raise(SIGUSR1);
        }
        CHECK(g_plain == 0);  // the lock is let go, the call is not over
    }
    CHECK(g_plain == 1);
}

// The in-band handshake holds handlers back (DeferHandlers) and settles; the
// ring's wait that follows in the same call takes its `since` then. A handler
// held back before that must end the wait at once (before: the wait slept with
// the handler held until the call returned, which it never did: the first-wait
// cases of handler_io_check over rdma hung).
TEST_CASE("a wait that begins while a handler is held back ends for it, with its restart flag") {
    KeepUsr1 keep;
    for (int flags : {SA_RESTART, 0}) {
        struct sigaction sa = handler_action(flags);
        REQUIRE(signals::app_sigaction(SIGUSR1, &sa, nullptr) == 0);
        g_plain = 0;
        signals::HandlersAtReturn call;  // the interposer's whole call
        {
            signals::DeferHandlers handshake;
            raise(SIGUSR1);
            CHECK(g_plain == 0);  // held back
        }
        CHECK(g_plain == 0);  // held until the call returns
        const signals::Seen since = signals::seen();  // the later wait begins
        CHECK(signals::since(since));
        CHECK(signal_restarts_call(since, false) == (flags == SA_RESTART));
        pollfd none{-1, 0, 0};
        errno = 0;
        CHECK(sleep::poll(&none, 1, 5'000'000, nullptr, since) == -1);  // no 5 s sleep
        CHECK(errno == EINTR);
        signals::held::run();  // what the interposer's return does
        CHECK(g_plain == 1);
        CHECK_FALSE(signals::since(signals::seen()));
    }
}
