// The one wait loop (wait_engine.hpp) with scripted hooks: which look it asks
// for, and in what order it arms, sleeps and spins. The engine's looks decide
// when a caller's plain fds are reported, so the order is the behaviour.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "wait/wait_engine.hpp"

namespace wait = rdmasock::wait;

namespace {
// Answers the engine from a script: check() returns the next of `answers` (0
// when they run out); arm() says may_sleep as `may_sleep` says. Records every
// call, so a test reads the engine's steps back.
struct ScriptedHooks {
    std::vector<int> answers;
    bool may_sleep = true;
    std::vector<std::string> steps;
    size_t next = 0;

    int check(wait::Look look) {
        steps.push_back(look == wait::Look::full ? "check:full" : look == wait::Look::rings ? "check:rings" : "check:rings_first");
        return next < answers.size() ? answers[next++] : 0;
    }
    bool peek() {
        if (steps.empty() || steps.back() != "peek") steps.push_back("peek");
        return false;
    }
    uint32_t spin_budget_us() { return 0; }
    wait::Armed arm() {
        steps.push_back("arm");
        wait::Armed a;
        a.may_sleep = may_sleep;
        return a;
    }
    bool changed() { return false; }
    int sleep(int64_t, const rdmasock::signals::Seen&) {
        steps.push_back("sleep");
        return 0;
    }
    void settle(int, bool) { steps.push_back("settle"); }
    bool learns() { return false; }
    void learn(int64_t, bool) {}
};
}  // namespace

TEST_CASE("wait engine: a wait that will not spin lets its sleep be the kernel's look") {
    ScriptedHooks h;
    h.answers = {0, 1};  // the rings have nothing; the look after the sleep finds the fd
    REQUIRE(wait::run(h, 1000000, rdmasock::signals::seen()) == 1);
    CHECK(h.steps == std::vector<std::string>{"check:rings_first", "arm", "sleep", "settle", "check:full"});
}

TEST_CASE("wait engine: a wait that may not sleep (progress in flight) asks the kernel before it watches the rings") {
    // rings_first skipped the kernel because a sleep would ask it. When arm()
    // says the transport has progress in flight (RDMA), nothing sleeps: a plain
    // fd that is ready must be reported by a full look now, not after the
    // in-flight watch (kInFlightSpinUs) of the rings alone.
    ScriptedHooks h;
    h.may_sleep = false;
    h.answers = {0, 1};
    REQUIRE(wait::run(h, 1000000, rdmasock::signals::seen()) == 1);
    CHECK(h.steps == std::vector<std::string>{"check:rings_first", "arm", "settle", "check:full"});
}

TEST_CASE("wait engine: after a full look, progress in flight is watched on the rings before the next look") {
    ScriptedHooks h;
    h.may_sleep = false;
    h.answers = {0, 0, 1};
    REQUIRE(wait::run(h, 1000000, rdmasock::signals::seen()) == 1);
    CHECK(h.steps ==
          std::vector<std::string>{"check:rings_first", "arm", "settle", "check:full", "arm", "settle", "peek", "check:full"});
}

TEST_CASE("wait engine: a zero timeout looks once, rings and kernel") {
    ScriptedHooks h;
    REQUIRE(wait::run(h, 0, rdmasock::signals::seen()) == 0);
    CHECK(h.steps == std::vector<std::string>{"check:full"});
}
