// The application's signal dispositions. SIGSEGV and SIGBUS as the
// application set them, while the shim's fault handler stays installed
// (common/fault_guard.hpp); every other handler behind the trampoline that
// tells a spinning wait a signal arrived (common/signal_seen.hpp). sigaction
// and the signal() family record the application's disposition and report it
// back, so the program sees what it set. In a vfork child, which must not
// change our state, everything goes straight to libc.
#include <signal.h>


#include <cerrno>

#include "sys/fault_guard.hpp"
#include "real_calls.hpp"
#include "sys/signal_seen.hpp"
#include "shim_state.hpp"

using namespace rdmasock;

namespace {

// Sanitizer runtimes call sigaction before they can run instrumented code:
// the shim's state (in_vfork_child) is asked only for the guard's signals,
// once the guard is installed; signals::app_sigaction checks for itself.
bool guarded(int sig) { return guard::covers(sig) && !shim::in_vfork_child(); }

int app_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
    if (guarded(sig)) return guard::app_sigaction(sig, act, old);
    return signals::app_sigaction(sig, act, old);
}

using SignalFn = sighandler_t (*)(int, sighandler_t);

// signal()'s two flavours, as glibc builds them: BSD (mask the signal, restart)
// and System V (one shot, no mask).
sighandler_t set_handler(int sig, sighandler_t h, bool bsd) {
    struct sigaction act{}, old{};
    act.sa_handler = h;
    sigemptyset(&act.sa_mask);
    if (bsd) {
        sigaddset(&act.sa_mask, sig);
        act.sa_flags = SA_RESTART;
    } else {
        act.sa_flags = SA_RESETHAND | SA_NODEFER;
    }
    if (h == SIG_ERR) {
        errno = EINVAL;
        return SIG_ERR;
    }
    if (app_sigaction(sig, &act, &old) != 0) return SIG_ERR;
    return old.sa_handler;
}

}  // namespace

extern "C" {

int sigaction(int sig, const struct sigaction* act, struct sigaction* old) { return app_sigaction(sig, act, old); }

int __sigaction(int sig, const struct sigaction* act, struct sigaction* old) { return sigaction(sig, act, old); }

sighandler_t signal(int sig, sighandler_t h) { return set_handler(sig, h, true); }

sighandler_t bsd_signal(int sig, sighandler_t h) { return signal(sig, h); }
sighandler_t ssignal(int sig, sighandler_t h) { return signal(sig, h); }

sighandler_t sysv_signal(int sig, sighandler_t h) { return set_handler(sig, h, false); }

sighandler_t __sysv_signal(int sig, sighandler_t h) { return sysv_signal(sig, h); }

// System V sigset(): install (flags 0, nothing masked) and unblock; SIG_HOLD
// only blocks, which is libc's business.
sighandler_t sigset(int sig, sighandler_t h) {
    static SignalFn real = rdmasock::real::next<SignalFn>("sigset");
    if (h == SIG_HOLD) return real(sig, h);
    struct sigaction act{}, old{};
    act.sa_handler = h;
    sigemptyset(&act.sa_mask);
    if (h == SIG_ERR) {
        errno = EINVAL;
        return SIG_ERR;
    }
    sigset_t one, was;
    sigemptyset(&one);
    sigaddset(&one, sig);
    if (app_sigaction(sig, &act, &old) != 0 || sigprocmask(SIG_UNBLOCK, &one, &was) != 0) return SIG_ERR;
    return sigismember(&was, sig) ? SIG_HOLD : old.sa_handler;
}

}  // extern "C"
