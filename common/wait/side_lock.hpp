// A direction's lock of a connection (its reads, or its writes). A call that
// finds it taken waits like any blocking call (the kernel's socket lock lets a
// second reader sleep too, ended by its own timeout or signal), so that wait
// must end when the holder lets go. A holder that was waiting for data would
// wake it by the doorbell, but many holders are not: a rendezvous step, a
// hand-over, a shutdown. So whoever unlocks wakes the waiters itself.
//
// No lost wake-up (Dekker): a waiter counts itself, then tries the lock; a
// holder unlocks, then reads the count. Either the try succeeds, or the
// holder sees the count and wakes (the wake is a level: an eventfd stays
// readable until drained, so a waiter that sleeps after it still returns).
//
// Signal handlers of a holder's thread run when it lets go (signal_seen.hpp).
#pragma once

#include <atomic>
#include <mutex>
#include <new>

#include "sys/signal_seen.hpp"

namespace rdmasock {

class SideLock {
public:
    using Wake = void (*)(void* ctx);
    SideLock(Wake wake, void* ctx) : wake_(wake), ctx_(ctx) {}
    SideLock(const SideLock&) = delete;
    SideLock& operator=(const SideLock&) = delete;

    // A holder's signal handlers wait until it lets go (signals::DeferHandlers):
    // one that sent on this connection would wait for this lock for good.
    // (lock() may wait long for another thread's blocking kernel recv: its
    // handlers run meanwhile, and are held back only once it holds the lock.)
    void lock() {
        m_.lock();
        signals::defer_begin();
    }
    bool try_lock() {
        signals::defer_begin();  // before: no instant in which the lock is ours and a handler runs
        if (m_.try_lock()) return true;
        signals::defer_end();
        return false;
    }
    void unlock() {
        m_.unlock();
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (waiters_.load(std::memory_order_relaxed) > 0) wake_(ctx_);
        signals::defer_end();
    }

    // In a forked child, which has only the thread that forked: a holder or
    // waiter in the parent (a reader asleep on an empty ring) is not there.
    // Rebuilt only when one held it: a lock nobody held stays the same object,
    // which ThreadSanitizer can go on following.
    void forget_holders() {
        if (m_.try_lock()) m_.unlock();
        else new (&m_) std::mutex();
        waiters_.store(0, std::memory_order_relaxed);
    }

    // Held for as long as a call waits for the lock (around its wait).
    struct Waiting {
        SideLock& l;
        explicit Waiting(SideLock& s) : l(s) {
            l.waiters_.fetch_add(1, std::memory_order_seq_cst);
        }
        ~Waiting() { l.waiters_.fetch_sub(1, std::memory_order_relaxed); }
    };

private:
    std::mutex m_;
    std::atomic<int> waiters_{0};
    Wake wake_;
    void* ctx_;
};

// A short-held lock that signal handlers of its holder's thread never see
// taken: they are held back from before it is taken until after it is let go
// (signals::DeferHandlers), so a handler that does socket I/O cannot wait for
// its own thread. Every lock the shim takes on a path a handler's I/O also
// takes is one of these (or a SideLock).
class HandlerSafeMutex {
public:
    void lock() {
        signals::defer_begin();
        m_.lock();
    }
    bool try_lock() {
        signals::defer_begin();
        if (m_.try_lock()) return true;
        signals::defer_end();
        return false;
    }
    void unlock() {
        m_.unlock();
        signals::defer_end();
    }
    // In a forked child (one thread): a holder in the parent is not there.
    // True when one held it at the fork (the forking thread holds none of the
    // shim's locks): what it guards may be half-changed, and the child must not
    // build on it.
    bool forget_holders() {
        if (m_.try_lock()) {
            m_.unlock();
            return false;
        }
        new (&m_) std::mutex();  // rebuilt only when held (as SideLock::forget_holders)
        return true;
    }

private:
    std::mutex m_;
};

}  // namespace rdmasock
