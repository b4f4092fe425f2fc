#include "ring/ring_writer.hpp"

#include <algorithm>
#include <cstring>

#include "sys/fault_guard.hpp"

namespace rdmasock::ring {

const char* to_string(RingStatus s) {
    switch (s) {
        case RingStatus::ok: return "ok";
        case RingStatus::would_block: return "would_block";
        case RingStatus::eof: return "eof";
        case RingStatus::broken: return "broken";
    }
    return "?";
}

RingWriter::RingWriter(uint64_t capacity, RecordSink& sink, ConsumedCounter consumed, uint64_t window)
    : capacity_(capacity), mask_(capacity - 1), window_(window == 0 || window > capacity ? capacity : window),
      max_payload_(max_payload(window_)), first_window_(window_), sink_(sink), peer_consumed_(consumed) {
    if (!valid_capacity(capacity)) fail("ring capacity is not a power of two in range");
    else if (!valid_capacity(window_)) fail("ring window is not a power of two in range");
}

// Same lap: the window less what is unread. The reader still in the lap
// before (we wrapped): only up to its place. (Positions count the rest of a
// lap a wrap marker skipped as written, and as consumed once read.)
uint64_t RingWriter::free_in_window(uint64_t written, uint64_t consumed) const {
    const uint64_t used = written - consumed;
    if ((written & ~mask_) == (consumed & ~mask_)) return used < window_ ? window_ - used : 0;
    return used < capacity_ ? capacity_ - used : 0;
}

void RingWriter::shrink_window_if_idle() {
    if (giveback_.due) {
        // The reader zeroes what it consumed before it publishes it: past
        // `after`, nothing of that memory is read or written any more.
        if (!refresh_consumed() || consumed_ < giveback_.after) return;
        sink_.release(giveback_.from, giveback_.to);
        giveback_.due = false;
        return;
    }
    if (window_ <= first_window_ || small_writes_ < kShrinkAfter) return;
    const uint64_t old = window_;
    // Past the first window: go on from the next lap's start, as a write's own
    // wrap would: only with room left behind it for the end of stream.
    if ((written_ & mask_) >= first_window_) {
        const uint64_t tail = window_ - (written_ & mask_);
        if (!refresh_consumed() || free_in_window(written_, consumed_) < tail + kFinReserve) return;
        if (!put_marker(RecordKind::wrap)) return;
    }
    small_writes_ = 0;
    set_window(first_window_);
    // Whatever is unread now may lie past the first window (in this lap or,
    // after a wrap, the one before): it goes back once the reader passed it all.
    giveback_ = {first_window_, old, written_, true};
}

bool RingWriter::give_back_if_drained() {
    if (status_ == RingStatus::broken || fin_sent_) return false;
    if (!refresh_consumed() || consumed_ != written_) return false;
    if (giveback_.due) {  // the reader passed everything: what an earlier shrink kept goes now
        sink_.release(giveback_.from, giveback_.to);
        giveback_.due = false;
    }
    if (window_ <= first_window_) return true;
    const uint64_t old = window_;
    const uint64_t off = written_ & mask_;
    uint64_t kept_from = old, kept_to = old;
    if (off >= first_window_) {
        // The next lap starts in the first window: a wrap marker here, which
        // the reader passes at its next look. Its page stays until then.
        if (!put_marker(RecordKind::wrap)) return false;
        kept_from = std::max(first_window_, off & ~(kGiveBackPage - 1));
        kept_to = std::min(old, (off + kAlign + kGiveBackPage - 1) & ~(kGiveBackPage - 1));
    }
    small_writes_ = 0;
    set_window(first_window_);
    if (kept_to < old) sink_.release(kept_to, old);
    if (first_window_ < kept_from) sink_.release(first_window_, kept_from);
    if (kept_from < kept_to) giveback_ = {kept_from, kept_to, written_, true};
    return true;
}

bool RingWriter::grow_window() {
    if (window_ >= capacity_ || status_ == RingStatus::broken) return false;
    const uint64_t next = window_ * 2;
    if (giveback_.due && next > giveback_.from && window_ < giveback_.to) {
        // Growing over memory not given back yet: it is still backed and
        // counted, so it is taken back from the give-back, never freed under
        // the records that will land there; only the rest is backed.
        // (Refused: everything as it was, the give-back whole.)
        const uint64_t kept_from = std::max<uint64_t>(giveback_.from, window_), kept_to = std::min(giveback_.to, next);
        if (window_ < kept_from && !sink_.back(window_, kept_from)) return growth_refused_ = true, false;
        if (kept_to < next && !sink_.back(kept_to, next)) {
            if (window_ < kept_from) sink_.release(window_, kept_from);
            return growth_refused_ = true, false;
        }
        giveback_.from = std::max(giveback_.from, next);
        if (giveback_.from >= giveback_.to) giveback_.due = false;
    } else if (!sink_.back(window_, next)) {
        return growth_refused_ = true, false;
    }
    growth_refused_ = false;
    set_window(next);
    return true;
}

void RingWriter::set_window(uint64_t w) {
    window_ = w;
    max_payload_ = max_payload(w);
    if (grown_flag_) grown_flag_->store(w > first_window_ ? 1 : 0, std::memory_order_relaxed);
}

RingStatus RingWriter::fail(std::string why) {
    if (status_ != RingStatus::broken) {
        status_ = RingStatus::broken;
        error_ = std::move(why);
    }
    return status_;
}

// The consumed counter is written by the peer: it must stay 8-aligned,
// monotonic and never pass what we wrote, or the peer is lying.
bool RingWriter::refresh_consumed() {
    uint64_t c;
    if (!peer_consumed_.load(c) || c == consumed_) return true;  // landing: no news yet
    if (c < consumed_ || c > written_ || (c % kAlign) != 0) {
        fail("peer published an impossible consumed position");
        return false;
    }
    consumed_ = c;
    return true;
}

bool RingWriter::has_space() {
    if (status_ == RingStatus::broken) return false;
    constexpr uint64_t need = 2 * record_bytes(1) + kFinReserve;
    if (free_in_window(written_, consumed_) >= need) return true;
    return refresh_consumed() && free_in_window(written_, consumed_) >= need;
}

// A look (poll asks it beside a writer in another thread): nothing stored,
// nothing latched. This thread may not see written_ move past a record the
// peer has already consumed and counted: such a counter means space, not a lie
// (the writer's own refresh_consumed judges the peer).
bool RingWriter::writable() const {
    if (status_ == RingStatus::broken) return false;
    const uint64_t written = written_;
    uint64_t consumed = std::min(consumed_.get(), written);
    uint64_t c;
    if (peer_consumed_.load(c) && c > consumed && c % kAlign == 0) consumed = std::min(c, written);
    // In the reader's lap a smaller window grows on the next write (while
    // memory allows): the space that write can take is the ring's, as before
    // windows. Past a wrap, only what the reader has freed in the window.
    if ((written & ~mask_) == (consumed & ~mask_) && window_ < capacity_ && !growth_refused_)
        return (capacity_ - (written - consumed)) * 3 >= capacity_;
    return free_in_window(written, consumed) * 3 >= window_;
}

// Copies `length` bytes out of the iovec cursor into one record and posts it.
bool RingWriter::put_record(RecordKind kind, const iovec*& iov, int& iovcnt, size_t& iov_off,
                            uint32_t length, bool* fault) {
    uint64_t off = written_ & mask_;
    uint64_t bytes = record_bytes(length);
    uint8_t* rec = sink_.stage(off, bytes);
    uint32_t header = make_header(kind, length);
    uint8_t* dst = rec + kHeaderBytes;
    for (uint32_t left = length; left > 0;) {
        size_t take = std::min<size_t>(left, iov->iov_len - iov_off);
        if (guard::copy_from_user(dst, static_cast<const uint8_t*>(iov->iov_base) + iov_off, take) != 0) {
            // A bad user buffer: the record is dropped before its header lands.
            // Its payload bytes go back to zero (the reader trusts only zeroes
            // where nothing landed yet); nothing is posted or counted.
            std::memset(rec + kHeaderBytes, 0, length);
            *fault = true;
            return false;
        }
        dst += take;
        left -= static_cast<uint32_t>(take);
        iov_off += take;
        if (iov_off == iov->iov_len) {
            ++iov;
            --iovcnt;
            iov_off = 0;
        }
    }
    std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(rec)).store(header, std::memory_order_relaxed);
    // The release store of the footer publishes header and payload (shared memory).
    std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(rec + footer_offset(length)))
        .store(footer_for(header, written_), std::memory_order_release);
    if (!sink_.post(off, bytes)) {
        // Not sent: the staged copy goes back to zero too, so a take-back that
        // walks the writer's copy (downgrade::take_back_until) never finds it.
        std::memset(rec, 0, bytes);
        fail("transport failed to post a record");
        return false;
    }
    written_ = next_position(written_, kind, length, capacity_);
    return true;
}

bool RingWriter::put_marker(RecordKind kind) {
    int none = 0;
    size_t zero = 0;
    const iovec* nil = nullptr;
    return put_record(kind, nil, none, zero, 0);
}

IoResult RingWriter::writev(const iovec* iov, int iovcnt) {
    IoResult r;
    if (status_ == RingStatus::broken) return {0, RingStatus::broken};
    if (fin_sent_) return {0, fail("write after end of stream")};
    size_t iov_off = 0;
    bool grew = false;
    while (iovcnt > 0 && iov->iov_len == 0) ++iov, --iovcnt;
    if (window_ > first_window_ || giveback_.due) shrink_window_if_idle();
    const uint64_t window_before = window_;
    // One send, one record where the ring allows it, as one send is one
    // segment on loopback TCP (a fault in the middle of the reader's buffer
    // then fails the read whole, as TCP's skb copy does): a send larger than
    // the window's record limit widens the window first.
    if (window_ < capacity_) {
        uint64_t total = 0;
        for (int i = 0; i < iovcnt && total <= max_payload_; ++i) total += iov[i].iov_len;
        while (total > max_payload_ && grow_window()) {}
    }
    while (iovcnt > 0) {
        const uint64_t tail = window_ - (written_ & mask_);
        bool wrap = wrap_due(tail);
        // Wrap only when the reader is nearly through the window: past a wrap
        // the writer can take only what the reader freed before its place, so
        // a reader that lags would hold it at a window. A lagging reader makes
        // the window grow instead, room at once in this lap.
        if (wrap && window_ < capacity_ && refresh_consumed() && written_ - consumed_ > window_ / 4 &&
            grow_window())
            continue;
        // A record needs 16 bytes for one payload byte; a wrap needs the tail as well.
        const uint64_t need = (wrap ? tail : 0) + record_bytes(1) + kFinReserve;
        if (free_in_window(written_, consumed_) < need &&
            (!refresh_consumed() || free_in_window(written_, consumed_) < need)) {
            if (!grew && grow_window()) {
                grew = true;
                continue;
            }
            break;
        }
        if (wrap) {
            if (!put_marker(RecordKind::wrap)) break;
            continue;
        }
        size_t left_in_iov = 0;  // total remaining is bounded by what we can take anyway
        for (int i = 0; i < iovcnt && left_in_iov < max_payload_; ++i)
            left_in_iov += iov[i].iov_len - (i == 0 ? iov_off : 0);
        // Inside a smaller window the last 8 bytes stay for its wrap marker.
        const uint64_t data_tail = window_ < capacity_ ? tail - kAlign : tail;
        uint64_t room = std::min(data_tail, free_in_window(written_, consumed_) - kFinReserve) - kHeaderBytes - kFooterBytes;
        uint32_t len = static_cast<uint32_t>(std::min<uint64_t>({left_in_iov, max_payload_, room}));
        bool fault = false;
        if (!put_record(RecordKind::data, iov, iovcnt, iov_off, len, &fault)) {
            r.fault = fault;
            break;
        }
        r.bytes += len;
        while (iovcnt > 0 && iov->iov_len == iov_off) ++iov, --iovcnt, iov_off = 0;
    }
    if (window_ > first_window_) {  // a flow of small writes that never fill: the first window would do
        if (iovcnt == 0 && window_ == window_before && r.bytes <= first_window_ / 16) ++small_writes_;
        else small_writes_ = 0;
    }
    if (status_ == RingStatus::broken && r.bytes == 0) r.status = RingStatus::broken;
    else if (r.bytes == 0 && iovcnt > 0) r.status = RingStatus::would_block;
    return r;
}

IoResult RingWriter::write(const void* data, size_t len) {
    iovec one{const_cast<void*>(data), len};
    return writev(&one, 1);
}

RingStatus RingWriter::write_fin() {
    if (status_ == RingStatus::broken) return status_;
    if (fin_sent_) return RingStatus::ok;
    // The end-of-stream record takes 8 bytes and nothing follows it: it fits
    // any tail of a smaller window (the whole ring's last 8 bytes still wrap first).
    const uint64_t tail = window_ - (written_ & mask_);
    const bool wrap = tail == kAlign && window_ == capacity_;
    const uint64_t need = (wrap ? tail : 0) + kAlign;
    if (free_in_window(written_, consumed_) < need &&
        (!refresh_consumed() || free_in_window(written_, consumed_) < need))
        return status_ == RingStatus::broken ? RingStatus::broken : RingStatus::would_block;
    if (wrap && !put_marker(RecordKind::wrap)) return status_;
    if (!put_marker(RecordKind::fin)) return status_;
    fin_sent_ = true;
    return RingStatus::ok;
}

}  // namespace rdmasock::ring
