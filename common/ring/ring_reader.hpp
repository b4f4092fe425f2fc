// The receiving half of a ring: validates records the peer wrote into our memory
// and serves them as a byte stream.
//
// Every length and footer is checked before use, so a hostile or corrupted ring
// is reported as "broken" and never read out of bounds.
//
// Flow control is lazy: the consumed position is published only after an eighth
// of the writer's window has been freed (or on request). A writer blocks only
// when fewer than 32 bytes of its window look free, so at that point at least
// 7/8 of the window minus 32 bytes is unread: the reader is guaranteed to cross
// the threshold if the application keeps reading, and no per-record
// acknowledgement is needed. The reader learns the window from where the
// writer's wrap markers stand (it starts from `window`, the writer's first).
// An eighth of a window that has since grown only publishes more often; one
// that has since gone back is too large for a lap at most, and then passing
// the wrap marker skips the rest of the ring, at least half of it, which
// publishes at once. A reader that drains a windowed ring publishes at once
// (its writer may stand in a window that went back, unable to wrap and
// refused more memory: nothing else would tell it); while the writer's window
// is grown, also when a read takes the last record to the byte (an idle
// writer gives the window back once everything was read).
#pragma once

#include <sys/uio.h>

#include <atomic>

#include <string>

#include "sys/owner_written.hpp"
#include "ring/record_sink.hpp"
#include "ring/ring_format.hpp"
#include "ring/ring_io.hpp"

namespace rdmasock::ring {

class RingReader {
public:
    RingReader(uint8_t* ring, uint64_t capacity, ConsumedPublisher& publisher, uint64_t window = 0);

    // Copies up to the iovec's size out of complete records. consume=false peeks.
    IoResult readv(const iovec* iov, int iovcnt, bool consume = true);
    IoResult read(void* buf, size_t len) { return readv_one(buf, len, true); }
    IoResult peek(void* buf, size_t len) { return readv_one(buf, len, false); }

    // Discards up to len readable bytes (MSG_TRUNC-like helpers, doorbell-free drain).
    IoResult skip(size_t len);

    // What a read would report right now: ok (data ready), would_block, eof,
    // broken (not latched: see inspect). Safe beside a reader in another thread.
    RingStatus poll() { return look(false); }
    // The same, as the reader's own look: a bad record breaks the ring, as a
    // read would (call with the reading side's exclusion).
    RingStatus check_next() { return look(true); }
    // Complete payload bytes readable now without waiting, up to the first bad
    // record (not latched either: only reads break the ring). Called with the
    // reading side's exclusion, as read() is (the read lock or busy word).
    // Exact for an honest peer; a peer that rewrites records already counted
    // gets a count that is only a hint, never more than the ring.
    size_t readable_bytes();
    // The same counted by walking the ring (O(records), nothing stored): for a
    // caller that cannot have the readers' exclusion (a reader blocked in
    // another thread holds it for as long as it waits).
    size_t readable_bytes_look();
    // True when the end-of-stream record has landed (possibly behind unread
    // data). Safe beside a reader in another thread (poll asks it unlocked).
    bool fin_landed();
    // (Both look only at records that landed since the last ask: the scans
    // below. A ring of small records made each poll or FIONREAD walk it all.)

    // Publish the consumed position now (the writer asked for space).
    bool flush_consumed();
    // Consumed bytes the writer has not been told about yet.
    uint64_t unpublished() const { return consumed_ - published_; }

    uint64_t capacity() const { return capacity_; }
    uint64_t consumed() const { return consumed_; }
    uint32_t partial() const { return partial_; }
    // Continue from another reader's exact place (a forked copy that fell
    // behind, or a writer reading back its own ring for a downgrade).
    void seek(uint64_t position, uint32_t partial) {
        consumed_ = published_ = position;
        partial_ = partial;
        restart_scan();
        fin_scan_.store(position & ~uint64_t{1}, std::memory_order_relaxed);
    }
    RingStatus status() const { return broken_ ? RingStatus::broken : RingStatus::ok; }
    const std::string& error() const { return error_; }

private:
    struct Record {
        RingStatus state;  // ok: complete; would_block: not landed yet; broken
        RecordKind kind;
        uint32_t length;
    };
    // latch: a bad record breaks the ring (the reader's own looks, under its
    // exclusion). poll() and fin_landed() run beside a reader in another thread
    // and may look from a stale position whose record was consumed and
    // rewritten meanwhile: they report `broken` without latching it, and the
    // read that follows decides.
    Record inspect(uint64_t position, bool latch = true);
    // Where a walk stopped: ok = visit said stop at `pos`; would_block = the
    // record at `pos` has not landed, or a whole lap was walked; broken = the
    // record at `pos` is bad.
    struct Walked {
        RingStatus state;
        uint64_t pos;
    };
    // The one loop over complete records: from `pos` on, while within one lap
    // of `from` (footers bind positions, so a looping ring turns broken).
    // visit(position, record) returns false to stop at that record.
    template <class Visit>
    Walked walk(uint64_t pos, uint64_t from, bool latch, Visit&& visit);
    RingStatus look(bool latch);
    bool look_again(Walked w, uint64_t from, int tries) const;
    void release(uint64_t position, uint32_t length);
    IoResult readv_one(void* buf, size_t len, bool consume) {
        iovec one{buf, len};
        return readv(&one, 1, consume);
    }
    bool fail(std::string why);
    void restart_scan() {
        scan_pos_ = consumed_;
        scan_stream_ = delivered_ - partial_;
    }
    void scan_bytes();
    void note_fin_scan(uint64_t word);

    uint8_t* ring_;
    uint64_t capacity_;
    uint64_t mask_;
    uint32_t max_payload_;
    ConsumedPublisher& publisher_;
    // Read by unlocked lookers (poll, fin_landed, readable_bytes_look) too.
    OwnerWritten<uint64_t> consumed_{0};  // absolute position of the current record
    OwnerWritten<uint32_t> partial_{0};   // payload bytes of the current record already delivered
    uint64_t published_ = 0;  // last position told to the writer
    uint64_t lap_window_;     // where the writer's last wrap marker ended its lap
    bool windowed_;           // the writer starts with a window (shared memory): publish on draining
    uint64_t delivered_ = 0;  // payload bytes consumed, all time
    // The byte scan ahead of the read position (readable_bytes' exclusion):
    // records from consumed_ up to scan_pos_ are complete and counted;
    // scan_stream_ is the stream offset (in delivered_'s units) where the
    // record at scan_pos_ starts.
    uint64_t scan_pos_ = 0;
    uint64_t scan_stream_ = 0;
    // The FIN scan, one word for unlocked callers: a position up to which every
    // record is complete and not the FIN, bit 0 set when the record there is
    // the FIN (positions are 8-aligned). Only ever moves forward; a claim about
    // absolute positions stays true while the reader consumes.
    std::atomic<uint64_t> fin_scan_{0};
    OwnerWritten<bool> broken_{false};
    std::string error_;
};

}  // namespace rdmasock::ring
