// How long a waiter spins before it sleeps, learned per connection.
//
// Spinning pays when the peer answers within the spin; sleeping then costs a
// doorbell and a wake-up on top of the answer. A fixed spin (RDMASOCK_SPIN_US)
// fits one kind of peer: 20 us covers shared memory on one host, but not an
// RDMA round trip under emulation or a database backend computing its answer.
// The policy keeps a decaying histogram of how long this connection's waits
// lasted and spins until the end of the (power-of-two) bucket that completes
// 90% of them, capped at RDMASOCK_SPIN_MAX_US; when that bucket starts beyond
// the cap (an idle or slow peer) it falls back to the base spin, so an idle
// connection costs what it did. The cap bounds the CPU one wait can burn.
//
// Threads may share a connection: counts are relaxed atomics, and a lost
// update only blurs the estimate.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace rdmasock {

class SpinPolicy {
public:
    // max_us <= base_us turns learning off: the budget is always base_us. So does
    // base_us == 0: RDMASOCK_SPIN_US=0 means "never spin, sleep at once".
    SpinPolicy(uint32_t base_us, uint32_t max_us);

    // Microseconds to spin in the next wait.
    uint32_t budget_us() const { return budget_.load(std::memory_order_relaxed); }
    // One wait ended after waited_us: ready (spun or slept) or timed out.
    void record(int64_t waited_us);
    // False: record() ignores every wait, so a caller need not read the clock for it.
    bool learns() const { return base_us_ > 0 && max_us_ > base_us_; }

    static constexpr double kCoverage = 0.9;  // share of waits the spin should cover
    static constexpr uint32_t kMinSamples = 8;  // before that, the base spin
    static constexpr uint32_t kDecayEvery = 64;  // halve the counts every this many waits

private:
    // Bucket i holds waits in [2^(i-1), 2^i) us (bucket 0: under 1 us); the last, all longer.
    static constexpr int kBuckets = 22;
    static int bucket_of(int64_t us);
    void recompute();

    const uint32_t base_us_, max_us_;
    std::array<std::atomic<uint32_t>, kBuckets> counts_{};
    std::atomic<uint32_t> since_decay_{0};
    std::atomic<uint32_t> budget_;
};

}  // namespace rdmasock
