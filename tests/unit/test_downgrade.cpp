// The way back to TCP on one direction (common/downgrade.*): a real shared
// ring pair in one process, the "TCP socket" a byte vector.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "ring/downgrade.hpp"
#include "ring/ring_reader.hpp"
#include "shm/shm_channel.hpp"

using namespace rdmasock;

namespace {

struct Pair {
    std::unique_ptr<ShmChannel> a, b;  // a writes the ring b reads
    Pair() {
        std::string err;
        a = ShmChannel::create_sealed(1 << 16, err);
        REQUIRE(a);
        b = ShmChannel::attach_sealed(dup(a->memfd_fd()), 1 << 16, err);
        REQUIRE(b);
    }
    RingControl& ctl() { return a->tx_control(); }  // the same page as b->rx_control()
    // What the reader leaves behind when it lets go of reader_busy.
    void publish_place() {
        ctl().read_pos.store(b->reader().consumed());
        ctl().read_partial.store(b->reader().partial());
    }
};

struct Capture final : downgrade::Resend {
    std::vector<uint8_t> bytes;
    bool ended = false;
    bool send_all(const void* d, size_t n) override {
        auto p = static_cast<const uint8_t*>(d);
        bytes.insert(bytes.end(), p, p + n);
        return true;
    }
    void end_of_stream() override { ended = true; }
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed);
    return v;
}

}  // namespace

TEST_CASE("a take-back resends exactly the bytes the reader has not read even from the middle of a record") {
    Pair p;
    auto data = pattern(10000, 1);
    REQUIRE(p.a->writer().write(data.data(), 6000).bytes == 6000);
    REQUIRE(p.a->writer().write(data.data() + 6000, 4000).bytes == 4000);
    uint8_t buf[2500];
    REQUIRE(p.b->reader().read(buf, sizeof buf).bytes == 2500);  // 2500 of the first 6000-byte record
    p.publish_place();
    Capture out;
    auto t = downgrade::take_back(p.ctl(), p.a->tx_ring(), 1 << 16, getpid(), out);
    CHECK(t.ok);
    CHECK_FALSE(t.fin);
    CHECK(t.resent == 7500);
    CHECK(out.bytes == std::vector<uint8_t>(data.begin() + 2500, data.end()));
    CHECK(downgrade::state(p.ctl()) == RingControl::back);
    // Idempotent: a second take-back sends nothing more.
    Capture again;
    CHECK(downgrade::take_back(p.ctl(), p.a->tx_ring(), 1 << 16, getpid(), again).resent == 0);
    CHECK(again.bytes.empty());
}

TEST_CASE("a take-back carries the writer's FIN to TCP") {
    Pair p;
    auto data = pattern(300, 2);
    REQUIRE(p.a->writer().write(data.data(), data.size()).bytes == data.size());
    REQUIRE(p.a->writer().write_fin() == ring::RingStatus::ok);
    Capture out;
    auto t = downgrade::take_back(p.ctl(), p.a->tx_ring(), 1 << 16, getpid(), out);
    CHECK(t.ok);
    CHECK(t.fin);
    CHECK(out.ended);
    CHECK(out.bytes == data);
}

TEST_CASE("a reader completes the switch alone only when the writer is idle and nothing is unread") {
    Pair p;
    auto& c = p.ctl();
    SECTION("empty ring, idle writer: back at once") {
        CHECK(downgrade::ask(c) == RingControl::asked);
        CHECK(downgrade::writer_idle(c));
        CHECK(downgrade::complete_alone(c) == RingControl::back);
    }
    SECTION("a busy writer: stays asked, and the writer's take-back finishes it") {
        REQUIRE(downgrade::try_lock(c.writer_busy, getpid()));
        CHECK(downgrade::ask(c) == RingControl::asked);
        CHECK_FALSE(downgrade::writer_idle(c));
        auto data = pattern(100, 3);
        REQUIRE(p.a->writer().write(data.data(), data.size()).bytes == data.size());  // landed while busy
        Capture out;
        CHECK(downgrade::take_back(c, p.a->tx_ring(), 1 << 16, getpid(), out).resent == 100);
        downgrade::unlock(c.writer_busy);
        CHECK(downgrade::state(c) == RingControl::back);
        CHECK(out.bytes == data);
    }
    SECTION("a ring with bytes left: asked; a second ask changes nothing") {
        uint8_t x = 7;
        REQUIRE(p.a->writer().write(&x, 1).bytes == 1);
        CHECK(downgrade::ask(c) == RingControl::asked);
        CHECK(p.b->reader().poll() != ring::RingStatus::would_block);  // so the reader must not complete
        CHECK(downgrade::ask(c) == RingControl::asked);
    }
    SECTION("once back, an ask is answered back") {
        Capture out;
        downgrade::take_back(c, p.a->tx_ring(), 1 << 16, getpid(), out);
        CHECK(downgrade::ask(c) == RingControl::back);
    }
}

TEST_CASE("a busy word held by a process that died is taken over") {
    Pair p;
    auto& w = p.ctl().writer_busy;
    pid_t child = fork();
    if (child == 0) {
        (void)downgrade::lock(w, getpid());
        _exit(0);  // dies holding it
    }
    int st;
    REQUIRE(waitpid(child, &st, 0) == child);
    REQUIRE(w.load() == child);
    CHECK_FALSE(downgrade::try_lock(w, getpid()));
    CHECK(downgrade::lock(w, getpid()));  // the holder is gone
    CHECK(w.load() == getpid());
    downgrade::unlock(w);
}

TEST_CASE("a take-back of a ring that fails validation reports it and sends nothing") {
    Pair p;
    auto data = pattern(64, 4);
    REQUIRE(p.a->writer().write(data.data(), data.size()).bytes == data.size());
    p.a->tx_ring()[0] ^= 0x55;  // a hostile reader scribbled over the record header
    Capture out;
    auto t = downgrade::take_back(p.ctl(), p.a->tx_ring(), 1 << 16, getpid(), out);
    CHECK_FALSE(t.ok);
    CHECK_FALSE(t.err.empty());
    CHECK(out.bytes.empty());
}

TEST_CASE("a busy word a live process never lets go of is given up after the patience, not waited for forever") {
    Pair p;
    auto& w = p.ctl().writer_busy;
    w.store(static_cast<int32_t>(getppid()));  // alive, and never letting go (a hostile peer writes it)
    CHECK_FALSE(downgrade::lock(w, getpid()));
    CHECK(w.load() == getppid());
}

// ---------------------------------------------------------------- in band (RDMA)

#include "negotiation/back_marker.hpp"
#include "ring/record_sink.hpp"
#include "ring/ring_writer.hpp"

namespace {

// The RDMA shape without verbs: the writer stages each record in its own copy
// of the ring (the send mirror), a "post" copies it to the reader's ring.
struct MirrorPair : ring::RecordSink, ring::ConsumedPublisher {
    static constexpr uint64_t kCap = 4096;
    std::vector<uint8_t> mirror = std::vector<uint8_t>(kCap), remote = std::vector<uint8_t>(kCap);
    std::atomic<uint64_t> consumed{0};
    bool post_ok = true;
    ring::RingWriter writer{kCap, *this, &consumed};
    ring::RingReader reader{remote.data(), kCap, *this};
    RingControl tx;  // the writer's own control: the reader's place arrives in a marker

    uint8_t* stage(uint64_t off, uint64_t) override { return mirror.data() + off; }
    bool post(uint64_t off, uint64_t bytes) override {
        if (!post_ok) return false;
        std::memcpy(remote.data() + off, mirror.data() + off, bytes);
        return true;
    }
    bool publish_consumed(uint64_t c) override {
        consumed.store(c);
        return true;
    }
    // The reader's marker, as the writer's side stores it.
    void marker_arrives() {
        uint8_t m[back_marker::kBytes];
        back_marker::encode({reader.consumed(), reader.partial()}, m);
        back_marker::Place p;
        REQUIRE(back_marker::parse(m, sizeof m, p) == back_marker::Parse::ok);
        tx.read_pos.store(p.read_pos);
        tx.read_partial.store(p.read_partial);
        tx.back_state.store(RingControl::asked);
    }
    downgrade::TakeBack take_back(Capture& out) {
        return downgrade::take_back_until(tx, mirror.data(), kCap, writer.written(), out);
    }
};

}  // namespace

TEST_CASE("an in-band take-back resends from the reader's place to the writer's last record, laps later") {
    MirrorPair p;
    auto data = pattern(50000, 3);
    size_t sent = 0, got = 0;
    std::vector<uint8_t> read;
    // Many laps of the 4 KiB ring, so the mirror beyond the last record holds stale older laps.
    while (sent < 40000) {
        sent += p.writer.write(data.data() + sent, std::min<size_t>(700, 40000 - sent)).bytes;
        uint8_t buf[512];
        auto r = p.reader.read(buf, sizeof buf);
        read.insert(read.end(), buf, buf + r.bytes);
        got += r.bytes;
    }
    REQUIRE(p.reader.partial() > 0);  // stopped inside a record
    p.marker_arrives();
    Capture out;
    auto t = p.take_back(out);
    REQUIRE(t.ok);
    CHECK_FALSE(t.fin);
    CHECK(downgrade::state(p.tx) == RingControl::back);
    read.insert(read.end(), out.bytes.begin(), out.bytes.end());
    REQUIRE(read.size() == sent);
    CHECK(std::equal(read.begin(), read.end(), data.begin()));
    Capture again;  // idempotent
    CHECK(p.take_back(again).resent == 0);
}

TEST_CASE("an in-band take-back ends with the writer's FIN and never resends a record whose post failed") {
    MirrorPair p;
    auto data = pattern(3000, 5);
    REQUIRE(p.writer.write(data.data(), 1000).bytes == 1000);
    p.post_ok = false;  // the QP broke: this record never left
    CHECK(p.writer.write(data.data() + 1000, 1000).bytes == 0);
    p.marker_arrives();
    Capture out;
    auto t = p.take_back(out);
    REQUIRE(t.ok);
    CHECK(out.bytes == std::vector<uint8_t>(data.begin(), data.begin() + 1000));

    MirrorPair q;
    REQUIRE(q.writer.write(data.data(), 500).bytes == 500);
    REQUIRE(q.writer.write_fin() == ring::RingStatus::ok);
    uint8_t buf[100];
    REQUIRE(q.reader.read(buf, sizeof buf).bytes == 100);
    q.marker_arrives();
    Capture fin;
    auto f = q.take_back(fin);
    REQUIRE(f.ok);
    CHECK(f.fin);
    CHECK(fin.ended);
    CHECK(fin.bytes == std::vector<uint8_t>(data.begin() + 100, data.begin() + 500));
}

TEST_CASE("an in-band take-back refuses a place that is no record of ours and sends nothing") {
    auto data = pattern(3000, 7);
    auto bad = [&](uint64_t pos, uint32_t partial) {
        MirrorPair p;
        REQUIRE(p.writer.write(data.data(), 1000).bytes == 1000);
        REQUIRE(p.writer.write(data.data(), 1000).bytes == 1000);
        p.tx.read_pos.store(pos);
        p.tx.read_partial.store(partial);
        p.tx.back_state.store(RingControl::asked);
        Capture out;
        auto t = p.take_back(out);
        CHECK_FALSE(t.ok);
        CHECK_FALSE(t.err.empty());
        CHECK(out.bytes.empty());
    };
    bad(8, 0);                          // inside the first record
    bad(0, 5000);                       // a partial past its record
    bad(1u << 20, 0);                   // past the writer's end
    bad(ring::record_bytes(1000) + 4, 0);  // misaligned
}

TEST_CASE("a back marker parses only whole and intact, and a stray byte is told apart at once") {
    uint8_t m[back_marker::kBytes];
    back_marker::encode({123456789012ull, 77}, m);
    back_marker::Place p;
    REQUIRE(back_marker::parse(m, sizeof m, p) == back_marker::Parse::ok);
    CHECK(p.read_pos == 123456789012ull);
    CHECK(p.read_partial == 77);
    CHECK(back_marker::parse(m, 1, p) == back_marker::Parse::need_more);
    CHECK(back_marker::parse(m, 23, p) == back_marker::Parse::need_more);
    const uint8_t stray[] = {'h', 'i'};
    CHECK(back_marker::parse(stray, 2, p) == back_marker::Parse::stray);
    CHECK(back_marker::parse(m, 0, p) == back_marker::Parse::need_more);
    m[12] ^= 1;  // a torn position
    CHECK(back_marker::parse(m, sizeof m, p) == back_marker::Parse::stray);
    m[12] ^= 1;
    m[2] = 'X';
    CHECK(back_marker::parse(m, 3, p) == back_marker::Parse::stray);
}
