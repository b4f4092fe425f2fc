// The fork fence (sys/fork_fence.hpp): a child never sees one of the shim's fd
// numbers in memory that its fd table lacks, or names another file there.
//
// Without the fence this is the common case, not a corner: the kernel copies
// the fd table before the memory, and other threads run meanwhile. The same
// loop without sections (threads closing a number, making a new fd, storing
// it) gave 299 children of 500 a stale number (2-vCPU VM, 2026-11-30).
#include <catch2/catch.hpp>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "sys/fork_fence.hpp"
#include "sys/own_fd.hpp"
#include "sys/raw_syscall.hpp"

using namespace rdmasock;

namespace {

// A holder as the shim's are: a number and the file's identity, both written
// inside a section, with the close before the new number is stored.
struct Holder {
    std::atomic<int> fd{-1};
    std::atomic<ino_t> ino{0};
};

// Each thread churns its own holders (the shim's are each one connection's, under its lock).
void churn(Holder* holders, int n, unsigned seed, const std::atomic<bool>& stop) {
    while (!stop.load()) {
        Holder& h = holders[(seed = seed * 1103515245 + 12345) % n];
        fork_fence::Section fence;
        if (const int old = h.fd.load(); old >= 0) close_own_fd(old);  // closed first, forgotten after
        // The raw call, as the shim makes its own: ThreadSanitizer then does not
        // track the number (close_own_fd's raw close would look like a race).
        const int fd = adopt_own_fd(static_cast<int>(raw_syscall(SYS_eventfd2, 0, EFD_CLOEXEC)));
        struct stat st{};
        if (fd < 0 || fstat(fd, &st) != 0) {
            h.fd = -1;
            continue;
        }
        h.ino = st.st_ino;
        h.fd = fd;
    }
}

}  // namespace

TEST_CASE("fork_fence: a child's memory and fd table agree on every number threads made or closed during the fork") {
    static std::once_flag once;
    std::call_once(once, [] { pthread_atfork(fork_fence::before_fork, fork_fence::after_fork_parent, fork_fence::after_fork_child); });
    constexpr int kHolders = 48;
    static Holder holders[kHolders];
    std::vector<char> dirty(32 << 20, 1);  // pages to copy: a fork long enough to meet the threads
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < 3; ++i) threads.emplace_back(churn, holders + i * (kHolders / 3), kHolders / 3, i + 1, std::cref(stop));
    int stale = 0, forks = 0;
    for (int i = 0; i < 300; ++i) {
        for (size_t j = 0; j < dirty.size(); j += 4096) dirty[j]++;
        const pid_t c = fork();
        if (c == 0) {
            int bad = 0;
            for (auto& h : holders) {
                const int fd = h.fd.load();
                struct stat st{};
                if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_ino != h.ino.load())) ++bad;
            }
            _exit(bad ? 1 : 0);
        }
        if (c < 0) continue;
        int status = 0;
        REQUIRE(waitpid(c, &status, 0) == c);
        ++forks;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++stale;
    }
    stop = true;
    for (auto& t : threads) t.join();
    for (auto& h : holders)
        if (h.fd >= 0) close_own_fd(h.fd.exchange(-1));
    CHECK(forks > 250);
    // The fence is bounded both ways (fork_fence.hpp): on a machine so loaded
    // that a fork waited 200 ms for a section (ThreadSanitizer beside busy
    // loops and a VM), it went on without it, by design, and a stale number is
    // then possible. What the fence promises holds whenever no bound was reached.
    if (fork_fence::bounds_reached() == 0) CHECK(stale == 0);
    else WARN("a bound was reached " << fork_fence::bounds_reached() << " time(s) (the machine is loaded); stale children: " << stale);
}
