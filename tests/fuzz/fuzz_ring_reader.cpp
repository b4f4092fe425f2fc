// libFuzzer target: the ring reader (and writer) facing a hostile peer.
//
// The peer of a ring controls every byte of the ring it writes and the consumed
// counter it publishes. This target gives the fuzzer both:
//
// Reader mode: the ring memory is an exactly sized heap buffer (ASan sees any
// access outside it). After an honest warm-up (real RingWriter -> RingReader,
// which moves the reader to an arbitrary absolute position, possibly in the middle
// of a record), a sequence of operations mixes
//   - hostile edits: overwrite raw bytes, forge records (any kind/length, footer
//     right for the position, right for another lap, a landing prefix, or raw),
//     load a whole ring image;
//   - honest writes through the real RingWriter;
//   - every reader entry point: read, readv (split iovecs), peek, skip, poll,
//     readable_bytes, flush_consumed.
// Each reader call is compared with an independent model of docs/protocol.md
// computed on a snapshot of the ring taken just before the call (looks -- poll,
// readable_bytes -- never make the ring broken, only reads do; readable_bytes
// keeps a scan of what it counted, so it is exact until a hostile edit and
// after one only bounded by the ring): the bytes
// delivered (exactly the payload of records whose header and footer validate, in
// order, never anything else), the status, the consumed position, the bytes the
// reader zeroes (exactly the records it consumed, nothing else), "broken" being
// sticky, published positions (8-aligned, monotonic, never past consumed).
//
// Writer mode: a RingWriter whose consumed counter is set by the fuzzer to
// arbitrary values between operations (an honest RingReader can also read and
// publish). The writer must only ever stage records inside the ring, 8-aligned,
// never more than `capacity` ahead of the largest counter value it was shown,
// never after reporting "broken" (which is sticky); while the counter is honest,
// the writer never breaks, every byte the reader gets is exactly the writer's
// stream, and a reader that drained and flushed always leaves the writer room.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "ring/ring_format.hpp"
#include "ring/ring_reader.hpp"
#include "ring/ring_writer.hpp"

using namespace rdmasock::ring;

namespace {

[[noreturn]] void fail_at(const char* what, int line) {
    std::fprintf(stderr, "fuzz_ring_reader: property violated (line %d): %s\n", line, what);
    std::abort();
}
#define CHECK(cond)                           \
    do {                                      \
        if (!(cond)) fail_at(#cond, __LINE__); \
    } while (0)

// Sequential little-endian input cursor; reads zero once exhausted.
struct Input {
    const uint8_t* p;
    size_t left;
    bool empty() const { return left == 0; }
    uint64_t take(int n) {
        uint64_t v = 0;
        for (int i = 0; i < n && left > 0; ++i, ++p, --left) v |= static_cast<uint64_t>(*p) << (8 * i);
        return v;
    }
    uint8_t u8() { return static_cast<uint8_t>(take(1)); }
    uint16_t u16() { return static_cast<uint16_t>(take(2)); }
    uint32_t u32() { return static_cast<uint32_t>(take(4)); }
    uint64_t u64() { return take(8); }
    size_t bytes(uint8_t* dst, size_t n) {
        size_t k = n < left ? n : left;
        std::memcpy(dst, p, k);
        p += k, left -= k;
        return k;
    }
};

uint8_t stream_byte(uint64_t i) { return static_cast<uint8_t>((i * 0x9E3779B1u) >> 11 ^ i); }

uint32_t get32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// ------------------------------------------------------------------ the model

enum class MState { ok, block, broken };
struct MRec {
    MState state;
    RecordKind kind;
    uint32_t length;
};

// docs/protocol.md, "Validation": what a record at absolute position `pos` is.
MRec model_inspect(const uint8_t* ring, uint64_t cap, uint64_t pos) {
    const uint64_t off = pos & (cap - 1);
    const uint32_t header = get32(ring + off);
    const uint32_t kind = header >> 24, len = header & 0xffffff;
    if (kind == 0) return {MState::block, RecordKind::none, 0};
    if (kind == 1) {
        if (len > max_payload(cap) || off + 8 + ((len + 7) & ~7ull) > cap) return {MState::broken, RecordKind::data, 0};
    } else if (kind == 2) {
        if (len != 0) return {MState::broken, RecordKind::wrap, 0};  // anywhere: it ends the lap
    } else if (kind == 3) {
        if (len != 0) return {MState::broken, RecordKind::fin, 0};
    } else {
        return {MState::broken, static_cast<RecordKind>(kind), 0};
    }
    const uint32_t want = footer_for(header, pos);
    const uint32_t got = get32(ring + off + 4 + ((len + 7) & ~7ull));
    if (got == want) return {MState::ok, static_cast<RecordKind>(kind), len};
    if (got == 0 || got == (want & 0xff) || got == (want & 0xffff) || got == (want & 0xffffff))
        return {MState::block, static_cast<RecordKind>(kind), len};
    return {MState::broken, static_cast<RecordKind>(kind), 0};
}

struct Model {
    uint64_t cap;
    uint64_t pos = 0;       // consumed position
    uint32_t partial = 0;   // bytes of the record at pos already delivered
    bool broken = false;
};

struct ReadExpect {
    std::vector<uint8_t> bytes;
    RingStatus status;
    uint64_t pos;
    uint32_t partial;
    bool broken;
};

// What RingReader::readv(room bytes, consume) must do, on a copy of the ring
// taken just before the call; consuming zeroes the records in that copy as it
// goes (a read may come round to memory it consumed itself earlier in the call).
ReadExpect model_read(const Model& m, uint8_t* ring, size_t room, bool consume) {
    ReadExpect e{{}, RingStatus::ok, m.pos, m.partial, m.broken};
    if (m.broken) {
        e.status = RingStatus::broken;
        return e;
    }
    uint64_t pos = m.pos;
    uint32_t partial = m.partial;
    bool eof = false;
    size_t guard = 0;
    while (room > 0) {
        CHECK(++guard < 4 * m.cap);  // the reader would loop (no lap bound in readv)
        MRec r = model_inspect(ring, m.cap, pos);
        if (r.state == MState::broken) e.broken = true;
        if (r.state != MState::ok) break;
        if (r.kind == RecordKind::fin) {
            eof = true;
            break;
        }
        if (r.kind == RecordKind::data) {
            const uint8_t* src = ring + (pos & (m.cap - 1)) + 4;
            while (partial < r.length && room > 0) {
                e.bytes.push_back(src[partial++]);
                --room;
            }
            if (partial < r.length) break;
        }
        if (consume) std::memset(ring + (pos & (m.cap - 1)), 0, record_bytes(r.length));
        pos = next_position(pos, r.kind, r.length, m.cap);
        partial = 0;
    }
    if (consume) e.pos = pos, e.partial = partial;
    if (!e.bytes.empty()) e.status = RingStatus::ok;
    else if (e.broken) e.status = RingStatus::broken;
    else if (eof) e.status = RingStatus::eof;
    else if (room > 0) e.status = RingStatus::would_block;
    else e.status = RingStatus::ok;
    return e;
}

// RingReader::poll: the first thing past what was delivered.
RingStatus model_poll(const Model& m, const uint8_t* ring) {
    if (m.broken) return RingStatus::broken;
    for (uint64_t pos = m.pos; pos - m.pos < m.cap;) {
        MRec r = model_inspect(ring, m.cap, pos);
        if (r.state == MState::broken) return RingStatus::broken;
        if (r.state == MState::block) return RingStatus::would_block;
        if (r.kind == RecordKind::fin) return RingStatus::eof;
        if (r.kind == RecordKind::data && r.length > (pos == m.pos ? m.partial : 0)) return RingStatus::ok;
        pos = next_position(pos, r.kind, r.length, m.cap);
    }
    return RingStatus::would_block;
}

// RingReader::readable_bytes: payload bytes a read would deliver now.
size_t model_readable(const Model& m, const uint8_t* ring) {
    size_t n = 0;
    uint32_t partial = m.partial;
    for (uint64_t pos = m.pos; !m.broken && pos - m.pos < m.cap;) {
        MRec r = model_inspect(ring, m.cap, pos);
        if (r.state != MState::ok || r.kind == RecordKind::fin) break;
        if (r.length >= partial) n += r.length - partial;  // a shorter rewritten record: skipped (bug 2)
        partial = 0;
        pos = next_position(pos, r.kind, r.length, m.cap);
    }
    return n;
}

// ------------------------------------------------------------------ harness

struct Harness : RecordSink, ConsumedPublisher {
    uint64_t cap;
    std::unique_ptr<uint8_t[]> ring;  // exactly `cap` bytes: ASan catches anything outside
    std::atomic<uint64_t> counter{0};  // the writer's view of the reader's consumed position
    uint64_t last_published = 0;
    // Writer-mode bookkeeping.
    uint64_t counter_high = 0;  // largest value the writer's counter ever held
    RingWriter* writer = nullptr;
    const RingReader* reader = nullptr;

    explicit Harness(uint64_t c) : cap(c), ring(new uint8_t[c]()) {}

    uint8_t* stage(uint64_t offset, uint64_t bytes) override {
        CHECK(offset % 8 == 0 && bytes % 8 == 0 && bytes >= 8);
        CHECK(offset < cap && bytes <= cap - offset);  // never crosses the ring's end
        if (writer) {
            CHECK(writer->status() != RingStatus::broken);
            CHECK((writer->written() & (cap - 1)) == offset);
            // Never more than a ring ahead of anything the reader could have said.
            const uint64_t end = writer->written() + bytes;
            CHECK(end <= counter_high || end - counter_high <= cap);
        }
        return ring.get() + offset;
    }
    bool post(uint64_t offset, uint64_t bytes) override {
        CHECK(offset + bytes <= cap);
        return true;
    }
    bool publish_consumed(uint64_t c) override {
        CHECK(c % 8 == 0);
        CHECK(c >= last_published);
        if (reader) CHECK(c == reader->consumed());  // exactly what was consumed, never more
        last_published = c;
        counter.store(c, std::memory_order_release);
        if (c > counter_high) counter_high = c;
        return true;
    }
};

// Runs one reader call against the model; returns the bytes delivered.
std::vector<uint8_t> check_read_n(Harness& h, RingReader& rd, Model& m, size_t n, int split, bool consume) {
    std::vector<uint8_t> snap(h.ring.get(), h.ring.get() + h.cap);
    ReadExpect e = model_read(m, snap.data(), n, consume);
    // The caller's buffer, split into up to 4 iovecs (some possibly empty).
    std::vector<uint8_t> buf(n + 1, 0xAA);
    iovec iov[4];
    int cnt = split + 1;
    size_t at = 0;
    for (int i = 0; i < cnt; ++i) {
        size_t len = i == cnt - 1 ? n - at : (n - at) * (i + 1) / (cnt + 1);
        iov[i] = {buf.data() + at, len};
        at += len;
    }
    IoResult r = rd.readv(iov, cnt, consume);
    CHECK(r.bytes == e.bytes.size());
    CHECK(e.bytes.empty() || std::memcmp(buf.data(), e.bytes.data(), e.bytes.size()) == 0);
    CHECK(buf[n] == 0xAA);  // nothing past the caller's buffer
    CHECK(r.status == e.status);
    m.broken = e.broken;
    m.pos = e.pos;
    m.partial = e.partial;
    CHECK(rd.consumed() == m.pos);
    if ((rd.status() == RingStatus::broken) != m.broken) {
        std::fprintf(stderr, "reader %s (%s), model %s; read(%zu, consume=%d) -> %zu bytes, pos %llu\n",
                     to_string(rd.status()), rd.error().c_str(), m.broken ? "broken" : "ok", n, consume, r.bytes,
                     static_cast<unsigned long long>(m.pos));
        fail_at("reader broken <=> model broken", __LINE__);
    }
    // Exactly the consumed records were zeroed; the peer's other bytes are untouched.
    CHECK(std::memcmp(snap.data(), h.ring.get(), h.cap) == 0);
    if (consume) CHECK(rd.unpublished() < h.cap / 8);
    return e.bytes;
}

void check_read(Harness& h, RingReader& rd, Model& m, Input& in, bool consume) {
    const size_t n = in.u16() % (2 * h.cap + 1);
    const int split = in.u8() % 4;
    check_read_n(h, rd, m, n, split, consume);
}

void check_skip(Harness& h, RingReader& rd, Model& m, Input& in) {
    const size_t n = in.u16() % (2 * h.cap + 1);
    std::vector<uint8_t> snap(h.ring.get(), h.ring.get() + h.cap);
    ReadExpect e = model_read(m, snap.data(), n, true);
    IoResult r = rd.skip(n);
    CHECK(r.bytes == e.bytes.size());
    if (r.bytes > 0) CHECK(r.status == RingStatus::ok);
    else if (n > 0) CHECK(r.status == e.status);
    m.broken = e.broken, m.pos = e.pos, m.partial = e.partial;
    CHECK(rd.consumed() == m.pos);
    CHECK(std::memcmp(snap.data(), h.ring.get(), h.cap) == 0);
}

// Forges one record at position consumed + 8k (possibly invalid in every way).
void forge(Harness& h, RingReader& rd, Input& in) {
    const uint64_t pos = rd.consumed() + 8 * (in.u16() % (h.cap / 8));
    const uint64_t off = pos & (h.cap - 1);
    const uint8_t kind_sel = in.u8();
    const uint32_t kind = kind_sel < 200 ? 1 : kind_sel < 220 ? 2 : kind_sel < 240 ? 3 : kind_sel;
    uint32_t len;
    const uint8_t len_sel = in.u8();
    if (len_sel < 128) len = len_sel;  // small
    else if (len_sel < 192) len = in.u16();
    else if (len_sel < 224) len = static_cast<uint32_t>(max_payload(h.cap)) + (len_sel & 15) - 8;
    else len = in.u32() & 0xffffff;
    if (kind != 1 && len_sel < 200) len = 0;
    const uint32_t header = kind << 24 | (len & 0xffffff);
    const uint64_t fpos = off + 4 + ((len + 7) & ~7ull);
    uint32_t footer;
    switch (in.u8() % 6) {
        case 0:
        case 1: footer = footer_for(header, pos); break;
        case 2: footer = footer_for(header, pos + h.cap); break;  // a later lap
        case 3: footer = footer_for(header, pos - h.cap); break;  // an earlier lap (stale)
        case 4: footer = footer_for(header, pos) & (0xffffffu >> (8 * (in.u8() % 3))); break;  // still landing
        default: footer = in.u32(); break;
    }
    // Payload bytes from the input, then the header and footer (inside the ring only).
    uint64_t room = h.cap - off - 4;
    uint64_t plen = std::min<uint64_t>({uint64_t{len}, room, uint64_t{in.u16()}});
    in.bytes(h.ring.get() + off + 4, plen);
    put32(h.ring.get() + off, header);
    if (fpos + 4 <= h.cap) put32(h.ring.get() + fpos, footer);
}

void run_reader_mode(Harness& h, Input& in) {
    RingWriter w(h.cap, h, &h.counter);
    RingReader rd(h.ring.get(), h.cap, h);
    h.reader = &rd;
    Model m{h.cap};
    // Honest warm-up, checked against the model too: moves positions around the
    // ring (laps), maybe leaving the reader in the middle of a record.
    uint64_t sent = 0, got = 0;
    const uint32_t warm = in.u16() % (5 * h.cap);
    const uint32_t chunk = h.cap / 32 + in.u16() % h.cap;  // bounded number of rounds: fast executions
    std::vector<uint8_t> buf(h.cap * 2);
    while (sent < warm) {
        size_t n = std::min<uint64_t>(chunk, warm - sent);
        for (size_t i = 0; i < n; ++i) buf[i] = stream_byte(sent + i);
        IoResult r = w.write(buf.data(), n);
        CHECK(r.status != RingStatus::broken);
        sent += r.bytes;
        size_t want = (sent - got) > 3 ? (sent - got) - (in.u8() % 4) : sent - got;
        std::vector<uint8_t> out = check_read_n(h, rd, m, want, 0, true);
        CHECK(!m.broken);
        for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == stream_byte(got + i));
        got += out.size();
        if (r.bytes == 0 && out.empty()) break;
    }
    CHECK(sent - got == model_readable(m, h.ring.get()));
    CHECK(sent - got == rd.readable_bytes());

    bool tampered = false;  // a hostile edit since the warm-up: readable_bytes is then only bounded
    while (!in.empty()) {
        const uint8_t op = in.u8() % 16;
        tampered |= op <= 3 || op == 14;
        switch (op) {
            case 0: {  // overwrite raw bytes
                uint64_t off = in.u16() % h.cap;
                uint64_t len = std::min<uint64_t>(in.u8() + 1, h.cap - off);
                in.bytes(h.ring.get() + off, len);
                break;
            }
            case 1:
            case 2:
            case 3: forge(h, rd, in); break;
            case 4:
            case 5:
            case 6: check_read(h, rd, m, in, true); break;
            case 7: check_read(h, rd, m, in, false); break;
            case 8: check_skip(h, rd, m, in); break;
            case 9: {
                std::vector<uint8_t> snap(h.ring.get(), h.ring.get() + h.cap);
                RingStatus want = model_poll(m, snap.data());
                CHECK(rd.poll() == want);
                CHECK((rd.status() == RingStatus::broken) == m.broken);
                break;
            }
            case 10: {
                std::vector<uint8_t> snap(h.ring.get(), h.ring.get() + h.cap);
                size_t want = model_readable(m, snap.data());
                size_t got_n = rd.readable_bytes();
                if (tampered ? got_n > h.cap : got_n != want) {
                    std::fprintf(stderr, "readable_bytes() = %zu, model %zu (partial %u)\n", got_n, want, m.partial);
                    fail_at("readable_bytes matches the model", __LINE__);
                }
                CHECK((rd.status() == RingStatus::broken) == m.broken);
                break;
            }
            case 11: {  // honest write through the real writer (it may find the ring broken: fine)
                size_t n = in.u16() % h.cap;
                for (size_t i = 0; i < n; ++i) buf[i] = stream_byte(sent + i);
                IoResult r = w.write(buf.data(), n);
                sent += r.bytes;
                break;
            }
            case 12: rd.flush_consumed(); break;
            case 13: w.write_fin(); break;
            case 14: {  // load a whole ring image (e.g. made by the real writer)
                in.bytes(h.ring.get(), h.cap);
                break;
            }
            case 15: check_read(h, rd, m, in, true); break;
        }
    }
}

void run_writer_mode(Harness& h, Input& in) {
    RingWriter w(h.cap, h, &h.counter);
    h.writer = &w;
    RingReader rd(h.ring.get(), h.cap, h);
    h.reader = &rd;
    uint64_t sent = 0, got = 0;
    bool honest = true;  // the counter only ever held values the reader published
    bool fin = false;    // writes after write_fin() break the writer by contract
    std::vector<uint8_t> buf(h.cap * 2);
    while (!in.empty()) {
        switch (in.u8() % 8) {
            case 0: {  // the hostile peer sets the counter
                uint64_t c;
                switch (in.u8() % 6) {
                    case 0: c = w.written(); break;
                    case 1: c = w.written() + 8 * (1 + in.u8()); break;
                    case 2: c = h.counter.load() - 8 * (1 + in.u8() % 4); break;
                    case 3: c = h.counter.load() + 1 + in.u8() % 7; break;
                    case 4: c = in.u64(); break;
                    default: c = h.counter.load() + 8 * in.u16(); break;
                }
                if (c != h.counter.load()) honest = false;
                // The writer may accept any value it ever sees (a value past what it has
                // written becomes plausible once it writes past it).
                h.counter_high = std::max(h.counter_high, c);
                h.counter.store(c);
                break;
            }
            case 1:
            case 2:
            case 3: {  // write, gathered from up to 3 iovecs
                size_t n = in.u16() % (2 * h.cap);
                for (size_t i = 0; i < n; ++i) buf[i] = stream_byte(sent + i);
                iovec iov[3] = {{buf.data(), n / 3}, {buf.data() + n / 3, 0}, {buf.data() + n / 3, n - n / 3}};
                RingStatus before = w.status();
                IoResult r = w.writev(iov, 3);
                CHECK(r.bytes <= n);
                if (before == RingStatus::broken) CHECK(r.bytes == 0 && r.status == RingStatus::broken);
                sent += r.bytes;
                break;
            }
            case 4: {
                RingStatus before = w.status();
                RingStatus s = w.write_fin();
                if (before == RingStatus::broken) CHECK(s == RingStatus::broken);
                if (s == RingStatus::ok) fin = true;
                break;
            }
            case 5: (void)w.has_space(); break;
            case 6: {  // the honest reader reads and publishes
                if (!honest) break;
                size_t n = in.u16() % (2 * h.cap);
                std::vector<uint8_t> out(n + 1);
                IoResult r = rd.read(out.data(), n);
                CHECK(rd.status() != RingStatus::broken);
                for (size_t i = 0; i < r.bytes; ++i) CHECK(out[i] == stream_byte(got + i));
                got += r.bytes;
                break;
            }
            case 7: {  // honest: a reader that drained and flushed leaves the writer room
                if (!honest) break;
                std::vector<uint8_t> out(h.cap);
                while (true) {
                    IoResult r = rd.read(out.data(), out.size());
                    for (size_t i = 0; i < r.bytes; ++i) CHECK(out[i] == stream_byte(got + i));
                    got += r.bytes;
                    if (r.bytes == 0) break;
                }
                rd.flush_consumed();
                CHECK(got == sent);
                if (w.status() != RingStatus::broken) CHECK(w.has_space());
                break;
            }
        }
        if (honest && !fin) CHECK(w.status() != RingStatus::broken);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in{data, size};
    const uint8_t flags = in.u8();
    Harness h(kMinCapacity << (flags & 3));
    if (flags & 4) run_writer_mode(h, in);
    else run_reader_mode(h, in);
    return 0;
}
