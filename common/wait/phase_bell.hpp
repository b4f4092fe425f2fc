// Phase bells: how a sleeper learns that a connection changed phase
// (docs/waiting.md, "A phase change wakes every sleeper").
//
// What a sleeper waits on depends on the phase it saw when it began: during a
// rendezvous or an in-band handshake only the TCP socket (and, once the rings
// are handed over, their doorbell); once upgraded, the doorbells. Another
// thread's call may complete the switch meanwhile, and the peer's next bytes
// then come on a ring whose doorbell the sleeper never asked for: over TCP it
// would have woken. So a sleeper that begins while the phase may still change
// registers a bell with the connection (Connection::watch_phase) and sleeps on
// it too; the one writer of the phase rings every registered bell after its
// store, and the sleeper looks again with the new phase's wait set.
//
// A bell is an eventfd with one reader: this thread's (blocking calls, poll,
// select), or an epoll set's (registered in its kernel half; whichever thread
// of the set wakes drains it and rescans under the set's lock). Registration
// and ringing share the connection's lock, so a sleeper that registered and
// then found the phase unchanged is rung for any later change (the store comes
// before the ringer takes the lock).
#pragma once

namespace rdmasock::bell {

// This thread's bell, made at its first use (a forked child makes its own);
// -1 when none could be made (the caller then naps instead of sleeping).
int thread_bell();
// An own eventfd for a bell that is not a thread's (an epoll set's); -1 on failure.
int make_bell();
void ring(int bell);
// Takes what rang it; call after a wait reported it readable.
void drain(int bell);

}  // namespace rdmasock::bell
