// An in-process ring: the writer's sink is a memcpy target in the same address
// space, exactly like the shared-memory transport but without a second process.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "ring/ring_reader.hpp"
#include "ring/ring_writer.hpp"

namespace rdmasock::test {

struct LocalRing : ring::RecordSink, ring::ConsumedPublisher {
    // window: the writer's first window (0: the whole ring), the reader's hint.
    explicit LocalRing(uint64_t capacity, uint64_t window = 0)
        : memory(capacity + 64, 0), ring(memory.data()), backed(capacity, false),
          writer(capacity, *this, &consumed, window), reader(ring, capacity, *this, window) {
        std::fill(backed.begin(), backed.begin() + static_cast<long>(window ? window : capacity), true);
    }

    uint8_t* stage(uint64_t offset, uint64_t bytes) override {
        last_staged = bytes;
        if (!all(offset, offset + bytes, true)) ++outside_backing;
        return ring + offset;
    }
    bool back(uint64_t from, uint64_t to) override {
        if (!back_ok) return false;
        if (to <= from || !all(from, to, false)) ++bad_backs;  // only memory not backed yet
        std::fill(backed.begin() + static_cast<long>(from), backed.begin() + static_cast<long>(to), true);
        ++backs;
        return true;
    }
    void release(uint64_t from, uint64_t to) override {
        if (to <= from || !all(from, to, true)) ++bad_backs;  // only memory backed
        // What MADV_REMOVE leaves: zeroes, for both ends.
        std::fill(ring + from, ring + to, uint8_t{0});
        std::fill(backed.begin() + static_cast<long>(from), backed.begin() + static_cast<long>(to), false);
        ++releases;
    }
    // Bytes of the ring backed now.
    uint64_t backed_bytes() const { return static_cast<uint64_t>(std::count(backed.begin(), backed.end(), true)); }
    bool all(uint64_t from, uint64_t to, bool b) const {
        return std::all_of(backed.begin() + static_cast<long>(from), backed.begin() + static_cast<long>(to),
                           [b](bool x) { return x == b; });
    }
    bool post(uint64_t, uint64_t) override {
        // A transport that takes its time (a doorbell, a verbs post).
        for (int i = 0; i < post_spin; ++i) asm volatile("" ::: "memory");
        return post_ok;
    }
    bool publish_consumed(uint64_t c) override {
        consumed.store(c, std::memory_order_release);
        ++publications;
        return true;
    }

    std::vector<uint8_t> memory;  // ring plus a guard area that must stay zero
    uint8_t* ring;
    std::atomic<uint64_t> consumed{0};
    uint64_t last_staged = 0;
    int publications = 0;
    bool post_ok = true;
    int post_spin = 0;
    // Window growth: what the writer asked the sink to back, byte by byte.
    std::vector<bool> backed;
    bool back_ok = true;
    int backs = 0, releases = 0, bad_backs = 0, outside_backing = 0;
    ring::RingWriter writer;
    ring::RingReader reader;
};

// Deterministic stream content: byte at absolute stream offset o.
inline uint8_t pattern_byte(uint64_t o) {
    uint64_t x = (o / 8 + 1) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    return static_cast<uint8_t>(x >> (8 * (o % 8)));
}

inline std::vector<uint8_t> pattern(uint64_t from, size_t len) {
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; ++i) v[i] = pattern_byte(from + i);
    return v;
}

}  // namespace rdmasock::test
