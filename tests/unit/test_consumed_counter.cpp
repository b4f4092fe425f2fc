// The consumed counter a writer reads: a publication that lands a byte at a
// time (Soft-RoCE's rep movsb) must never hand the writer a position nobody
// published (consumed_counter.hpp).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "ring/consumed_counter.hpp"
#include "ring/ring_format.hpp"
#include "ring/ring_writer.hpp"

using namespace rdmasock::ring;

namespace {

// The 16 bytes a publication lands in: value, then its copy.
struct alignas(16) Pair {
    std::atomic<uint64_t> value{0};
    std::atomic<uint64_t> copy{0};
    ConsumedCounter counter() const { return {&value, &copy}; }

    // Lands `v` the way a byte-wise DMA does: ascending, one byte at a time;
    // `upto` stops after that many of the 16 bytes (a landing caught midway).
    void land(uint64_t v, int upto = 16) {
        auto* b = reinterpret_cast<uint8_t*>(this);
        uint8_t src[16];
        std::memcpy(src, &v, 8);
        std::memcpy(src + 8, &v, 8);
        for (int i = 0; i < upto; ++i) __atomic_store_n(b + i, src[i], __ATOMIC_RELEASE);
    }
};

struct NullSink : RecordSink {
    std::vector<uint8_t> ring;
    explicit NullSink(uint64_t cap) : ring(cap + 64) {}
    uint8_t* stage(uint64_t offset, uint64_t) override { return ring.data() + offset; }
    bool post(uint64_t, uint64_t) override { return true; }
};

}  // namespace

TEST_CASE("a counter without a copy is one load") {
    std::atomic<uint64_t> v{4096};
    uint64_t out = 0;
    REQUIRE(ConsumedCounter(&v).load(out));
    CHECK(out == 4096);
}

TEST_CASE("a publication caught midway is no news, never a mixed position") {
    Pair p;
    p.land(0x0ff8);
    uint64_t out = 0;
    REQUIRE(p.counter().load(out));
    CHECK(out == 0x0ff8);
    // 0x0ff8 -> 0x1000: new low byte beside old high byte reads 0x0f00.
    for (int upto = 1; upto < 16; ++upto) {
        Pair q;
        q.land(0x0ff8);
        q.land(0x1000, upto);
        const bool got = q.counter().load(out);
        if (got) CHECK((out == 0x0ff8 || out == 0x1000));
        if (upto == 8 || upto == 9) CHECK_FALSE(got);  // value landed, the copy's differing bytes not yet
    }
}

TEST_CASE("a writer beside a torn publication waits instead of breaking, then takes the space") {
    const uint64_t cap = 4096;
    NullSink sink(cap);
    Pair p;
    RingWriter w(cap, sink, p.counter());
    std::vector<uint8_t> data(100, 7);
    uint64_t sent = 0;
    IoResult r;
    while ((r = w.write(data.data(), data.size())).bytes > 0) sent += r.bytes;
    REQUIRE_FALSE(w.has_space());
    const uint64_t written = w.written();
    const uint64_t half = (written / 2) & ~uint64_t{kAlign - 1};
    // Landing stops after the value's low byte: a single load would read a
    // position that is neither the old nor the new one.
    p.land(half, 1);
    CHECK_FALSE(w.has_space());
    CHECK(w.status() != RingStatus::broken);
    p.land(half);
    CHECK(w.has_space());
    CHECK(w.status() == RingStatus::ok);
}

TEST_CASE("a reader polling a byte-wise publisher only ever takes published positions") {
    Pair p;
    std::atomic<bool> done{false};
    constexpr uint64_t kStep = 0x1f8;  // carries into the higher bytes often
    constexpr uint64_t kCount = 200000;
    std::thread publisher([&] {
        for (uint64_t i = 1; i <= kCount; ++i) p.land(i * kStep);
        done.store(true);
    });
    uint64_t last = 0, taken = 0, bad = 0;
    while (!done.load()) {
        uint64_t v;
        if (!p.counter().load(v)) continue;
        if (v % kStep != 0 || v < last) ++bad;
        last = v;
        ++taken;
    }
    publisher.join();
    CHECK(bad == 0);
    CHECK(taken > 0);
}
