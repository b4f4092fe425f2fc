// Work that waits for a quiet moment, done by the wait engine (wait_engine.hpp)
// without a thread of the shim's own: while some is pending, a sleep lasts at
// most kEveryUs, and a wait that wakes runs the pass when one is due (at most
// once per kEveryUs in the process). What the pass does is registered from
// above (connection/idle_windows.hpp: grown ring windows given back when
// idle); the engine only knows that there is one.
#pragma once

#include <atomic>
#include <cstdint>

namespace rdmasock::idle_pass {

constexpr int64_t kEveryUs = 250000;

// Registers the pass (once; later calls change nothing).
void set(void (*pass)());
// Whether some work waits (one relaxed load): the engine caps its sleeps then.
bool pending();
// Said by the pass's owner: work waits, or none is left.
void note_pending(bool on);
// Runs the pass if one is due (never blocks; a pass under way elsewhere is not waited for).
void run_if_due();

}  // namespace rdmasock::idle_pass
