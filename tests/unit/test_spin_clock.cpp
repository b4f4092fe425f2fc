// The spin's clock (time-stamp counter) settles on a source and, once on the
// counter, measures what CLOCK_MONOTONIC measures: a wrong rate would make
// every spin too short or too long, and the learned spin learn nonsense.
#include <catch2/catch.hpp>
#include <time.h>

#include <cstring>

#include "wait_engine.hpp"

using namespace rdmasock;

namespace {

void sleep_us(long us) {
    timespec ts{us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, nullptr);
}

// Both clocks read back to back, retried until no preemption split the reading.
struct Reading {
    int64_t spin, mono;
};
Reading read_both() {
    for (;;) {
        const int64_t m1 = wait::now_us();
        const int64_t s = wait::spin_now_us();
        const int64_t m2 = wait::now_us();
        if (m2 - m1 < 200) return {s, m1};
    }
}

}  // namespace

TEST_CASE("the spin clock settles on a source and agrees with CLOCK_MONOTONIC") {
    // Calibration needs >= 10 ms of looks (longer where a clock read is slow); 10 s is generous.
    const int64_t give_up = wait::now_us() + 10000000;
    while (std::strcmp(wait::spin_clock_source(), "calibrating") == 0 && wait::now_us() < give_up) {
        (void)wait::spin_now_us();
        sleep_us(1000);
    }
    const std::string source = wait::spin_clock_source();
    INFO("source " << source);
#if defined(__x86_64__)
    CHECK(source == "tsc");
#endif
    REQUIRE(source != "calibrating");

    const Reading a = read_both();
    sleep_us(50000);
    const Reading b = read_both();
    const int64_t spin = b.spin - a.spin, mono = b.mono - a.mono;
    INFO("spin clock " << spin << " us, CLOCK_MONOTONIC " << mono << " us");
    // The rate is calibrated to 0.5%; each reading is good to 200 us.
    CHECK(spin >= mono - mono / 100 - 500);
    CHECK(spin <= mono + mono / 100 + 500);
}
