#include "wait/spin_policy.hpp"

#include <algorithm>

namespace rdmasock {

SpinPolicy::SpinPolicy(uint32_t base_us, uint32_t max_us) : base_us_(base_us), max_us_(max_us), budget_(base_us) {}

int SpinPolicy::bucket_of(int64_t us) {
    if (us < 1) return 0;
    int b = 1;
    while (b < kBuckets - 1 && us >= (int64_t{1} << b)) ++b;
    return b;
}

void SpinPolicy::record(int64_t waited_us) {
    if (!learns()) return;
    counts_[static_cast<size_t>(bucket_of(waited_us))].fetch_add(1, std::memory_order_relaxed);
    if (since_decay_.fetch_add(1, std::memory_order_relaxed) + 1 >= kDecayEvery) {
        // Old waits weigh half as much: the estimate follows a peer that changes pace.
        since_decay_.store(0, std::memory_order_relaxed);
        for (auto& c : counts_) c.store(c.load(std::memory_order_relaxed) / 2, std::memory_order_relaxed);
    }
    recompute();
}

void SpinPolicy::recompute() {
    uint64_t total = 0;
    std::array<uint32_t, kBuckets> seen{};
    for (size_t i = 0; i < seen.size(); ++i) total += seen[i] = counts_[i].load(std::memory_order_relaxed);
    uint32_t budget = base_us_;
    if (total >= kMinSamples) {
        const double want = kCoverage * static_cast<double>(total);
        uint64_t covered = 0;
        for (int i = 0; i < kBuckets - 1; ++i) {
            covered += seen[static_cast<size_t>(i)];
            if (static_cast<double>(covered) < want) continue;
            // Waits of buckets 0..i ended before `upper`; spin that long, or up to the
            // cap when the bucket starts below it (part of it is still covered).
            const uint64_t upper = uint64_t{1} << i, lower = upper / 2;
            if (lower < max_us_) budget = std::max<uint32_t>(base_us_, static_cast<uint32_t>(std::min<uint64_t>(upper, max_us_)));
            break;
        }
    }
    budget_.store(budget, std::memory_order_relaxed);
}

}  // namespace rdmasock
