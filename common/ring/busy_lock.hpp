// The busy words of the shared control page (ring_control.hpp: writer_busy,
// reader_busy) as a lock: the pid of the process inside a ring write / read.
// The page is the peer's memory too, so any value may sit there; who holds the
// word decides how long we wait (docs/security.md, "Busy words"):
//   - free: taken at once (a CAS), the fast path: no system call;
//   - still taken after a few microseconds: the holder is judged, once per value
//     and again every so often while we wait:
//       dead (no such process, or no pid at all): a stale lock of a relative
//         killed inside a ring call: taken over (a CAS from that very value);
//       a relative (a live process holding our end's TCP socket: a fork, an fd
//         passed by SCM_RIGHTS), or our own pid where another thread may hold it:
//         we sleep (nanosleep, growing to 1 ms), never spin, for `patience_us`;
//       anyone else (the peer, a stranger, our own pid where the caller already
//         excludes our other threads): after `foreign_grace_us` asleep, abuse:
//         the caller resets this connection alone.
// No timeouts decide anything honest: an honest holder keeps the word for one
// copy (no system call), so a holder that stays is stopped, dead or hostile.
#pragma once

#include <atomic>
#include <cstdint>

namespace rdmasock::busy_lock {

enum class Who {
    dead,      // no such process: a stale lock, taken over
    relative,  // a live process of our end (shares our TCP socket)
    self,      // our own pid
    foreign,   // the peer or a stranger
};

// Tells who a holder is (the Connection looks in /proc for our socket).
struct Judge {
    virtual Who who(int32_t pid) = 0;
    virtual ~Judge() = default;
};

// Dead or alive only (kill(pid, 0)): for words only processes of one end take.
struct AliveJudge final : Judge {
    Who who(int32_t pid) override;
};

struct Policy {
    int64_t patience_us = 5'000'000;   // a live relative (or ourselves) may hold it this long
    int64_t foreign_grace_us = 0;      // a foreign holder: 0 = abuse as soon as judged
    bool self_is_foreign = false;      // the caller holds the process-local lock: our pid is no thread of ours
};

enum class Got {
    locked,    // ours now
    patience,  // a live holder of our end kept it past patience_us
    abused,    // a holder that has no business there kept it past foreign_grace_us
};

[[nodiscard]] Got lock(std::atomic<int32_t>& word, int32_t self, Judge& judge, const Policy& policy);
// Who `pid` is by the kernel alone (no /proc): dead, self, or `alive_as`.
Who by_kill(int32_t pid, int32_t self, Who alive_as);

}  // namespace rdmasock::busy_lock
