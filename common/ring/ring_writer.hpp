// The sending half of a ring: turns a byte stream into framed records.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <string>

#include "ring/consumed_counter.hpp"
#include "sys/owner_written.hpp"
#include "ring/record_sink.hpp"
#include "ring/ring_format.hpp"
#include "ring/ring_io.hpp"

namespace rdmasock::ring {

class RingWriter {
public:
    // `consumed` is the reader's published consumed position, living in this
    // process's memory (written by the peer); it is validated on every read.
    // `window`: the part of the ring used at first (0: all of it).
    //
    // The window grows as TCP's buffers autotune, after the sink backs the new
    // pages (RecordSink::back): records wrap at its end only when the reader
    // is nearly through it (so a lagging reader holds the writer at the ring,
    // never at a window), otherwise the window doubles; a write that finds it
    // full doubles it (once per call), and a send larger than its record
    // limit widens it first (one send, one record, as one loopback segment).
    // It goes back to the first window after kShrinkAfter writes in a row
    // that each took all their bytes without growing it, none more than a
    // sixteenth of the first window (1 KiB): the writer wraps if it stands past it, and the sink gives the
    // rest back (RecordSink::release) once the reader has passed everything
    // written before. The reader follows wrap markers wherever they stand.
    RingWriter(uint64_t capacity, RecordSink& sink, ConsumedCounter consumed, uint64_t window = 0);

    // Appends as much of the gathered bytes as fits, split into records; never
    // blocks. bytes == 0 with would_block means the ring is full.
    IoResult writev(const iovec* iov, int iovcnt);
    IoResult write(const void* data, size_t len);

    // End of stream for this direction (shutdown(SHUT_WR) / close). Data never
    // takes the last kFinReserve bytes, so the end of stream always fits, as
    // TCP queues its FIN behind a full send buffer: a shutdown on a full ring
    // whose reader comes late still ends the stream.
    RingStatus write_fin();
    static constexpr uint64_t kFinReserve = 2 * kAlign;  // a wrap marker and the end-of-stream record

    // True when at least one payload byte would fit now.
    bool has_space();
    // POLLOUT as TCP defines it (sk_stream_is_writeable): at least a third of the
    // ring is free, so "poll for writable, then one blocking write of a normal
    // buffer" does not stall the way it would on a ring with a few bytes free.
    // A look, safe beside a writer in another thread: it never breaks the ring.
    bool writable() const;
    uint64_t capacity() const { return capacity_; }
    uint64_t window() const { return window_; }
    bool window_grown() const { return window_ > first_window_; }
    static constexpr uint32_t kShrinkAfter = 256;
    // An idle connection holds no grown window, as an idle TCP socket holds no
    // buffer: once the reader has read everything written, the window goes
    // back to the first one and the memory past it is given back at once,
    // except the page of the wrap marker that starts the next lap there (given
    // back once the reader passed it, at a later write or call of this). Never
    // blocks; false when the reader has not read everything (or the ring broke).
    bool give_back_if_drained();
    // Memory is given back by whole pages: a wrap marker's page stays.
    static constexpr uint64_t kGiveBackPage = 4096;
    // Where to say whether the window is grown (RingControl::window_grown: the
    // reader then publishes its place at once when it has read everything).
    void announce_window_to(std::atomic<uint32_t>* flag) { grown_flag_ = flag; }
    uint64_t written() const { return written_; }
    RingStatus status() const { return status_; }
    const std::string& error() const { return error_; }

private:
    bool refresh_consumed();
    // Free space within the window: what a writer could fill before it waits.
    uint64_t free_in_window(uint64_t written, uint64_t consumed) const;
    bool grow_window();
    void shrink_window_if_idle();
    void set_window(uint64_t w);  // the only writer of window_ after construction
    // The lap ends here: a tail of 8 takes only a wrap marker; inside a smaller
    // window a tail of 16 too (a data record there would leave no room for it).
    bool wrap_due(uint64_t tail) const { return tail == kAlign || (window_ < capacity_ && tail < kAlign + record_bytes(1)); }
    bool put_record(RecordKind kind, const iovec*& iov, int& iovcnt, size_t& iov_off, uint32_t length,
                    bool* fault = nullptr);
    bool put_marker(RecordKind kind);  // a wrap marker or the end of stream: no payload
    RingStatus fail(std::string why);

    uint64_t capacity_;
    uint64_t mask_;
    OwnerWritten<uint64_t> window_;  // read by writable()'s lookers too
    uint32_t max_payload_;  // of the window: a wrap loses at most a quarter of it
    uint64_t first_window_;
    std::atomic<uint32_t>* grown_flag_ = nullptr;
    OwnerWritten<bool> growth_refused_{false};  // the sink said no last time: writable() judges the window
    uint32_t small_writes_ = 0;  // writes in a row that took all their bytes, at most a sixteenth of the first window
    struct Giveback {       // memory past a shrunk window, given back once the reader passed `after`
        uint64_t from = 0, to = 0, after = 0;
        bool due = false;
    } giveback_;
    RecordSink& sink_;
    ConsumedCounter peer_consumed_;
    // Read by writable()'s unlocked lookers too.
    OwnerWritten<uint64_t> written_{0};   // absolute position of the next record
    OwnerWritten<uint64_t> consumed_{0};  // last validated value of *peer_consumed_
    bool fin_sent_ = false;
    OwnerWritten<RingStatus> status_{RingStatus::ok};
    std::string error_;
};

}  // namespace rdmasock::ring
