// The way back from a ring to TCP, one direction at a time (docs/protocol.md,
// "Downgrade"). Pure protocol on a RingControl and the ring's memory, so unit
// tests reach it without a connection.
//
// Invariant: once a direction is `back`, every byte its reader has not taken
// from the ring travels over TCP, in order, after whatever TCP already carried.
// Only the writer can put bytes on its TCP socket, so the writer performs every
// take-back (take_back); a reader that must leave the ring (its process execs,
// passes the fd, forks a child that uses it...) asks for one (ask), and when
// the writer is idle with nothing unread it completes the switch alone.
//
// Two locks between processes keep the parties apart: writer_busy around each
// ring write, reader_busy around each ring read, each holding the owner's pid
// (a forked child shares the ring with its parent; a dead owner is taken over).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ring/busy_lock.hpp"
#include "ring/ring_control.hpp"

namespace rdmasock::downgrade {

bool try_lock(std::atomic<int32_t>& word, int32_t pid);
// Blocks briefly: a holder never sleeps with it. We do (busy_lock.hpp): no spin.
// False after kLockPatienceUs on a live holder: nobody honest holds it that long
// (a stopped process); the caller resets the connection. A dead holder is taken
// over. (Words the peer can write: busy_lock::lock with a Judge that knows our end.)
constexpr int64_t kLockPatienceUs = 5'000'000;
[[nodiscard]] bool lock(std::atomic<int32_t>& word, int32_t pid);
void unlock(std::atomic<int32_t>& word);

inline constexpr auto kRing = RingControl::ring, kAsked = RingControl::asked, kBack = RingControl::back;

inline RingControl::Back state(const RingControl& c) {
    return static_cast<RingControl::Back>(c.back_state.load(std::memory_order_seq_cst));
}

// Where bytes of a take-back go: the writer's TCP socket. Returns false when
// the socket is gone (no one will read them).
struct Resend {
    virtual bool send_all(const void* data, size_t len) = 0;
    virtual void end_of_stream() = 0;  // the ring held the writer's FIN: shut TCP's write side
    virtual ~Resend() = default;
};

struct TakeBack {
    uint64_t resent = 0;  // bytes moved from the ring to TCP
    bool fin = false;     // the ring ended with the writer's FIN
    bool ok = true;       // false: the ring failed validation (err) or the socket was gone
    bool abused = false;  // !ok: the reader's busy word was held by someone who has no business there
    std::string err;
};

// The writer's half; call holding writer_busy of `c` (the ring we write).
// Marks the direction back from the reader's exact place and resends what the
// reader had not read. Idempotent: a direction already back resends nothing.
// `judge`/`policy`: how long the reader's busy word may keep us (null: dead or alive only).
TakeBack take_back(RingControl& c, uint8_t* ring, uint64_t capacity, int32_t pid, Resend& out,
                   busy_lock::Judge* judge = nullptr, const busy_lock::Policy& policy = busy_lock::Policy{kLockPatienceUs});

// In-band transports (RDMA, back_marker.hpp): the writer's own copy of the
// ring it writes (the send mirror) and the reader's place from the peer's
// marker, stored in c.read_pos/read_partial with c.back_state asked. Resends
// the records in [read place, end) (end: the writer's next record position;
// the mirror holds older laps past it), marks the direction back. Every record
// must validate at its position: a place that is no record boundary, outside
// (end - capacity, end], or a partial past its record fails (err).
TakeBack take_back_until(RingControl& c, const uint8_t* ring, uint64_t capacity, uint64_t end, Resend& out);

// The reader's half; call holding reader_busy of `c` (the ring we read).
//   s = ask(c);                    // ring -> asked (back: nothing to do)
//   if (s == asked && writer_idle(c) && <the reader sees neither record nor FIN>)
//       s = complete_alone(c);     // nothing is owed: asked -> back
// In that order (a Dekker handshake with the writer, which takes writer_busy
// and then reads the state): an idle writer's last record landed before it
// let go of the lock, so the look at the ring that follows sees it.
RingControl::Back ask(RingControl& c);
bool writer_idle(const RingControl& c);
RingControl::Back complete_alone(RingControl& c);

}  // namespace rdmasock::downgrade
