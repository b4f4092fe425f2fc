#include "wait/idle_pass.hpp"

#include <time.h>

namespace rdmasock::idle_pass {

namespace {
std::atomic<void (*)()> g_pass{nullptr};
std::atomic<bool> g_pending{false};
std::atomic<int64_t> g_next_us{0};  // the earliest time of the next pass
std::atomic<bool> g_running{false};

int64_t now_us() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}
}  // namespace

void set(void (*pass)()) {
    void (*none)() = nullptr;
    g_pass.compare_exchange_strong(none, pass);
}

bool pending() { return g_pending.load(std::memory_order_relaxed); }

void note_pending(bool on) {
    if (on && !g_pending.load(std::memory_order_relaxed)) g_next_us.store(now_us() + kEveryUs, std::memory_order_relaxed);
    g_pending.store(on, std::memory_order_relaxed);
}

void run_if_due() {
    if (!pending()) return;
    const int64_t now = now_us();
    int64_t next = g_next_us.load(std::memory_order_relaxed);
    if (now < next || !g_next_us.compare_exchange_strong(next, now + kEveryUs)) return;
    auto* pass = g_pass.load(std::memory_order_acquire);
    if (!pass || g_running.exchange(true, std::memory_order_acquire)) return;
    pass();
    g_running.store(false, std::memory_order_release);
}

}  // namespace rdmasock::idle_pass
