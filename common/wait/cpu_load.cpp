#include "wait/cpu_load.hpp"

#include <fcntl.h>
#include <sched.h>

#include <atomic>
#include <cerrno>

#include "sys/kernel_calls.hpp"
#include "wait/wait_engine.hpp"

namespace rdmasock::cpu_load {

namespace {
std::atomic<int64_t> g_next_sample_us{0};
std::atomic<bool> g_busy{false};
std::atomic<int> g_runnable{0}, g_cpus{0};
std::atomic<uint64_t> g_skipped{0};
std::atomic<bool> g_sampling{false};

int affinity_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (raw_syscall(SYS_sched_getaffinity, 0, sizeof set, &set) <= 0) return 0;
    return CPU_COUNT(&set);
}

// Opened and closed at each sample: an fd kept open would be one more the
// program sees after its last connection ended (a leak to any before/after
// count of its fds).
int read_runnable() {
    int fd = kernel::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[128];
    ssize_t n = kernel::read(fd, buf, sizeof buf - 1);
    kernel::close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    return parse_runnable(buf, n);
}

// The affinity mask changes rarely (taskset, a cgroup's cpuset): asked at
// every kAffinityEvery-th sample, not at each.
constexpr unsigned kAffinityEvery = 32;
unsigned g_samples = 0;

void sample(int64_t now) {
    // One sampler at a time; the others use the last answer.
    if (g_sampling.exchange(true, std::memory_order_acquire)) return;
    const int saved = errno;
    const int runnable = read_runnable();
    const int cpus = g_samples++ % kAffinityEvery == 0 || g_cpus.load(std::memory_order_relaxed) <= 0
                         ? affinity_cpus()
                         : g_cpus.load(std::memory_order_relaxed);
    errno = saved;
    g_runnable.store(runnable, std::memory_order_relaxed);
    g_cpus.store(cpus, std::memory_order_relaxed);
    // The count includes the asking thread itself.
    g_busy.store(runnable > 0 && cpus > 0 && runnable > cpus, std::memory_order_relaxed);
    g_next_sample_us.store(now + kSampleUs, std::memory_order_relaxed);
    g_sampling.store(false, std::memory_order_release);
}
}  // namespace

int parse_runnable(const char* text, long len) {
    // "0.52 0.58 0.59 3/812 12345": the fourth field's numerator.
    int field = 0;
    long i = 0;
    while (i < len && field < 3) {
        while (i < len && text[i] != ' ') ++i;
        while (i < len && text[i] == ' ') ++i;
        ++field;
    }
    if (field < 3 || i >= len || text[i] < '0' || text[i] > '9') return -1;
    int v = 0;
    while (i < len && text[i] >= '0' && text[i] <= '9') {
        v = v * 10 + (text[i] - '0');
        if (v > 1000000) return -1;
        ++i;
    }
    return i < len && text[i] == '/' ? v : -1;
}

bool oversubscribed() {
    const int64_t now = wait::now_us();
    if (now >= g_next_sample_us.load(std::memory_order_relaxed)) sample(now);
    return g_busy.load(std::memory_order_relaxed);
}

Sample last_sample() { return {g_runnable.load(std::memory_order_relaxed), g_cpus.load(std::memory_order_relaxed)}; }
uint64_t spins_skipped() { return g_skipped.load(std::memory_order_relaxed); }
void note_spin_skipped() { g_skipped.fetch_add(1, std::memory_order_relaxed); }

}  // namespace rdmasock::cpu_load
