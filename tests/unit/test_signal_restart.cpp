// When a blocking socket call interrupted by a signal restarts (signal_restart.hpp).
#include <catch2/catch.hpp>

#include <signal.h>

#include "sys/signal_restart.hpp"

using rdmasock::signal_restarts_call;

namespace {
void on_usr1(int) {}

struct SavedAction {
    struct sigaction old{};
    SavedAction() { sigaction(SIGUSR1, nullptr, &old); }
    ~SavedAction() { sigaction(SIGUSR1, &old, nullptr); }
};

void install(int flags) {
    struct sigaction sa{};
    sa.sa_handler = on_usr1;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &sa, nullptr) == 0);
}
}  // namespace

TEST_CASE("a handler without SA_RESTART makes an interrupted call fail with EINTR") {
    SavedAction keep;
    install(SA_RESTART);
    const bool others_restart = signal_restarts_call(false);  // the test runner's own handlers
    install(0);
    CHECK_FALSE(signal_restarts_call(false));
    install(SA_RESTART);
    CHECK(signal_restarts_call(false) == others_restart);
}

TEST_CASE("a socket timeout makes an interrupted call fail with EINTR even with SA_RESTART") {
    SavedAction keep;
    install(SA_RESTART);
    CHECK_FALSE(signal_restarts_call(true));
}
