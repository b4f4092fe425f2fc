// fork_lock: a short-held registry lock carried across fork by pthread_atfork.
//
// The prepare handler takes the lock, so the child gets what it guards whole and the
// lock free: the parent and the child each let go of their copy (the forking thread
// is the holder in both). Nothing is rebuilt under a holder, which ThreadSanitizer
// (and a reader) can follow. A lock still taken after ~100 ms is not held: another
// thread may be stuck with it (a signal handler that forks on the thread that holds
// it would wait for itself). The fork then goes on without it, and only then does
// the child rebuild it, since its holder is not in the child.
//
// Not for the per-connection locks (SideLock, HandlerSafeMutex): a reader holds
// those across its wait, so a fork cannot take them; the child forgets their holders
// (forget_holders).
#pragma once

#include <sched.h>
#include <unistd.h>

#include <mutex>
#include <new>

namespace rdmasock::fork_lock {

// In the prepare handler: true when the lock is now held by the forking thread.
inline bool take(std::mutex& m) {
    for (int i = 0; i < 2000; ++i) {
        if (m.try_lock()) return true;
        if (i < 100) sched_yield();
        else usleep(50);
    }
    return false;
}

// In the parent after the fork.
inline void after_parent(std::mutex& m, bool held) {
    if (held) m.unlock();
}

// In the child: the forking thread lets go of what it took; a lock it could not
// take belongs to a thread that is not in the child.
inline void after_child(std::mutex& m, bool held) {
    if (held) m.unlock();
    else new (&m) std::mutex();
}

}  // namespace rdmasock::fork_lock
