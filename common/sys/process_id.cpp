#include "sys/process_id.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace rdmasock {

namespace {
std::atomic<int> g_pid{0};
std::atomic<uint64_t> g_forks{0};
std::atomic<uint64_t> g_forks_begun{0};
}  // namespace

int current_pid() {
    int p = g_pid.load(std::memory_order_relaxed);
    if (p == 0) {
        static const bool registered = (pthread_atfork(nullptr, nullptr, refresh_current_pid), true);
        (void)registered;
        p = static_cast<int>(getpid());
        g_pid.store(p, std::memory_order_relaxed);
    }
    return p;
}

void refresh_current_pid() { g_pid.store(static_cast<int>(getpid()), std::memory_order_relaxed); }

uint64_t fork_generation() { return g_forks.load(std::memory_order_acquire); }
void note_fork() { g_forks.fetch_add(1, std::memory_order_acq_rel); }

uint64_t forks_begun() { return g_forks_begun.load(std::memory_order_seq_cst); }
void note_fork_begins() { g_forks_begun.fetch_add(1, std::memory_order_seq_cst); }

}  // namespace rdmasock
