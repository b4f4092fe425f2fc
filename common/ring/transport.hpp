// A transport is a pair of rings plus the shared sleep flags of the wake-up
// protocol. The connection logic (common/connection.*) is written against this
// interface only, so shared memory and RDMA share all of it.
//
// Sleeping without lost wake-ups (a Dekker handshake, docs/waiting.md):
//   sleeper: arm_reader(true) / arm_writer(true); if it returns false, or the
//            ring re-check finds progress, do not sleep; else sleep in the kernel
//            on wake_fd() and the TCP socket
//   waker:   publish (record or consumed counter); fence; if take_peer_*(): ring_peer()
// Shared memory: the flag is a seq_cst store into shared memory, so the ring
// re-check that follows is exact and arm_* always returns true; the doorbell is
// a Unix socket pair per side (shm/shm_doorbell.hpp), ring ends exchanged in the rendezvous.
// RDMA: every record and publication is a WRITE WITH IMMEDIATE that raises a
// completion on the receiver's CQ after its data is placed; arm_* re-arms that
// CQ's notification and drains it, so the re-check sees every arrival that came
// before and every later one raises an event on the completion channel
// (wake_fd()). take_peer_* is always false there: the writer never rings.
// The TCP stream carries nothing of ours after the upgrade except a back
// marker (back_marker.hpp) that starts the way back to TCP; anything else
// resets the connection (Connection::reset_both).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "ring/ring_control.hpp"
#include "ring/ring_reader.hpp"
#include "ring/ring_writer.hpp"

namespace rdmasock {

class Transport {
public:
    virtual ~Transport() = default;
    virtual const char* name() const = 0;
    virtual ring::RingWriter& writer() = 0;
    virtual ring::RingReader& reader() = 0;
    // on=true: I (reader) am about to sleep until the peer writes; false: awake again.
    virtual bool arm_reader(bool on) = 0;
    // on=true: I (writer) am about to sleep until the peer frees space.
    virtual bool arm_writer(bool on) = 0;
    // After writing: the peer's reader sleeps and wants a doorbell (clears the flag).
    virtual bool take_peer_reader_waiting() = 0;
    // After publishing consumed: the peer's writer sleeps and wants a doorbell.
    virtual bool take_peer_writer_waiting() = 0;
    // Server: the client sent READY (it has the transport connected/mapped).
    virtual void on_peer_ready() {}
    // The transport broke for good (RDMA: a queue-pair error); no byte moves any more.
    virtual bool failed() const { return false; }
    virtual std::string failure() const { return {}; }  // why, once failed()
    // Doorbells: the fd a sleeper of this side waits on (-1: none, the doorbell
    // is a byte on the TCP socket), ring the peer's, consume ours.
    virtual int wake_fd() const { return -1; }
    // Changes when wake_fd() names a new file under the same number (an epoll
    // set registers it again).
    virtual unsigned wake_generation() const { return 0; }
    virtual void ring_peer() {}
    virtual void drain_wake() {}
    // In a forked child (pthread_atfork, one thread): a look another thread of
    // the parent had under way is nobody's here.
    virtual void forget_other_threads() {}
    // Wake every sleeper of this side without the peer (shutdown from another
    // thread): makes wake_fd() readable; false when nothing of ours can be
    // written. Every kind of sleeper (blocked call, poll, an epoll set's kernel
    // half) waits on wake_fd(), so this one write reaches them all.
    virtual bool wake_self() { return false; }
    // Waits (bounded) until every record posted has landed at the peer (RDMA:
    // all work requests completed), before the kernel's FIN may overtake them.
    virtual void flush_sends(int timeout_ms) { (void)timeout_ms; }
    // After the reader consumed bytes (a hook for receive-queue upkeep).
    virtual void after_read() {}
    // Side-channel connections switch each direction from TCP to the ring at a
    // byte offset (shm_channel.hpp, RingControl::switch_at); null: the rings
    // carry every byte from the start (in-band negotiation).
    virtual std::atomic<uint64_t>* tx_switch() { return nullptr; }
    virtual std::atomic<uint64_t>* rx_switch() { return nullptr; }
    // The way back to TCP (downgrade.hpp): the shared state of each direction
    // and the memory of the ring we write (a take-back reads it). Null: this
    // transport cannot hand its stream back (a shared-memory transport set up
    // in band, which has no TCP side of its own).
    virtual RingControl* tx_control() { return nullptr; }
    virtual RingControl* rx_control() { return nullptr; }
    virtual uint8_t* tx_ring() { return nullptr; }
    // In band: where the records in tx_ring() end (older laps lie past it).
    virtual uint64_t tx_end() { return 0; }
    // How the way back is agreed: false, the peer maps the RingControls and
    // sees every step there (shared memory); true, each side holds its own and
    // the steps travel as back markers on the TCP stream (back_marker.hpp;
    // RDMA). tx_ring() is then the writer's own copy of the ring it writes.
    virtual bool back_in_band() const { return false; }
    // Whether this process can read the receive ring's memory: always for
    // shared memory (a forked child maps the same memfd); for RDMA the owner's
    // ring, or in a forked child the copy the fork made on a copy-on-fork
    // kernel (under MADV_DONTFORK the child has none).
    virtual bool ring_here() const { return true; }
    // The peer's reader of the ring we write says how its socket ended
    // (RingControl::ReaderState): shared memory, in the control block both map;
    // RDMA, in a word of our ctrl block that the peer RDMA-WRITEs.
    virtual uint32_t peer_reader_state() {
        RingControl* c = tx_control();
        return c ? c->reader_state.load(std::memory_order_acquire) : RingControl::reading;
    }
    // Ours, for the peer's writer: the same two places, from this side.
    virtual void tell_reader_state(uint32_t st) {
        if (RingControl* c = rx_control()) c->reader_state.store(st, std::memory_order_seq_cst);
    }
    // Extra words for the statistics line ("" or " key=value ...").
    virtual std::string stats_detail() const { return {}; }
};

}  // namespace rdmasock
