// Grown ring windows given back when their connection goes idle (issue 37:
// an idle connection holds what an idle TCP socket holds, not the buffer its
// last burst needed).
//
// A writer gives a grown window back only once its reader has read everything
// (ring_writer.hpp give_back_if_drained), and nothing calls into an idle
// connection. So a connection whose send window grew is watched here, and the
// wait engine's idle pass (wait/idle_pass.hpp, at most every 250 ms while any
// is watched, in whichever thread of the process wakes) asks each watched
// connection to give its window back once a whole pass went by without a
// send (Connection::give_back_idle_window: never blocks, a busy writer or a
// reader still reading waits for the next pass). A connection leaves the list
// when its window is back, when it is not ours to touch (a forked child's
// copy, back on TCP), after kGiveUpPasses passes in which its reader did not
// drain (its next send watches it again), and when it is destroyed.
#pragma once

namespace rdmasock {

class Connection;

namespace idle_windows {

constexpr int kGiveUpPasses = 40;  // about 10 s of a reader that does not read

// A send left `c`'s window grown: watch it (a no-op when it is watched).
void watch(Connection* c);
// `c` is being destroyed: never looked at again after this returns.
void forget(Connection* c);
// How many are watched (tests, statistics).
int watched();
// One pass now, whatever the time (tests; the engine's pass is idle_pass's).
void pass_now();

}  // namespace idle_windows
}  // namespace rdmasock
