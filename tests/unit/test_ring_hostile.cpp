// A peer controls every byte of the ring it writes and the counter it publishes.
// Whatever it writes, the reader reports "broken" or waits; it never reads out
// of bounds (the ASan build checks that) and never delivers an invalid record.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "local_ring.hpp"

using namespace rdmasock::ring;
using rdmasock::test::LocalRing;

namespace {

void put32(LocalRing& r, uint64_t off, uint32_t v) { std::memcpy(r.ring + off, &v, 4); }

// Writes a header and its correct footer at `off` (as a valid writer would).
void forge(LocalRing& r, uint64_t off, RecordKind kind, uint32_t length) {
    uint32_t h = make_header(kind, length);
    put32(r, off, h);
    if (off + footer_offset(length) + 4 <= r.reader.capacity()) put32(r, off + footer_offset(length), footer_for(h, off));
}

std::string read_error(LocalRing& r) {
    uint8_t buf[64];
    IoResult res = r.reader.read(buf, sizeof buf);
    CHECK(res.bytes == 0);
    CHECK(res.status == RingStatus::broken);
    return r.reader.error();
}

}  // namespace

TEST_CASE("a record length larger than the ring is reported") {
    LocalRing r(1024);
    put32(r, 0, make_header(RecordKind::data, kMaxLengthField));
    CHECK_THAT(read_error(r), Catch::Contains("does not fit"));
    CHECK(r.reader.poll() == RingStatus::broken);
}

TEST_CASE("a record running past the ring's end is reported") {
    LocalRing r(1024);
    const uint64_t off = 1024 - 32;
    uint8_t fill[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    while (r.writer.written() % 1024 != off) {  // move the reader to `off` with valid records
        r.writer.write(fill, 8);
        r.reader.read(fill, 8);
    }
    forge(r, off, RecordKind::data, 100);  // 112 bytes from offset 992 would cross the end
    CHECK_THAT(read_error(r), Catch::Contains("does not fit"));
}

TEST_CASE("a footer mismatch is reported, a footer still landing is not") {
    LocalRing r(1024);
    uint32_t h = make_header(RecordKind::data, 8);
    uint32_t good = footer_for(h, 0);
    put32(r, 0, h);
    uint8_t buf[16];
    for (uint32_t prefix : {good & 0xffu, good & 0xffffu, good & 0xffffffu}) {
        put32(r, footer_offset(8), prefix);
        CHECK(r.reader.read(buf, 16).status == RingStatus::would_block);
    }
    put32(r, footer_offset(8), good ^ 0x01000000);
    CHECK_THAT(read_error(r), Catch::Contains("footer mismatch"));
}

TEST_CASE("a stale record from an earlier lap does not validate") {
    LocalRing r(1024);
    uint32_t h = make_header(RecordKind::data, 8);
    put32(r, 0, h);
    put32(r, footer_offset(8), footer_for(h, 1024));  // the right footer, but for lap 1
    CHECK_THAT(read_error(r), Catch::Contains("footer mismatch"));
}

TEST_CASE("unknown kinds and misplaced markers are reported") {
    SECTION("unknown kind") {
        LocalRing r(1024);
        put32(r, 0, 0x7f000000u);
        CHECK_THAT(read_error(r), Catch::Contains("unknown record kind"));
    }
    SECTION("wrap marker with a length") {
        LocalRing r(1024);
        forge(r, 0, RecordKind::wrap, 8);
        CHECK_THAT(read_error(r), Catch::Contains("carries a length"));
    }
    SECTION("end of stream with a length") {
        LocalRing r(1024);
        forge(r, 0, RecordKind::fin, 4);
        CHECK_THAT(read_error(r), Catch::Contains("carries a length"));
    }
}

TEST_CASE("random garbage never yields bytes and never reads out of bounds") {
    std::mt19937_64 rng(42);
    for (int trial = 0; trial < 2000; ++trial) {
        LocalRing r(1024);
        size_t n = 1 + rng() % 1024;
        for (size_t i = 0; i < n; ++i) r.ring[rng() % 1024] = static_cast<uint8_t>(rng());
        uint8_t buf[300];
        IoResult res = r.reader.read(buf, sizeof buf);
        (void)r.reader.readable_bytes();
        (void)r.reader.poll();
        // A valid footer by chance is a 2^-28 event per record; treat any bytes as failure.
        CHECK(res.bytes == 0);
        CHECK(res.status != RingStatus::ok);
    }
}

TEST_CASE("an impossible consumed counter from the peer breaks the writer") {
    uint8_t data[64] = {};
    SECTION("beyond what was written") {
        LocalRing r(1024);
        r.writer.write(data, 64);
        r.consumed.store(1 << 20);
        while (r.writer.write(data, 64).bytes > 0) {}
        CHECK(r.writer.status() == RingStatus::broken);
        CHECK_THAT(r.writer.error(), Catch::Contains("impossible consumed"));
    }
    SECTION("not aligned") {
        LocalRing r(1024);
        while (r.writer.write(data, 64).bytes > 0) {}
        r.consumed.store(3);
        CHECK_FALSE(r.writer.has_space());
        CHECK(r.writer.status() == RingStatus::broken);
    }
    SECTION("going backwards") {
        LocalRing r(1024);
        while (r.writer.write(data, 64).bytes > 0) {}
        r.consumed.store(160);
        CHECK(r.writer.has_space());
        while (r.writer.write(data, 64).bytes > 0) {}
        r.consumed.store(80);
        r.writer.write(data, 64);
        CHECK(r.writer.status() == RingStatus::broken);
    }
}

TEST_CASE("a transport that fails to post breaks the writer") {
    LocalRing r(1024);
    r.post_ok = false;
    uint8_t data[8] = {};
    IoResult w = r.writer.write(data, 8);
    CHECK(w.bytes == 0);
    CHECK(w.status == RingStatus::broken);
}
