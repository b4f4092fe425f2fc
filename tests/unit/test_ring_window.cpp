// A writer that uses only a window of its ring (ring_writer.hpp): records wrap
// at the window's end, the window doubles when the writer finds it full, and
// the writer never touches ring memory it has not had backed first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "local_ring.hpp"

using namespace rdmasock::ring;
using rdmasock::test::LocalRing;
using rdmasock::test::pattern;

namespace {

// Streams `total` pattern bytes through the ring: writes of random sizes up to
// `max_write`, reads of random sizes; checks every byte.
void stream_through(LocalRing& r, size_t total, size_t max_write, uint64_t seed) {
    std::mt19937_64 rng(seed);
    const auto data = pattern(0, total);
    std::vector<uint8_t> got(total);
    size_t sent = 0, recvd = 0;
    for (int spins = 0; recvd < total; ++spins) {
        REQUIRE(spins < 10'000'000);
        if (sent < total) {
            const size_t n = std::min<size_t>(total - sent, 1 + rng() % max_write);
            sent += r.writer.write(data.data() + sent, n).bytes;
        }
        const size_t n = std::min<size_t>(total - recvd, 1 + rng() % (2 * max_write));
        recvd += r.reader.read(got.data() + recvd, n).bytes;
        REQUIRE(r.reader.status() == RingStatus::ok);
        REQUIRE(r.writer.status() == RingStatus::ok);
    }
    REQUIRE(got == data);
}

// `len` pattern bytes from stream offset `stream` written and read back, each
// checked: the reader reads after every write (read_now), or only once the
// writer has put all or found the ring full (a writer that runs ahead).
void send_then_read(LocalRing& r, uint64_t& stream, size_t len, bool read_now) {
    auto data = pattern(stream, len);
    size_t put = 0, got = 0;
    std::vector<uint8_t> back(len);
    while (got < len) {
        size_t w = 0;
        if (put < len) put += w = r.writer.write(data.data() + put, len - put).bytes;
        if (read_now || put == len || w == 0) got += r.reader.read(back.data() + got, len - got).bytes;
    }
    REQUIRE(back == data);
    stream += len;
}

}  // namespace

TEST_CASE("small messages stay in the first window, however long the connection lives") {
    LocalRing r(1 << 20, kFirstWindow);
    uint64_t stream = 0;
    for (int i = 0; i < 20000; ++i) {
        const size_t len = 1 + (i * 37) % 1500;
        auto data = pattern(stream, len);
        REQUIRE(r.writer.write(data.data(), len).bytes == len);
        std::vector<uint8_t> back(len);
        REQUIRE(r.reader.read(back.data(), len).bytes == len);
        REQUIRE(back == data);
        stream += len;
    }
    CHECK(r.writer.window() == kFirstWindow);
    CHECK(r.backs == 0);
    CHECK(r.outside_backing == 0);
    // Nothing past the window was ever written (or zeroed by the reader).
    CHECK(std::all_of(r.memory.begin() + kFirstWindow, r.memory.end(), [](uint8_t b) { return b == 0; }));
}

TEST_CASE("a window the writer keeps filling doubles up to the ring, backed before use") {
    const uint64_t cap = 1 << 20;
    LocalRing r(cap, 4096);
    std::vector<uint8_t> buf(cap);
    uint64_t stream = 0;
    for (int round = 0; round < 20; ++round) {  // fill, then drain: a bulk sender ahead of its reader
        auto data = pattern(stream, cap);
        size_t put = 0;
        for (IoResult w; (w = r.writer.write(data.data() + put, cap - put)).bytes > 0;) put += w.bytes;
        size_t got = 0;
        for (IoResult rd; (rd = r.reader.read(buf.data() + got, cap - got)).bytes > 0;) got += rd.bytes;
        REQUIRE(got == put);
        REQUIRE(std::equal(buf.begin(), buf.begin() + got, data.begin()));
        stream += put;
    }
    CHECK(r.writer.window() == cap);
    CHECK(r.backs == 8);  // 4 KiB .. 1 MiB
    CHECK(r.bad_backs == 0);
    CHECK(r.outside_backing == 0);
}

TEST_CASE("a sink that cannot back more keeps the window, and every byte still arrives") {
    LocalRing r(1 << 16, 2048);
    r.back_ok = false;
    stream_through(r, 1 << 20, 5000, 2);
    CHECK(r.writer.window() == 2048);
    CHECK(r.outside_backing == 0);
    CHECK(std::all_of(r.memory.begin() + 2048, r.memory.end(), [](uint8_t b) { return b == 0; }));
}

TEST_CASE("random traffic through a growing window keeps every byte, in order") {
    for (uint64_t seed = 10; seed < 16; ++seed) {
        LocalRing r(1 << 16, 1024);
        stream_through(r, 3 << 20, 1 + seed * 997 % 9000, seed);
        CHECK(r.outside_backing == 0);
        CHECK(r.bad_backs == 0);
    }
}

TEST_CASE("a full window still takes the end of stream, wherever it stands") {
    const uint64_t cap = 1 << 14, window = 2048;
    for (uint64_t start = 0; start < window; start += kAlign) {
        LocalRing r(cap, window);
        r.back_ok = false;  // the window stays small: the end must fit inside it
        uint8_t b[64] = {};
        // Move to `start` with small records, each read at once.
        for (int i = 0; i < 10000 && r.writer.written() % cap != start; ++i) {
            const uint64_t d = (start - r.writer.written() % cap) & (window - 1);
            const size_t len = d >= 40 ? 16 : 8;
            REQUIRE(r.writer.write(b, len).bytes == len);
            REQUIRE(r.reader.read(b, sizeof b).bytes == len);
        }
        if (r.writer.written() % cap != start) continue;  // not a record boundary in a window lap
        std::vector<uint8_t> big(2 * window, 7);
        size_t sent = 0;
        for (IoResult w; (w = r.writer.write(big.data() + sent, big.size() - sent)).bytes > 0;) sent += w.bytes;
        REQUIRE(sent > 0);
        REQUIRE(r.writer.write_fin() == RingStatus::ok);
        std::vector<uint8_t> got(big.size());
        size_t n = 0;
        IoResult rd;
        while ((rd = r.reader.read(got.data() + n, got.size() - n)).bytes > 0) n += rd.bytes;
        CHECK(n == sent);
        CHECK(rd.status == RingStatus::eof);
        CHECK(r.outside_backing == 0);
    }
}

TEST_CASE("a writer that finds its window full is released once the reader has read everything") {
    // The reader publishes its place lazily (an eighth of the window it has
    // seen); a blocked writer must never wait on a reader with nothing left.
    for (uint64_t window : {1024ull, 4096ull, 1ull << 16}) {
        LocalRing r(1 << 16, window);
        r.back_ok = false;
        std::vector<uint8_t> buf(3 * window, 1);
        for (int round = 0; round < 200; ++round) {
            size_t put = 0;
            for (IoResult w; (w = r.writer.write(buf.data(), 1 + (round * 131) % buf.size())).bytes > 0;) put += w.bytes;
            CHECK_FALSE(r.writer.writable());
            size_t got = 0;
            for (IoResult rd; (rd = r.reader.read(buf.data(), buf.size())).bytes > 0;) got += rd.bytes;
            REQUIRE(got == put);
            REQUIRE(r.writer.has_space());
            REQUIRE(r.writer.writable());
        }
    }
}

TEST_CASE("a grown window goes back once the flow fits the first one again, after the reader passed it") {
    const uint64_t cap = 1 << 18, first = 4096;
    for (uint64_t bulk : {40000ull, 100000ull, 200000ull, 600000ull}) {  // where the writer stands when it shrinks varies
        LocalRing r(cap, first);
        uint64_t stream = 0;
        auto send_and_read = [&](size_t len, bool read_now) { send_then_read(r, stream, len, read_now); };
        for (int i = 0; i < 4; ++i) send_and_read(bulk, false);  // the writer runs ahead: the window grows
        const uint64_t grown = r.writer.window();
        REQUIRE(grown > first);
        for (uint32_t i = 0; i < RingWriter::kShrinkAfter + 2; ++i) send_and_read(100, true);
        CHECK(r.writer.window() == first);
        // The memory past the first window goes back once the reader passed the wrap marker.
        for (int i = 0; i < 3; ++i) send_and_read(100, true);
        CHECK(r.releases == 1);
        CHECK(r.backed_bytes() == first);
        CHECK(r.bad_backs == 0);
        // Small messages go on inside it and never touch what was given back...
        for (int i = 0; i < 2000; ++i) send_and_read(300, true);
        CHECK(r.outside_backing == 0);
        CHECK(std::all_of(r.memory.begin() + first, r.memory.end(), [](uint8_t b) { return b == 0; }));
        // ...and a bulk sender grows it again, backed first.
        for (int i = 0; i < 4; ++i) send_and_read(bulk, false);
        CHECK(r.writer.window() > first);
        CHECK(r.outside_backing == 0);
        CHECK(r.bad_backs == 0);
    }
}

TEST_CASE("a reader that stops reading holds the writer at the ring, not at a window, as before windows") {
    // The writer wraps only when the reader is nearly through the window; a
    // reader that lags makes the window grow. So a peer that does not read
    // takes as much as the whole ring would have taken, wherever it stopped.
    const uint64_t cap = 1 << 16;
    for (size_t exchanged : {0ul, 700ul, 5000ul, 20000ul}) {  // small traffic first: the writer may have wrapped
        LocalRing r(cap, 1024);
        std::vector<uint8_t> buf(cap, 3);
        for (size_t done = 0; done < exchanged; done += 100) {
            REQUIRE(r.writer.write(buf.data(), 100).bytes == 100);
            REQUIRE(r.reader.read(buf.data(), 100).bytes == 100);
        }
        size_t taken = 0;
        for (IoResult w; (w = r.writer.write(buf.data(), 3000)).bytes > 0;) {
            taken += w.bytes;
            if (taken < cap / 2) CHECK(r.writer.writable());  // poll says POLLOUT as over the whole ring
        }
        CHECK(taken >= cap * 3 / 4);
        CHECK_FALSE(r.writer.writable());
        CHECK(r.outside_backing == 0);
        size_t got = 0;
        for (IoResult rd; (rd = r.reader.read(buf.data(), buf.size())).bytes > 0;) got += rd.bytes;
        CHECK(got == taken);
    }
}

TEST_CASE("a window that goes back while the reader lags still takes the end of stream") {
    // Small writes the reader does not read: the window may go back at a point
    // where a wrap marker would leave no room for the end of stream; it waits.
    const uint64_t cap = 1 << 16, first = 1024;
    LocalRing r(cap, first);
    std::vector<uint8_t> buf(cap, 5);
    for (int i = 0; i < 8; ++i) {  // grow the window
        size_t put = 0;
        for (IoResult w; (w = r.writer.write(buf.data(), 4000)).bytes > 0;) put += w.bytes;
        size_t got = 0;
        for (IoResult rd; (rd = r.reader.read(buf.data(), buf.size())).bytes > 0;) got += rd.bytes;
        REQUIRE(got == put);
    }
    REQUIRE(r.writer.window() > first);
    size_t put = 0;
    for (int i = 0; i < 4000; ++i) put += r.writer.write(buf.data(), 100).bytes;  // the reader does not read
    REQUIRE(r.writer.write_fin() == RingStatus::ok);
    size_t got = 0;
    IoResult rd;
    while ((rd = r.reader.read(buf.data(), buf.size())).bytes > 0) got += rd.bytes;
    CHECK(got == put);
    CHECK(rd.status == RingStatus::eof);
    CHECK(r.outside_backing == 0);
}

TEST_CASE("a window that grows again before its memory was given back keeps every byte") {
    // Shrink while the reader lags (the give-back waits for it), then a bulk
    // writer grows the window again over that memory: the give-back must not
    // free it under the new records (a zeroed wrap marker stalls the reader).
    const uint64_t cap = 1 << 16, first = 1024;
    LocalRing r(cap, first);
    uint64_t sent = 0, recvd = 0;
    std::vector<uint8_t> in(cap);
    auto write_some = [&](size_t len) {
        auto data = pattern(sent, len);
        size_t n = r.writer.write(data.data(), len).bytes;
        sent += n;
        return n;
    };
    auto read_some = [&](size_t len) {
        size_t n = r.reader.read(in.data(), std::min(len, in.size())).bytes;
        REQUIRE(std::equal(in.begin(), in.begin() + n, pattern(recvd, n).begin()));
        recvd += n;
        return n;
    };
    for (int round = 0; round < 30; ++round) {
        while (write_some(5000) > 0) {}                       // bulk: the window grows
        while (read_some(cap) > 0) {}
        for (uint32_t i = 0; i < RingWriter::kShrinkAfter + 5; ++i) {
            write_some(40);                                   // small writes: it goes back...
            if (i % 3 == 0) read_some(30);                    // ...while the reader lags behind
        }
        for (int i = 0; i < 5; ++i) write_some(3000);         // and grows again before the give-back
        while (read_some(cap) > 0) {}
        REQUIRE(recvd == sent);
        REQUIRE(r.reader.status() == RingStatus::ok);
    }
    CHECK(r.bad_backs == 0);
    CHECK(r.outside_backing == 0);
}

TEST_CASE("a writer in a window that went back, refused more memory, is released by a reader that drains") {
    // The reader last saw the whole ring as the window (it publishes lazily
    // then); the writer went back to its first window without a wrap marker
    // and may not grow: only the reader's publication on draining frees it.
    const uint64_t cap = 1 << 16, first = 1024;
    for (size_t lead = 0; lead < 3000; lead += 8) {
        LocalRing r(cap, first);
        std::vector<uint8_t> buf(cap, 9);
        for (int i = 0; i < 3; ++i) {  // the window grows to the ring and wraps at its end
            while (r.writer.write(buf.data(), 6000).bytes > 0) {}
            while (r.reader.read(buf.data(), buf.size()).bytes > 0) {}
        }
        if (r.writer.window() != cap) continue;
        // Land just past a lap's start, so the window goes back without a marker.
        const uint64_t to_lap_end = cap - (r.writer.written() & (cap - 1));
        for (uint64_t left = to_lap_end + lead; left > 64;) {
            const size_t n = std::min<uint64_t>(left - 64, 1000);
            if (n < 8) break;
            REQUIRE(r.writer.write(buf.data(), n).bytes == n);
            REQUIRE(r.reader.read(buf.data(), buf.size()).bytes == n);
            left -= record_bytes(static_cast<uint32_t>(n));
        }
        for (uint32_t i = 0; i <= RingWriter::kShrinkAfter; ++i) {
            REQUIRE(r.writer.write(buf.data(), 8).bytes == 8);
            REQUIRE(r.reader.read(buf.data(), buf.size()).bytes == 8);
        }
        r.back_ok = false;
        while (r.writer.write(buf.data(), 500).bytes > 0) {}
        while (r.reader.read(buf.data(), buf.size()).bytes > 0) {}
        REQUIRE(r.writer.has_space());
    }
}

TEST_CASE("a drained grown window goes back at once, its memory given back but the wrap marker's page") {
    const uint64_t cap = 1 << 18, first = 4096;
    // Bulk sizes that leave the writer inside the first window or past it, at many offsets.
    for (uint64_t bulk = 5000; bulk < 700000; bulk += 37123) {
        LocalRing r(cap, first);
        uint64_t stream = 0;
        auto send_and_read = [&](size_t len, bool read_now) { send_then_read(r, stream, len, read_now); };
        send_and_read(bulk, false);
        if (!r.writer.window_grown()) continue;
        const uint64_t grown = r.writer.window();
        // Not all read: nothing changes.
        auto more = pattern(stream, 100);
        REQUIRE(r.writer.write(more.data(), 100).bytes == 100);
        CHECK_FALSE(r.writer.give_back_if_drained());
        CHECK(r.writer.window() == grown);
        std::vector<uint8_t> back(100);
        REQUIRE(r.reader.read(back.data(), 100).bytes == 100);
        REQUIRE(back == more);
        stream += 100;
        // All read: the first window again, and at most one page of the rest still held.
        REQUIRE(r.writer.give_back_if_drained());
        CHECK(r.writer.window() == first);
        CHECK(r.backed_bytes() <= first + RingWriter::kGiveBackPage);
        CHECK(r.bad_backs == 0);
        // The reader passes the marker with the next message; that page goes at the next write.
        send_and_read(300, true);
        send_and_read(300, true);
        CHECK(r.backed_bytes() == first);
        CHECK(r.outside_backing == 0);
        CHECK(std::all_of(r.memory.begin() + first, r.memory.end(), [](uint8_t b) { return b == 0; }));
        // A later bulk grows it again, backed first, every byte in order; and it goes back again.
        send_and_read(bulk, false);
        send_and_read(bulk / 3 + 1, false);
        CHECK(r.bad_backs == 0);
        CHECK(r.outside_backing == 0);
        REQUIRE(r.writer.give_back_if_drained());
        send_and_read(1000, true);
        CHECK(r.writer.give_back_if_drained());  // the marker's page, if one stayed
        CHECK(r.backed_bytes() == first);
        CHECK(r.bad_backs == 0);
    }
}

TEST_CASE("a window that grows over the wrap marker's page before it went back keeps every byte") {
    const uint64_t cap = 1 << 18, first = 4096;
    for (uint64_t bulk = 20000; bulk < 260000; bulk += 9973) {
        LocalRing r(cap, first);
        std::vector<uint8_t> got(cap);
        uint64_t stream = 0;
        auto bulk_unread = [&](size_t len) {  // written while the reader waits, then read whole
            auto data = pattern(stream, len);
            size_t put = 0;
            while (put < len) {
                const size_t w = r.writer.write(data.data() + put, len - put).bytes;
                if (w == 0) break;
                put += w;
            }
            size_t n = 0;
            for (IoResult rd; (rd = r.reader.read(got.data() + n, put - n)).bytes > 0;) n += rd.bytes;
            REQUIRE(n == put);
            REQUIRE(std::equal(got.begin(), got.begin() + static_cast<long>(n), data.begin()));
            stream += put;
        };
        bulk_unread(bulk);
        if (!r.writer.window_grown() || !r.writer.give_back_if_drained()) continue;
        // Before the reader passed the marker, a bulk write grows the window over its page.
        bulk_unread(bulk + 50000);
        bulk_unread(bulk);
        CHECK(r.bad_backs == 0);
        CHECK(r.outside_backing == 0);
        REQUIRE(r.writer.give_back_if_drained());
        bulk_unread(100);
        CHECK(r.writer.give_back_if_drained());
        CHECK(r.backed_bytes() == first);
        CHECK(r.bad_backs == 0);
    }
}
