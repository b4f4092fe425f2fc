// A transport is a pair of rings plus the shared sleep flags of the wake-up
// protocol. The connection logic (common/connection.*) is written against this
// interface only, so shared memory and RDMA share all of it.
//
// Sleeping without lost wake-ups (a Dekker handshake on seq_cst fences):
//   sleeper: set my flag; fence; re-check the ring; only then sleep in the kernel
//   waker:   publish (record or consumed counter); fence; if take_peer_flag(): doorbell
// Either the sleeper sees the new state or the waker sees the flag.
#pragma once

#include "ring_reader.hpp"
#include "ring_writer.hpp"

namespace rdmasock {

class Transport {
public:
    virtual ~Transport() = default;
    virtual const char* name() const = 0;
    virtual ring::RingWriter& writer() = 0;
    virtual ring::RingReader& reader() = 0;
    virtual void set_reader_waiting(bool on) = 0;  // I sleep until the peer writes
    virtual void set_writer_waiting(bool on) = 0;  // I sleep until the peer frees space
    // After writing: the peer's reader sleeps and wants a doorbell (clears the flag).
    virtual bool take_peer_reader_waiting() = 0;
    // After publishing consumed: the peer's writer sleeps and wants a doorbell.
    virtual bool take_peer_writer_waiting() = 0;
};

}  // namespace rdmasock
