#include "sys/signal_restart.hpp"

#include <signal.h>

#include "sys/thread_cancel.hpp"

namespace rdmasock {

bool signal_restarts_call(bool socket_has_timeout) {
    if (socket_has_timeout) return false;
    for (int sig = 1; sig < NSIG; ++sig) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        struct sigaction sa{};
        if (sigaction(sig, nullptr, &sa) != 0) continue;  // glibc's own signals: not ours to ask
        const bool handler = (sa.sa_flags & SA_SIGINFO) ? sa.sa_sigaction != nullptr
                                                        : sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN;
        if (handler && !(sa.sa_flags & SA_RESTART)) return false;
    }
    return true;
}

bool signal_restarts_call(const signals::Seen& since, bool socket_has_timeout) {
    // Ended for a pthread_cancel: the interposer unwinds the thread on its way out.
    if (socket_has_timeout || cancel::pending()) return false;
    const signals::Seen now = signals::counted();
    if (now.delivered != since.delivered) return now.interrupting == since.interrupting;
    return signal_restarts_call(false);
}

}  // namespace rdmasock
