// An application's signal handler as the shim keeps it, read from inside a
// signal handler without a lock (the fault guard's SIGSEGV/SIGBUS, the
// signal trampoline's others): the one writer at a time (HandlerWriteLock)
// fills a slot no reader is pointed at, then publishes its index. Four slots:
// a reader would need to be preempted across three whole writes to read a
// slot being filled.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <atomic>

namespace rdmasock {

template <class T>
struct HandlerSlots {
    T slots[4];
    std::atomic<unsigned> current{0};

    T load() const { return slots[current.load(std::memory_order_acquire) & 3]; }
    void publish(const T& v) {  // under the write lock
        const unsigned next = (current.load(std::memory_order_relaxed) + 1) & 3;
        slots[next] = v;
        current.store(next, std::memory_order_release);
    }
};

// Serializes the writers of one set of HandlerSlots. Every signal stays
// blocked while it is held: a handler that calls sigaction itself (a crash
// handler restoring SIG_DFL) must not find its own thread holding the lock.
class HandlerWriteLock {
public:
    explicit HandlerWriteLock(std::atomic_flag& flag) : flag_(flag) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &was_);
        while (flag_.test_and_set(std::memory_order_acquire)) sched_yield();
    }
    ~HandlerWriteLock() {
        flag_.clear(std::memory_order_release);
        pthread_sigmask(SIG_SETMASK, &was_, nullptr);
    }
    HandlerWriteLock(const HandlerWriteLock&) = delete;
    HandlerWriteLock& operator=(const HandlerWriteLock&) = delete;

private:
    std::atomic_flag& flag_;
    sigset_t was_;
};

}  // namespace rdmasock
