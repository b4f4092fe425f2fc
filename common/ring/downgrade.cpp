#include "ring/downgrade.hpp"

#include <cstring>
#include <string>

#include "ring/ring_format.hpp"
#include "ring/ring_reader.hpp"

namespace rdmasock::downgrade {

namespace {

struct NoPublisher final : ring::ConsumedPublisher {
    bool publish_consumed(uint64_t) override { return true; }  // the ring is done with
};

}  // namespace

bool try_lock(std::atomic<int32_t>& word, int32_t pid) {
    int32_t free = 0;
    return word.compare_exchange_strong(free, pid, std::memory_order_seq_cst);
}

bool lock(std::atomic<int32_t>& word, int32_t pid) {
    // Only processes of one end take such a word: a live holder is waited for
    // (asleep, busy_lock.hpp), a dead one taken over.
    busy_lock::AliveJudge alive;
    return busy_lock::lock(word, pid, alive, busy_lock::Policy{kLockPatienceUs}) == busy_lock::Got::locked;
}

// A release store (a plain store on x86): what the holder wrote (records, the
// reader's place) is visible to the next holder. No full fence: a writer that
// lets go and then misses a reader's `asked` serves it at its next look.
void unlock(std::atomic<int32_t>& word) { word.store(0, std::memory_order_release); }

TakeBack take_back(RingControl& c, uint8_t* ring, uint64_t capacity, int32_t pid, Resend& out, busy_lock::Judge* judge,
                   const busy_lock::Policy& policy) {
    TakeBack t;
    // The reader's place is final only while it cannot read; it holds the lock
    // for one copy at most. Mark the direction back before letting go, and send
    // only after: its next read then comes from TCP, and a resend that fills the
    // socket buffer waits for that reader instead of deadlocking on the lock.
    busy_lock::AliveJudge alive;
    const auto got = busy_lock::lock(c.reader_busy, pid, judge ? *judge : alive, policy);
    if (got != busy_lock::Got::locked) {
        t.ok = false;
        t.abused = got == busy_lock::Got::abused;
        t.err = t.abused ? "the reader's busy word was held by a process that is not the reader's"
                         : "the reader's busy word stayed taken for 5 s";
        return t;
    }
    if (state(c) == RingControl::back) {
        unlock(c.reader_busy);
        return t;
    }
    NoPublisher none;
    ring::RingReader rest(ring, capacity, none);
    rest.seek(c.read_pos.load(std::memory_order_acquire), c.read_partial.load(std::memory_order_acquire));
    c.back_state.store(RingControl::back, std::memory_order_seq_cst);
    unlock(c.reader_busy);
    uint8_t buf[16384];
    for (;;) {
        ring::IoResult r = rest.read(buf, sizeof buf);
        if (r.bytes > 0) {
            if (!out.send_all(buf, r.bytes)) {
                t.ok = false;
                t.err = "the socket failed during the take-back";
                return t;
            }
            t.resent += r.bytes;
            continue;
        }
        if (r.status == ring::RingStatus::eof) {
            t.fin = true;
            out.end_of_stream();
        } else if (r.status == ring::RingStatus::broken) {
            t.ok = false;
            t.err = rest.error();
        }
        return t;
    }
}

TakeBack take_back_until(RingControl& c, const uint8_t* ring, uint64_t capacity, uint64_t end, Resend& out) {
    using namespace ring;
    TakeBack t;
    if (state(c) == RingControl::back) return t;
    uint64_t pos = c.read_pos.load(std::memory_order_acquire);
    uint32_t partial = c.read_partial.load(std::memory_order_acquire);
    c.back_state.store(RingControl::back, std::memory_order_seq_cst);
    auto fail = [&](std::string why) {
        t.ok = false;
        t.err = std::move(why);
        return t;
    };
    if (pos > end || end - pos > capacity)
        return fail("the reader's place " + std::to_string(pos) + " is outside the last lap before " + std::to_string(end));
    const uint64_t mask = capacity - 1;
    while (pos < end) {
        const uint64_t off = pos & mask;
        uint32_t header, footer;
        std::memcpy(&header, ring + off, 4);
        const RecordKind kind = header_kind(header);
        const uint32_t len = header_length(header);
        const uint64_t bytes = record_bytes(len);
        const uint64_t next = next_position(pos, kind, len, capacity);
        if ((kind != RecordKind::data && kind != RecordKind::wrap && kind != RecordKind::fin) || off + bytes > capacity ||
            next > end)
            return fail("no record of ours at position " + std::to_string(pos));
        std::memcpy(&footer, ring + off + footer_offset(len), 4);
        if (footer != footer_for(header, pos) || partial > len || (partial > 0 && kind != RecordKind::data))
            return fail("no record of ours at position " + std::to_string(pos));
        if (kind == RecordKind::fin) {
            t.fin = true;
            out.end_of_stream();
            return t;
        }
        if (len > partial) {
            if (!out.send_all(ring + off + kHeaderBytes + partial, len - partial))
                return fail("the socket failed during the take-back");
            t.resent += len - partial;
        }
        partial = 0;
        pos = next;
    }
    return t;
}

RingControl::Back ask(RingControl& c) {
    uint32_t s = RingControl::ring;
    if (c.back_state.compare_exchange_strong(s, RingControl::asked, std::memory_order_seq_cst)) return RingControl::asked;
    return static_cast<RingControl::Back>(s);
}

bool writer_idle(const RingControl& c) { return c.writer_busy.load(std::memory_order_seq_cst) == 0; }

RingControl::Back complete_alone(RingControl& c) {
    uint32_t a = RingControl::asked;
    c.back_state.compare_exchange_strong(a, RingControl::back, std::memory_order_seq_cst);
    return state(c);
}

}  // namespace rdmasock::downgrade
