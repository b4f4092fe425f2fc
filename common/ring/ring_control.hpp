// The shared state of one direction of a same-host connection: the page beside
// each ring in the memfd (shm_channel.hpp). Both processes map it; each field
// sits on its own cache line and says who writes it.
#pragma once

#include <atomic>
#include <cstdint>

namespace rdmasock {

struct RingControl {
    alignas(64) std::atomic<uint64_t> consumed{0};       // reader -> writer: flow control
    alignas(64) std::atomic<uint32_t> writer_waiting{0};  // writer sleeps until space frees
    alignas(64) std::atomic<uint32_t> reader_waiting{0};  // reader sleeps until a record lands
    // Side-channel connections start on TCP: the writer of this ring stores here
    // how many bytes it sent over TCP before its first ring byte (kNotSwitched:
    // still on TCP). Its reader takes bytes from TCP up to that offset, then from
    // the ring (docs/protocol.md, "Switching at a byte offset").
    static constexpr uint64_t kNotSwitched = ~0ull;
    alignas(64) std::atomic<uint64_t> switch_at{kNotSwitched};

    // ---- the way back to TCP (downgrade.hpp, docs/protocol.md "Downgrade")
    // ring -> asked (the reader wants every byte it has not read sent over TCP)
    // -> back (from the reader's position on, the whole direction is on TCP).
    enum Back : uint32_t { ring = 0, asked = 1, back = 2 };
    alignas(64) std::atomic<uint32_t> back_state{ring};
    // The pid of the process inside a ring write / a ring read (0: none). A
    // lock between processes (a forked child shares the ring with its parent)
    // and the writer's half of a Dekker handshake with a reader that asks.
    alignas(64) std::atomic<int32_t> writer_busy{0};
    alignas(64) std::atomic<int32_t> reader_busy{0};
    // The reader's exact place (record position, bytes of that record already
    // delivered), stored before it lets go of reader_busy: where a take-back
    // starts. (`consumed` lags: it is published lazily.)
    alignas(64) std::atomic<uint64_t> read_pos{0};
    std::atomic<uint32_t> read_partial{0};

    // ---- the reader's socket is gone (its process closed the last reference
    // and no fork shares it): what TCP's peer learns from the RST its next
    // segment draws, the writer reads here without a system call.
    //   closed:  nothing was left unread (a FIN): the writer's next send still
    //            goes out, the one after fails (EPIPE), as on TCP;
    //   aborted: bytes were left unread, or SO_LINGER 0 (a RST at once): the
    //            writer's next call fails with ECONNRESET;
    //   gone:    the reader's TCP socket failed (ETIMEDOUT...) and the kernel
    //            forgot it, no FIN sent: the writer's next send goes out and
    //            draws a RST, the call after fails with ECONNRESET.
    enum ReaderState : uint32_t { reading = 0, closed = 1, aborted = 2, gone = 3 };
    alignas(64) std::atomic<uint32_t> reader_state{reading};

    // Writer -> reader: 1 while the writer's window is grown. The reader then
    // publishes its place as soon as it has read everything, so that an idle
    // writer can give the window back (ring_writer.hpp give_back_if_drained);
    // otherwise it publishes lazily. (Appended: a peer of the layout before
    // never sets it, and reads nothing here.)
    alignas(64) std::atomic<uint32_t> window_grown{0};
};

}  // namespace rdmasock
