#include "shm/fd_reaper.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <atomic>
#include <cerrno>

#include "base/log.hpp"
#include "sys/kernel_calls.hpp"
#include "sys/own_fd.hpp"
#include "sys/process_id.hpp"

namespace rdmasock::fd_reaper {

namespace {

// Pending closes: fd + 1, 0 when free. Fixed, so that close_later takes no lock
// and allocates nothing (it may run in a signal handler's I/O call).
constexpr int kSlots = 256;
std::atomic<int> g_slots[kSlots];
std::atomic<uint32_t> g_seq{0};       // bumped per hand-off; the thread sleeps on it
std::atomic<pid_t> g_owner{0};        // the process whose thread exists
std::atomic<unsigned> g_started{0};
std::atomic<bool> g_creating{false};

void* run(void*) {
    for (;;) {
        const uint32_t seen = g_seq.load(std::memory_order_acquire);
        for (auto& s : g_slots) {
            const int v = s.exchange(0, std::memory_order_acq_rel);
            if (v) close_own_fd(v - 1);  // may block: that is what this thread is for
        }
        kernel::futex(&g_seq, FUTEX_WAIT_PRIVATE, seen);
    }
    return nullptr;
}

bool ensure_thread() {
    const pid_t me = current_pid();
    if (g_owner.load(std::memory_order_acquire) == me) return true;
    // A vfork child shares our memory and must not start threads: the fd stays
    // queued, and the parent's thread (or the child's exec) deals with it.
    if (kernel::getpid() != me) return false;
    bool expected = false;
    if (!g_creating.compare_exchange_strong(expected, true)) return false;  // another thread creates it now
    bool ok = g_owner.load() == me;
    if (!ok) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);  // the thread inherits it: no handler of the program runs there
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&a, 64 * 1024);
        pthread_t t;
        ok = pthread_create(&t, &a, run, nullptr) == 0;
        pthread_attr_destroy(&a);
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        if (ok) {
            g_owner.store(me, std::memory_order_release);
            g_started.fetch_add(1);
            RS_LOG(info, "started a thread that closes the files a peer handed over whose close may block");
        }
    }
    g_creating.store(false);
    return ok;
}

}  // namespace

void close_later(int fd) {
    if (fd < 0) return;
    const int saved = errno;
    mark_own_fd(fd);  // from now on the program's close of this number is EBADF, as for a number never opened
    bool queued = false;
    for (auto& s : g_slots) {
        int free_slot = 0;
        if (s.compare_exchange_strong(free_slot, fd + 1)) {
            queued = true;
            break;
        }
    }
    if (!queued) {
        // Every slot holds a close that is still waiting: keeping this one open
        // costs an fd; closing it here could cost the program's call its time.
        RS_LOG(warn, "fd %d: a file a peer handed over stays open (256 closes already waiting)", fd);
    } else {
        g_seq.fetch_add(1, std::memory_order_acq_rel);
        // Another thread creating it right now: wait that out (a thread start's
        // time), then wake it, in case it slept before our slot was filled.
        for (int i = 0; !ensure_thread() && g_creating.load() && i < 1000; ++i) sched_yield();
        if (g_owner.load(std::memory_order_acquire) == current_pid())
            kernel::futex(&g_seq, FUTEX_WAKE_PRIVATE, 1);
    }
    errno = saved;
}

unsigned started() { return g_started.load(); }

}  // namespace rdmasock::fd_reaper
