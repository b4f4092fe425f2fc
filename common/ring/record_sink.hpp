// The seam between the ring code and a transport.
//
// A writer assembles each record in memory the sink hands out (the reader's ring
// itself for shared memory, a registered local mirror for RDMA), then asks the
// sink to post it. Everything else about rings is transport-independent.
#pragma once

#include <cstdint>

namespace rdmasock::ring {

class RecordSink {
public:
    virtual ~RecordSink() = default;
    // Writable memory for a record that will occupy [offset, offset + bytes) of
    // the reader's ring; bytes never cross the ring's end.
    virtual uint8_t* stage(uint64_t offset, uint64_t bytes) = 0;
    // Deliver the staged record into the reader's ring, first byte to last.
    // False when the transport failed; the writer then reports "broken".
    virtual bool post(uint64_t offset, uint64_t bytes) = 0;
    // The writer's window grows over [from, to) of the ring: back that memory
    // now, or say no (the writer keeps its window). The default: the whole
    // ring is backed already (RDMA registers it whole).
    virtual bool back(uint64_t from, uint64_t to) {
        (void)from, (void)to;
        return true;
    }
    // The window went back below [from, to), which nobody reads or writes
    // any more: its memory may be given back (it is backed again before reuse).
    virtual void release(uint64_t from, uint64_t to) { (void)from, (void)to; }
};

// How a reader tells the writer how far it has consumed (flow control).
class ConsumedPublisher {
public:
    virtual ~ConsumedPublisher() = default;
    virtual bool publish_consumed(uint64_t consumed) = 0;
    // Whether the writer wants to hear at once that everything was read (its
    // window is grown: RingControl::window_grown), not an eighth later.
    virtual bool drain_wanted() const { return true; }
};

}  // namespace rdmasock::ring
