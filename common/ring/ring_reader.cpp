#include "ring/ring_reader.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "sys/fault_guard.hpp"
#include "sys/tsan.hpp"

namespace rdmasock::ring {

namespace {

uint32_t load_acquire(const uint8_t* p) {
    return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(reinterpret_cast<const uint32_t*>(p)))
        .load(std::memory_order_acquire);
}

// A word still being placed holds a prefix of its final bytes (little endian:
// low bytes first) followed by zeroes.
bool is_prefix_of(uint32_t seen, uint32_t expected) {
    for (uint32_t mask : {0xffu, 0xffffu, 0xffffffu})
        if (seen == (expected & mask)) return true;
    return false;
}

}  // namespace

RingReader::RingReader(uint8_t* ring, uint64_t capacity, ConsumedPublisher& publisher, uint64_t window)
    : ring_(ring), capacity_(capacity), mask_(capacity - 1), max_payload_(max_payload(capacity)),
      publisher_(publisher), lap_window_(window == 0 || window > capacity ? capacity : window),
      windowed_(lap_window_ < capacity) {
    if (!valid_capacity(capacity)) fail("ring capacity is not a power of two in range");
}

bool RingReader::fail(std::string why) {
    if (!broken_) {
        broken_ = true;
        error_ = std::move(why);
    }
    return false;
}

RingReader::Record RingReader::inspect(uint64_t position, bool latch) {
    const uint64_t off = position & mask_;
    const uint32_t header = load_acquire(ring_ + off);
    // The kind byte is the header's last byte to land; until then the record is in flight.
    if (header_kind(header) == RecordKind::none) return {RingStatus::would_block, RecordKind::none, 0};
    const RecordKind kind = header_kind(header);
    const uint32_t length = header_length(header);
    switch (kind) {
        case RecordKind::data:
            if (length > max_payload_ || off + record_bytes(length) > capacity_) {
                if (latch) fail("record length " + std::to_string(length) + " at ring offset " + std::to_string(off) +
                     " does not fit a ring of " + std::to_string(capacity_) + " bytes");
                return {RingStatus::broken, kind, 0};
            }
            break;
        case RecordKind::wrap:  // anywhere: the writer's window may end before the ring's
            if (length != 0) {
                if (latch) fail("wrap marker at ring offset " + std::to_string(off) + " carries a length");
                return {RingStatus::broken, kind, 0};
            }
            break;
        case RecordKind::fin:
            if (length != 0) {
                if (latch) fail("end-of-stream record carries a length");
                return {RingStatus::broken, kind, 0};
            }
            break;
        default:
            if (latch) fail("unknown record kind " + std::to_string(static_cast<uint32_t>(kind)) + " at ring offset " +
                 std::to_string(off));
            return {RingStatus::broken, kind, 0};
    }
    const uint32_t expected = footer_for(header, position);
    const uint32_t footer = load_acquire(ring_ + off + footer_offset(length));
    if (footer == expected) return {RingStatus::ok, kind, length};
    if (footer == 0 || is_prefix_of(footer, expected)) return {RingStatus::would_block, kind, length};
    if (latch) fail("footer mismatch at ring offset " + std::to_string(off));
    return {RingStatus::broken, kind, 0};
}

// Zero the consumed record so the next lap's footers can be trusted. A poller in
// another thread (poll, fin_landed, readable_bytes_look) may still load a header or
// footer of it from a position it read a moment before: it then sees a zero or a
// rewritten word and says "not yet" or "broken" without latching it, and the read
// that follows decides. Only ring memory is written here.
void RingReader::release(uint64_t position, uint32_t length) {
    tsan::IgnoreWrites shared_with_pollers;
    std::memset(ring_ + (position & mask_), 0, record_bytes(length));
}

IoResult RingReader::readv(const iovec* iov, int iovcnt, bool consume) {
    IoResult r;
    if (broken_) return {0, RingStatus::broken};
    uint64_t pos = consumed_;
    uint32_t partial = partial_;
    bool eof = false;
    size_t iov_off = 0;
    while (iovcnt > 0 && iov->iov_len == 0) ++iov, --iovcnt;
    bool drained = false;
    while (iovcnt > 0) {
        Record rec = inspect(pos);
        if (rec.state != RingStatus::ok) {
            drained = rec.state == RingStatus::would_block;
            break;
        }
        if (rec.kind == RecordKind::fin) {
            eof = true;
            break;
        }
        if (rec.kind == RecordKind::data) {
            const uint8_t* src = ring_ + (pos & mask_) + kHeaderBytes + partial;
            const uint32_t partial_before = partial;
            const size_t bytes_before = r.bytes;
            while (partial < rec.length && iovcnt > 0) {
                size_t take = std::min<size_t>(rec.length - partial, iov->iov_len - iov_off);
                if (guard::copy_to_user(static_cast<uint8_t*>(iov->iov_base) + iov_off, src, take) != 0) {
                    // A bad user buffer: this record's bytes stay unread (TCP keeps the skb).
                    r.fault = true;
                    break;
                }
                src += take;
                partial += static_cast<uint32_t>(take);
                r.bytes += take;
                iov_off += take;
                if (iov_off == iov->iov_len) ++iov, --iovcnt, iov_off = 0;
            }
            if (r.fault) {
                partial = partial_before;
                r.bytes = bytes_before;
                break;
            }
            if (partial < rec.length) break;  // caller's buffer is full
        }
        const uint64_t next = next_position(pos, rec.kind, rec.length, capacity_);
        if (consume) {
            // Unlocked lookers in other threads start from consumed_: it moves
            // past the record before the record is zeroed, so a look during a
            // long read finds what is still unread rather than a zeroed record
            // ("not yet": the ring empty for the whole read; an edge spent on
            // that view left a tokio reader waiting for good). partial_ first:
            // a looker that sees the new place sees its partial too.
            partial_ = 0;
            consumed_ = next;
            release(pos, rec.length);
            if (rec.kind == RecordKind::wrap) lap_window_ = std::max<uint64_t>((pos & mask_) + kAlign, kMinCapacity);
        }
        pos = next;
        partial = 0;
    }
    // A read that took the last record to the byte drained the ring too: a
    // writer whose window is grown learns it now (it gives the window back
    // only once we have read everything, ring_writer.hpp give_back_if_drained).
    // One look at the next record; a writer in its first window is not told.
    if (consume && windowed_ && !drained && !eof && iovcnt == 0 && partial == 0 && r.bytes > 0 &&
        publisher_.drain_wanted())
        drained = inspect(pos, false).state == RingStatus::would_block;
    if (consume) {
        consumed_ = pos;
        partial_ = partial;
        delivered_ += r.bytes;
        // A windowed writer wraps only when we are nearly through its window,
        // and its window may have gone back below the one we last saw: it
        // learns that we drained the ring at once, not an eighth later.
        if (consumed_ - published_ >= lap_window_ / 8 || (drained && windowed_)) flush_consumed();
    }
    if (r.bytes > 0) r.status = RingStatus::ok;
    else if (broken_) r.status = RingStatus::broken;
    else if (eof) r.status = RingStatus::eof;
    else if (iovcnt > 0) r.status = RingStatus::would_block;
    return r;
}

IoResult RingReader::skip(size_t len) {
    // Reads into a scratch buffer; used rarely (MSG_TRUNC), so simplicity wins.
    uint8_t scratch[4096];
    IoResult total;
    while (len > 0) {
        IoResult r = read(scratch, std::min(len, sizeof scratch));
        total.status = r.status;
        total.bytes += r.bytes;
        len -= r.bytes;
        if (r.bytes == 0) break;
    }
    if (total.bytes > 0) total.status = RingStatus::ok;
    return total;
}

template <class Visit>
RingReader::Walked RingReader::walk(uint64_t pos, uint64_t from, bool latch, Visit&& visit) {
    while (!broken_ && pos - from < capacity_) {
        Record rec = inspect(pos, latch);
        if (rec.state != RingStatus::ok) return {rec.state, pos};
        if (!visit(pos, rec)) return {RingStatus::ok, pos};
        pos = next_position(pos, rec.kind, rec.length, capacity_);
    }
    return {broken_ ? RingStatus::broken : RingStatus::would_block, pos};
}

// A look that stopped at a record not landed (or, unlatched, one that reads
// broken) may have met one a reader in another thread zeroed under it
// (release): where that reader has moved the read position since, it looks
// again from there (a few times at most).
bool RingReader::look_again(Walked w, uint64_t from, int tries) const {
    const bool stopped = w.state == RingStatus::would_block || (w.state == RingStatus::broken && !broken_);
    return stopped && tries < 4 && consumed_.get() != from;
}

RingStatus RingReader::look(bool latch) {
    for (int tries = 0;; ++tries) {
        if (broken_) return RingStatus::broken;
        const uint64_t from = consumed_;
        const uint32_t partial = partial_;
        RingStatus found = RingStatus::would_block;
        Walked w = walk(from, from, latch, [&](uint64_t pos, const Record& rec) {
            if (rec.kind == RecordKind::fin) found = RingStatus::eof;
            else if (rec.kind == RecordKind::data && rec.length > (pos == from ? partial : 0)) found = RingStatus::ok;
            return found == RingStatus::would_block;  // past wrap markers and empty records
        });
        if (!look_again(w, from, tries)) return w.state == RingStatus::ok ? found : w.state;
    }
}

// Records are immutable once complete (until this reader zeroes them), so
// what was counted stays counted: each call goes on from where the last one
// stopped. A read that went past the scan, a seek, or a peer that rewrote a
// record already counted (fewer bytes ahead than delivered) starts it again.
void RingReader::scan_bytes() {
    if (static_cast<int64_t>(scan_pos_ - consumed_) < 0 || static_cast<int64_t>(scan_stream_ - delivered_) < 0 ||
        scan_pos_ - consumed_ >= capacity_)
        restart_scan();
    scan_pos_ = walk(scan_pos_, consumed_, false, [&](uint64_t, const Record& rec) {
                    if (rec.kind == RecordKind::fin) return false;
                    scan_stream_ += rec.length;
                    return true;
                }).pos;
}

size_t RingReader::readable_bytes() {
    scan_bytes();
    if (broken_) return 0;
    // Bounded by one lap's payload even if the peer rewrote what was counted.
    return static_cast<size_t>(std::min<uint64_t>(scan_stream_ - delivered_, capacity_));
}

size_t RingReader::readable_bytes_look() {
    for (int tries = 0;; ++tries) {
        size_t n = 0;
        const uint64_t from = consumed_;
        uint32_t partial = partial_;
        Walked w = walk(from, from, false, [&](uint64_t, const Record& rec) {
            if (rec.kind == RecordKind::fin) return false;
            n += rec.length > partial ? rec.length - partial : 0;
            partial = 0;
            return true;
        });
        if (!look_again(w, from, tries)) return n;
    }
}

// Moves the FIN scan forward to `word`, never back (two pollers may race).
void RingReader::note_fin_scan(uint64_t word) {
    uint64_t cur = fin_scan_.load(std::memory_order_relaxed);
    while (!(cur & 1) && static_cast<int64_t>((word & ~uint64_t{1}) - cur) >= 0 && cur != word &&
           !fin_scan_.compare_exchange_weak(cur, word, std::memory_order_relaxed)) {}
}

bool RingReader::fin_landed() {
    for (int tries = 0;; ++tries) {
        if (broken_) return false;
        const uint64_t word = fin_scan_.load(std::memory_order_relaxed);
        if (word & 1) return true;  // the FIN is never consumed: once seen, for good
        const uint64_t from = consumed_;
        Walked w = walk(static_cast<int64_t>(word - from) < 0 ? from : word, from, false,
                        [](uint64_t, const Record& rec) { return rec.kind != RecordKind::fin; });
        const bool fin = w.state == RingStatus::ok;
        // (A stop at a record zeroed under us is no place the scan reached.)
        if (!fin && look_again(w, from, tries)) continue;
        note_fin_scan(fin ? w.pos | 1 : w.pos);
        return fin;
    }
}

bool RingReader::flush_consumed() {
    if (consumed_ == published_) return true;
    if (!publisher_.publish_consumed(consumed_)) return fail("transport failed to publish the consumed position");
    published_ = consumed_;
    return true;
}

}  // namespace rdmasock::ring
