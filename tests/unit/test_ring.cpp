// Framing, wrap-around, byte-stream and flow-control behaviour of one ring.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <thread>

#include "local_ring.hpp"

using namespace rdmasock;
using namespace rdmasock::ring;
using rdmasock::test::LocalRing;
using rdmasock::test::pattern;

namespace {

// Writes `len` pattern bytes from stream offset `from`, reads them back in one
// call and checks they match byte for byte.
void round_trip(LocalRing& r, uint64_t& stream, size_t len) {
    auto data = pattern(stream, len);
    IoResult w = r.writer.write(data.data(), len);
    REQUIRE(w.bytes == len);
    std::vector<uint8_t> back(len + 16, 0xee);
    IoResult rd = r.reader.read(back.data(), back.size());
    REQUIRE(rd.bytes == len);
    REQUIRE(std::equal(data.begin(), data.end(), back.begin()));
    if (len > 0) REQUIRE(rd.status == RingStatus::ok);
    stream += len;
}

// Moves the ring's write/read position to ring offset `target` with small
// records: 16-byte records (8 payload bytes) and 24-byte ones (16) to fix parity.
void advance_to(LocalRing& r, uint64_t& stream, uint64_t target) {
    const uint64_t cap = r.reader.capacity();
    for (int i = 0; i < 1000 && r.writer.written() % cap != target; ++i) {
        uint64_t d = (target - r.writer.written()) & (cap - 1);
        round_trip(r, stream, d % 16 == 8 ? 16 : 8);
    }
    REQUIRE(r.writer.written() % cap == target);
}

bool guard_is_zero(const LocalRing& r, uint64_t capacity) {
    return std::all_of(r.memory.begin() + capacity, r.memory.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

TEST_CASE("every payload size from 0 to the largest record round-trips") {
    const uint64_t cap = 256 * 1024;
    LocalRing r(cap);
    uint64_t stream = 0;
    for (size_t len = 0; len <= max_payload(cap); ++len) round_trip(r, stream, len);
    CHECK(guard_is_zero(r, cap));
    CHECK(r.reader.readable_bytes() == 0);
}

TEST_CASE("a record starting at every position of the ring round-trips, wrap included") {
    const uint64_t cap = 1024;
    const std::vector<size_t> sizes = {1, 7, 8, 9, 100, 200, max_payload(cap), 3 * max_payload(cap)};
    for (uint64_t start = 0; start < cap; start += kAlign) {
        // Offset 8 never starts a record: laps begin at 0 and records are >= 16 bytes.
        if (start == kAlign) continue;
        for (size_t len : sizes) {
            LocalRing r(cap);
            uint64_t stream = 0;
            advance_to(r, stream, start);
            // A write may be split by the ring's end or the record limit; read it all back.
            auto data = pattern(stream, len);
            size_t sent = 0, got = 0;
            std::vector<uint8_t> back(len);
            while (got < len) {
                if (sent < len) sent += r.writer.write(data.data() + sent, len - sent).bytes;
                got += r.reader.read(back.data() + got, len - got).bytes;
                REQUIRE(r.last_staged <= cap);
            }
            REQUIRE(back == data);
            REQUIRE(guard_is_zero(r, cap));
            REQUIRE(r.reader.status() == RingStatus::ok);
        }
    }
}

TEST_CASE("reads may take part of a record and keep the rest") {
    LocalRing r(4096);
    auto data = pattern(0, 600);
    REQUIRE(r.writer.write(data.data(), data.size()).bytes == 600);
    REQUIRE(r.reader.readable_bytes() == 600);
    std::vector<uint8_t> back;
    uint8_t b;
    while (r.reader.read(&b, 1).bytes == 1) back.push_back(b);
    CHECK(back == data);
    CHECK(r.reader.read(&b, 1).status == RingStatus::would_block);
}

TEST_CASE("peek returns the same bytes as the following read") {
    LocalRing r(4096);
    auto a = pattern(0, 100), c = pattern(100, 50);
    r.writer.write(a.data(), a.size());
    r.writer.write(c.data(), c.size());
    std::vector<uint8_t> peeked(150), read(150);
    REQUIRE(r.reader.peek(peeked.data(), 150).bytes == 150);  // across two records
    REQUIRE(r.reader.peek(peeked.data(), 150).bytes == 150);
    REQUIRE(r.reader.read(read.data(), 150).bytes == 150);
    CHECK(peeked == read);
    CHECK(r.reader.peek(peeked.data(), 1).status == RingStatus::would_block);
}

TEST_CASE("gathered writes and scattered reads keep the byte order") {
    LocalRing r(4096);
    auto data = pattern(0, 300);
    iovec out[3] = {{data.data(), 10}, {data.data() + 10, 0}, {data.data() + 10, 290}};
    REQUIRE(r.writer.writev(out, 3).bytes == 300);
    std::vector<uint8_t> back(300);
    iovec in[2] = {{back.data(), 123}, {back.data() + 123, 177}};
    REQUIRE(r.reader.readv(in, 2).bytes == 300);
    CHECK(back == data);
}

TEST_CASE("a full ring reports would-block and resumes when space frees") {
    const uint64_t cap = 4096;
    LocalRing r(cap);
    auto data = pattern(0, 64 * 1024);
    size_t sent = 0;
    IoResult w;
    while ((w = r.writer.write(data.data() + sent, 100)).bytes > 0) sent += w.bytes;
    CHECK(w.status == RingStatus::would_block);
    CHECK(sent > cap / 2);
    CHECK(sent < cap);
    CHECK_FALSE(r.writer.has_space());
    // Reading less than an eighth publishes nothing: the writer still sees a full ring.
    std::vector<uint8_t> back(sent);
    size_t got = r.reader.read(back.data(), cap / 16).bytes;
    CHECK(r.publications == 0);
    CHECK_FALSE(r.writer.has_space());
    got += r.reader.read(back.data() + got, cap / 8).bytes;
    CHECK(r.publications == 1);
    CHECK(r.writer.has_space());
    while (got < sent) got += r.reader.read(back.data() + got, sent - got).bytes;
    CHECK(std::equal(back.begin(), back.end(), data.begin()));
    // And writing resumes where it stopped.
    REQUIRE(r.writer.write(data.data() + sent, 100).bytes == 100);
    std::vector<uint8_t> more(100);
    REQUIRE(r.reader.read(more.data(), 100).bytes == 100);
    CHECK(std::equal(more.begin(), more.end(), data.begin() + sent));
}

TEST_CASE("end of stream arrives after the data and is sticky") {
    LocalRing r(1024);
    auto data = pattern(0, 40);
    r.writer.write(data.data(), 40);
    REQUIRE(r.writer.write_fin() == RingStatus::ok);
    CHECK(r.writer.write(data.data(), 1).status == RingStatus::broken);
    std::vector<uint8_t> back(100);
    CHECK(r.reader.poll() == RingStatus::ok);
    CHECK(r.reader.read(back.data(), 100).bytes == 40);
    CHECK(r.reader.poll() == RingStatus::eof);
    CHECK(r.reader.read(back.data(), 100).status == RingStatus::eof);
    CHECK(r.reader.read(back.data(), 100).status == RingStatus::eof);
}

TEST_CASE("a ring that data filled still takes the end of stream, wherever it stands") {
    // shutdown(SHUT_WR) on a full ring: TCP queues its FIN behind the data; the
    // ring keeps room for it (RingWriter::kFinReserve).
    const uint64_t cap = 1024;
    for (uint64_t start : {uint64_t{0}, uint64_t{24}, uint64_t{512}, cap - 24, cap - 16, cap - 8}) {
        LocalRing r(cap);
        uint64_t stream = 0;
        advance_to(r, stream, start);
        auto data = pattern(0, 4096);
        size_t sent = 0;
        for (uint32_t size : {1u, 7u, 100u, 1000u}) {
            IoResult w;
            while ((w = r.writer.write(data.data(), size)).bytes > 0) sent += w.bytes;
            REQUIRE(w.status == RingStatus::would_block);
        }
        REQUIRE(r.writer.write_fin() == RingStatus::ok);
        std::vector<uint8_t> back(sent + 8);
        size_t got = 0;
        IoResult rd;
        while ((rd = r.reader.read(back.data() + got, back.size() - got)).bytes > 0) got += rd.bytes;
        CHECK(got == sent);
        CHECK(r.reader.read(back.data(), 1).status == RingStatus::eof);
    }
}

TEST_CASE("end of stream at the ring's last 8 bytes goes through a wrap marker") {
    const uint64_t cap = 1024;
    LocalRing r(cap);
    uint64_t stream = 0;
    advance_to(r, stream, cap - 8);
    REQUIRE(r.writer.write_fin() == RingStatus::ok);
    uint8_t b;
    CHECK(r.reader.read(&b, 1).status == RingStatus::eof);
}

TEST_CASE("poll reports data, emptiness and end of stream") {
    LocalRing r(1024);
    CHECK(r.reader.poll() == RingStatus::would_block);
    uint8_t x = 7;
    r.writer.write(&x, 1);
    CHECK(r.reader.poll() == RingStatus::ok);
    r.reader.read(&x, 1);
    CHECK(r.reader.poll() == RingStatus::would_block);
}

// readable_bytes() and fin_landed() keep a scan ahead of the read position
// (counted once per record, not once per call): whatever mix of writes, reads,
// peeks, skips and seeks comes, they must say what a full walk would.
TEST_CASE("readable bytes and end of stream stay exact under any mix of calls") {
    for (uint64_t cap : {1024u, 4096u}) {
        for (unsigned seed = 1; seed <= 20; ++seed) {
            LocalRing r(cap);
            uint64_t written = 0, read = 0;
            bool fin = false;
            unsigned x = seed;
            auto next = [&x](unsigned n) { return (x = x * 1103515245u + 12345u) / 65536u % n; };
            std::vector<uint8_t> buf(cap);
            for (int step = 0; step < 3000; ++step) {
                switch (next(7)) {
                    case 0:
                    case 1: {  // write; mostly tiny records, sometimes big ones
                        if (fin) break;
                        size_t len = next(4) ? next(9) : next(static_cast<unsigned>(cap / 2));
                        auto data = pattern(written, len);
                        written += r.writer.write(data.data(), len).bytes;
                        if (next(400) == 0) fin = r.writer.write_fin() == RingStatus::ok;
                        break;
                    }
                    case 2: {  // read, any size, checked byte for byte
                        size_t len = next(3) ? next(5) : next(static_cast<unsigned>(cap));
                        IoResult got = r.reader.read(buf.data(), len);
                        auto want = pattern(read, got.bytes);
                        REQUIRE(std::equal(want.begin(), want.end(), buf.begin()));
                        read += got.bytes;
                        break;
                    }
                    case 3: (void)r.reader.peek(buf.data(), next(64)); break;
                    case 4: read += r.reader.skip(next(32)).bytes; break;
                    case 5: r.reader.seek(r.reader.consumed(), r.reader.partial()); break;  // a forked copy's view
                    default: break;
                }
                REQUIRE(r.reader.readable_bytes() == written - read);
                REQUIRE(r.reader.fin_landed() == fin);
                if (next(50) == 0) {  // another reader taking over from here (a downgrade's read-back)
                    RingReader other(r.ring, cap, r);
                    other.seek(r.reader.consumed(), r.reader.partial());
                    REQUIRE(other.readable_bytes() == written - read);
                    REQUIRE(other.fin_landed() == fin);
                }
            }
            REQUIRE(r.reader.status() == RingStatus::ok);
        }
    }
}

// poll() asks fin_landed() without the read lock, beside a reader in another
// thread: it must never claim a FIN that was not written, and must see it once it was.
TEST_CASE("the end of stream is seen by a poller beside a concurrent reader, never early") {
    LocalRing r(4096);
    constexpr uint64_t kTotal = 300000;
    std::atomic<bool> fin_started{false}, done{false}, early{false};
    std::thread writer([&] {
        uint64_t sent = 0;
        while (sent < kTotal) {
            auto data = pattern(sent, std::min<uint64_t>(1 + sent % 13, kTotal - sent));
            sent += r.writer.write(data.data(), data.size()).bytes;
        }
        fin_started = true;
        while (r.writer.write_fin() != RingStatus::ok) std::this_thread::yield();
    });
    std::thread poller([&] {
        // fin_started is set before the FIN is written: read after the look.
        while (!done)
            if (r.reader.fin_landed() && !fin_started.load()) early = true;
    });
    uint64_t got = 0;
    std::vector<uint8_t> buf(100);
    bool mismatch = false;
    for (;;) {
        IoResult res = r.reader.read(buf.data(), 1 + got % 97);
        if (res.status == RingStatus::eof) break;
        auto want = pattern(got, res.bytes);
        mismatch |= !std::equal(want.begin(), want.end(), buf.begin());
        got += res.bytes;
    }
    writer.join();
    CHECK(r.reader.fin_landed());
    done = true;
    poller.join();
    CHECK(got == kTotal);
    CHECK_FALSE(mismatch);
    CHECK_FALSE(early);
    CHECK(r.reader.status() == RingStatus::ok);
}

// poll() from another thread looks from the reader's position as it last saw
// it; by the time it inspects, the reader may have consumed that record and the
// writer put the next lap's there. Such a look must never break the ring.
TEST_CASE("a poller beside a fast reader never breaks the ring") {
    LocalRing r(1024);
    constexpr uint64_t kTotal = 2000000;
    std::atomic<bool> done{false};
    std::thread writer([&] {
        for (uint64_t sent = 0; sent < kTotal && !done;) {  // (done: the reader gave up)
            auto data = pattern(sent, std::min<uint64_t>(1 + sent % 29, kTotal - sent));
            sent += r.writer.write(data.data(), data.size()).bytes;
        }
        while (!done && r.writer.write_fin() != RingStatus::ok) std::this_thread::yield();
    });
    std::thread poller([&] {
        while (!done) (void)r.reader.poll(), (void)r.reader.fin_landed();
    });
    uint64_t got = 0;
    std::vector<uint8_t> buf(64);
    IoResult res;
    while ((res = r.reader.read(buf.data(), buf.size())).status != RingStatus::eof && res.status != RingStatus::broken)
        got += res.bytes;
    done = true;
    writer.join();
    poller.join();
    CHECK(r.reader.error() == "");
    CHECK(got == kTotal);
}

// poll() asks writable() beside a writer in another thread: the peer's counter
// may already count a record whose end that thread has not seen the writer
// store yet. A look must never take that for a lying peer.
TEST_CASE("a poller asking for space beside a busy writer never breaks the ring") {
    LocalRing r(1024);
    r.post_spin = 200;  // widens the window between a record landing and written_ moving
    constexpr uint64_t kTotal = 2000000;
    std::atomic<bool> done{false};
    std::thread poller([&] {
        while (!done) (void)r.writer.writable();
    });
    std::thread reader([&] {
        std::vector<uint8_t> buf(64);
        uint64_t got = 0;
        while (got < kTotal && !done) got += r.reader.read(buf.data(), buf.size()).bytes;
    });
    uint64_t sent = 0;
    while (sent < kTotal && r.writer.status() == RingStatus::ok) {
        auto data = pattern(sent, std::min<uint64_t>(1 + sent % 29, kTotal - sent));
        sent += r.writer.write(data.data(), data.size()).bytes;
    }
    done = r.writer.status() != RingStatus::ok;  // a broken writer: let the reader go
    reader.join();
    done = true;
    poller.join();
    CHECK(r.writer.error() == "");
    CHECK(sent == kTotal);
}
