// SpinPolicy: the learned spin follows the peer's answer time, stays within the
// cap, and falls back to the base spin for slow or idle peers.
#include <catch2/catch.hpp>
#include <cstring>

#include "wait/spin_policy.hpp"

using rdmasock::SpinPolicy;

namespace {
void feed(SpinPolicy& p, int64_t us, int n) {
    for (int i = 0; i < n; ++i) p.record(us);
}
}  // namespace

TEST_CASE("spin policy starts at the base spin and needs a few samples") {
    SpinPolicy p(20, 200);
    CHECK(p.budget_us() == 20);
    feed(p, 90, SpinPolicy::kMinSamples - 1);
    CHECK(p.budget_us() == 20);
    p.record(90);
    CHECK(p.budget_us() == 128);  // 90 us waits end before the 128 us bucket bound
}

TEST_CASE("spin policy never spins less than the base") {
    SpinPolicy p(20, 200);
    feed(p, 1, 100);
    CHECK(p.budget_us() == 20);
}

TEST_CASE("spin policy caps the spin, and a peer beyond the cap gets the base spin") {
    SpinPolicy p(20, 200);
    feed(p, 150, 50);  // bucket [128, 256) starts below the cap: spin up to the cap
    CHECK(p.budget_us() == 200);
    SpinPolicy slow(20, 200);
    feed(slow, 5000, 50);  // an idle or slow peer: spinning would only burn CPU
    CHECK(slow.budget_us() == 20);
}

TEST_CASE("spin policy covers 90% of the waits") {
    SpinPolicy p(20, 1000);
    feed(p, 40, 95);
    feed(p, 700, 5);  // rare slow answers do not move the spin
    CHECK(p.budget_us() == 64);
    SpinPolicy q(20, 1000);
    feed(q, 40, 50);
    feed(q, 700, 50);  // half of them slow: cover them too
    CHECK(q.budget_us() == 1000);
}

TEST_CASE("spin policy follows a peer that changes pace") {
    SpinPolicy p(20, 200);
    feed(p, 100, 200);
    CHECK(p.budget_us() == 128);
    feed(p, 1000000, 400);  // the connection went idle: old samples decay away
    CHECK(p.budget_us() == 20);
    feed(p, 50, 400);
    CHECK(p.budget_us() == 64);
}

TEST_CASE("spin policy with a cap at or below the base spin, or no base spin, is fixed") {
    SpinPolicy p(20, 0);
    feed(p, 100, 100);
    CHECK(p.budget_us() == 20);
    SpinPolicy q(0, 200);  // RDMASOCK_SPIN_US=0: the sleeping wait, never a spin
    feed(q, 100, 100);
    CHECK(q.budget_us() == 0);
}

#include "wait/cpu_load.hpp"

TEST_CASE("cpu_load: the runnable count from /proc/loadavg's text", "[cpu_load]") {
    using rdmasock::cpu_load::parse_runnable;
    auto p = [](const char* s) { return parse_runnable(s, static_cast<long>(std::strlen(s))); };
    CHECK(p("0.52 0.58 0.59 3/812 12345\n") == 3);
    CHECK(p("10.00 9.00 8.00 17/2048 1\n") == 17);
    CHECK(p("0.52 0.58 0.59 x/812 12345\n") == -1);
    CHECK(p("0.52 0.58") == -1);
    CHECK(p("") == -1);
    CHECK(p("0.52 0.58 0.59 3") == -1);  // cut before the slash
}

TEST_CASE("cpu_load: a sample of this machine is sane", "[cpu_load]") {
    (void)rdmasock::cpu_load::oversubscribed();
    auto s = rdmasock::cpu_load::last_sample();
    CHECK(s.cpus >= 1);
    CHECK(s.runnable >= 1);  // the asking thread itself
}
