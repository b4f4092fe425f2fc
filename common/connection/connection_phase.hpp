// The phases of a Connection and the one table of moves between them
// (docs/protocol.md, "Phases"). Connection::enter() is the only writer of the
// phase and checks every move against allowed_move(); a build with
// -DRDMASOCK_CHECK_PHASES (make CHECKED=1, the sanitizer builds) aborts on a
// move outside the table, a release build logs it once.
#pragma once

#include <cstdint>

namespace rdmasock {

enum class Phase : uint8_t { undecided, offered, accepted, strip_hello, upgraded, plain, failed,
                             rv_listen, rv_pending, rv_offered, rv_accepted };
inline constexpr int kPhaseCount = 11;

const char* to_string(Phase p);

// A side-channel rendezvous before either side holds rings: every byte is still
// on TCP, so dropping it to plain moves nothing.
constexpr bool rendezvous_on_tcp(Phase p) {
    return p == Phase::rv_listen || p == Phase::rv_pending || p == Phase::rv_offered;
}

// In band, a handshake message of the peer's shim is still owed: the reply to
// our HELLO (offered), the client's READY or ABORT (accepted). The kernel must
// not be shut both ways then: a TCP socket shut for reading and writing resets
// the connection when bytes land (tcp_rcv_state_process), and TCP would see none.
constexpr bool awaits_peer_message(Phase p) { return p == Phase::offered || p == Phase::accepted; }

namespace phase_table {
constexpr uint32_t bit(Phase p) { return 1u << static_cast<unsigned>(p); }
constexpr uint32_t bits() { return 0; }
template <class... P>
constexpr uint32_t bits(Phase p, P... rest) { return bit(p) | bits(rest...); }

// Row `from`: the phases it may move to. plain and failed are final. Moves
// made while setting a new connection up (before any call used it) are the
// start moves below, not rows of this table.
constexpr uint32_t kMoves[kPhaseCount] = {
    /* undecided   */ bits(Phase::offered, Phase::accepted, Phase::strip_hello, Phase::plain, Phase::failed),
    /* offered     */ bits(Phase::upgraded, Phase::plain, Phase::failed),
    /* accepted    */ bits(Phase::upgraded, Phase::plain, Phase::failed),
    /* strip_hello */ bits(Phase::plain, Phase::failed),
    /* upgraded    */ bits(Phase::plain),
    /* plain       */ 0,
    /* failed      */ 0,
    /* rv_listen   */ bits(Phase::rv_accepted, Phase::plain),
    /* rv_pending  */ bits(Phase::rv_offered, Phase::undecided, Phase::plain),
    /* rv_offered  */ bits(Phase::upgraded, Phase::plain),
    /* rv_accepted */ bits(Phase::upgraded, Phase::plain),
};

// Where a connection may start (the constructor's phase, then set_offer /
// start_rendezvous_*, once, before its first call).
constexpr uint32_t kStarts = bits(Phase::undecided, Phase::plain, Phase::rv_listen, Phase::rv_pending);
}  // namespace phase_table

constexpr bool allowed_move(Phase from, Phase to) {
    return (phase_table::kMoves[static_cast<unsigned>(from)] & phase_table::bit(to)) != 0;
}
constexpr bool allowed_start(Phase p) { return (phase_table::kStarts & phase_table::bit(p)) != 0; }

}  // namespace rdmasock
