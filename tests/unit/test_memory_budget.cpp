// The memory budget for new rings (common/memory_budget.*): the decision, and
// reading the host's and the memory cgroup's limits from fake /proc and /sys trees.
#include <catch2/catch.hpp>

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "shm/memory_budget.hpp"

using namespace rdmasock::memory_budget;

namespace {

uint64_t two_rings(uint64_t c) { return 2 * c; }

constexpr uint64_t MiB = 1 << 20;

// A scratch tree standing in for "/": files written under it on demand.
struct FakeRoot {
    std::string dir;
    FakeRoot() {
        char tmpl[] = "/tmp/rdmasock-budget-XXXXXX";
        dir = mkdtemp(tmpl);
    }
    ~FakeRoot() { (void)!std::system(("rm -rf " + dir).c_str()); }
    void put(const std::string& path, const std::string& text) {
        (void)!std::system(("mkdir -p $(dirname " + dir + path + ")").c_str());
        std::ofstream(dir + path) << text;
    }
    void meminfo(uint64_t total_kb, uint64_t avail_kb) {
        put("/proc/meminfo", "MemTotal:       " + std::to_string(total_kb) + " kB\nMemFree:          1000 kB\nMemAvailable:   " +
                                 std::to_string(avail_kb) + " kB\nBuffers:  10 kB\n");
    }
};

}  // namespace

TEST_CASE("the budget gives the configured ring while memory is plentiful") {
    MemoryView v{1024 * MiB, 900 * MiB, "host"};
    CHECK(ring_capacity_within(1 * MiB, two_rings, 0, auto_cap(v), v) == 1 * MiB);
}

TEST_CASE("the budget halves the ring as the process's cap fills, then says none") {
    MemoryView v{1024 * MiB, 900 * MiB, "host"};
    const uint64_t cap = 4 * MiB;
    CHECK(ring_capacity_within(1 * MiB, two_rings, 0, cap, v) == 1 * MiB);
    CHECK(ring_capacity_within(1 * MiB, two_rings, 2 * MiB + 1, cap, v) == 512 * 1024);
    CHECK(ring_capacity_within(1 * MiB, two_rings, cap - 2 * kMinRing, cap, v) == kMinRing);
    CHECK(ring_capacity_within(1 * MiB, two_rings, cap - 2 * kMinRing + 1, cap, v) == 0);
    CHECK(ring_capacity_within(1 * MiB, two_rings, cap + 1, cap, v) == 0);  // over already
    CHECK(ring_capacity_within(1 * MiB, two_rings, 0, 0, v) == 0);          // RDMASOCK_RING_MEMORY=0
}

TEST_CASE("the budget keeps an eighth of the limit free") {
    // 64 MiB limit: 8 MiB reserve. 10 MiB free: a 2 MiB pair fits, leaving 8.
    MemoryView v{64 * MiB, 10 * MiB, "cgroup /pod"};
    CHECK(ring_capacity_within(1 * MiB, two_rings, 0, UINT64_MAX, v) == 1 * MiB);
    v.free = 10 * MiB - 1;
    CHECK(ring_capacity_within(1 * MiB, two_rings, 0, UINT64_MAX, v) == 512 * 1024);
    v.free = 8 * MiB + 2 * kMinRing - 1;
    CHECK(ring_capacity_within(1 * MiB, two_rings, 0, UINT64_MAX, v) == 0);
    v.free = 0;
    CHECK(ring_capacity_within(1 * MiB, two_rings, 0, UINT64_MAX, v) == 0);
}

TEST_CASE("a configured ring below the smallest step is tried as it is") {
    MemoryView v{1024 * MiB, 900 * MiB, "host"};
    CHECK(ring_capacity_within(4096, two_rings, 0, UINT64_MAX, v) == 4096);
    CHECK(ring_capacity_within(4096, two_rings, 0, 8191, v) == 0);
}

TEST_CASE("without any view of memory only the cap applies") {
    MemoryView none;
    CHECK(ring_capacity_within(1 * MiB, two_rings, 0, UINT64_MAX, none) == 1 * MiB);
    CHECK(ring_capacity_within(1 * MiB, two_rings, 0, 1 * MiB, none) == 512 * 1024);
}

TEST_CASE("the host's view comes from MemTotal and MemAvailable") {
    FakeRoot r;
    r.meminfo(4 * 1024 * 1024, 3 * 1024 * 1024);  // 4 GiB, 3 available
    MemoryView v = read_memory_view(r.dir);
    CHECK(v.limit == 4096 * MiB);
    CHECK(v.free == 3072 * MiB);
    CHECK(v.where == "host");
}

TEST_CASE("a cgroup v2 limit above the process is the tighter view, page cache counted free") {
    FakeRoot r;
    r.meminfo(4 * 1024 * 1024, 3 * 1024 * 1024);
    r.put("/proc/self/cgroup", "0::/pods/db\n");
    r.put("/sys/fs/cgroup/pods/db/memory.max", "max\n");  // no limit of its own
    r.put("/sys/fs/cgroup/pods/db/memory.current", "50000000\n");
    r.put("/sys/fs/cgroup/pods/memory.max", std::to_string(256 * MiB) + "\n");
    r.put("/sys/fs/cgroup/pods/memory.current", std::to_string(200 * MiB) + "\n");
    r.put("/sys/fs/cgroup/pods/memory.stat", "anon 1000\nfile 5000\ninactive_anon 3\ninactive_file " +
                                                 std::to_string(40 * MiB) + "\nactive_file 7\n");
    MemoryView v = read_memory_view(r.dir);
    CHECK(v.limit == 256 * MiB);
    CHECK(v.free == 96 * MiB);  // 256 - (200 - 40 reclaimable)
    CHECK(v.where == "cgroup /pods");
}

TEST_CASE("a cgroup v1 memory controller is read, and its unlimited value ignored") {
    FakeRoot r;
    r.meminfo(4 * 1024 * 1024, 3 * 1024 * 1024);
    r.put("/proc/self/cgroup", "5:cpu,cpuacct:/\n4:memory:/box\n0::/\n");
    r.put("/sys/fs/cgroup/memory/box/memory.limit_in_bytes", std::to_string(64 * MiB) + "\n");
    r.put("/sys/fs/cgroup/memory/box/memory.usage_in_bytes", std::to_string(60 * MiB) + "\n");
    r.put("/sys/fs/cgroup/memory/box/memory.stat", "cache 0\ninactive_file 999\ntotal_inactive_file " +
                                                       std::to_string(4 * MiB) + "\n");
    r.put("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    r.put("/sys/fs/cgroup/memory/memory.usage_in_bytes", "123\n");
    MemoryView v = read_memory_view(r.dir);
    CHECK(v.limit == 64 * MiB);
    CHECK(v.free == 8 * MiB);
    CHECK(v.where == "cgroup /box");
}

TEST_CASE("unreadable or odd files leave the view it could read") {
    FakeRoot r;
    r.meminfo(1024 * 1024, 512 * 1024);
    r.put("/proc/self/cgroup", "garbage\n0::relative/path\n");
    MemoryView v = read_memory_view(r.dir);
    CHECK(v.where == "host");
    FakeRoot empty;
    CHECK(read_memory_view(empty.dir).limit == 0);
}

TEST_CASE("this process's holdings count up and down") {
    const uint64_t before = held_bytes();
    hold(3 * MiB);
    CHECK(held_bytes() == before + 3 * MiB);
    release(3 * MiB);
    CHECK(held_bytes() == before);
}

TEST_CASE("the shim's mappings keep to a quarter of the address space the program has left") {
    // 200 MiB limit, the program itself maps 40 MiB: 160 MiB left, the shim may map 40.
    CHECK(address_space_share_ok(200 * MiB, 40 * MiB, 0, 0, 40 * MiB));
    CHECK_FALSE(address_space_share_ok(200 * MiB, 40 * MiB, 0, 0, 41 * MiB));
    // What the shim mapped already is not the program's: it counts against the share.
    CHECK(address_space_share_ok(200 * MiB, 70 * MiB, 30 * MiB, 0, 10 * MiB));
    CHECK_FALSE(address_space_share_ok(200 * MiB, 70 * MiB, 30 * MiB, 0, 11 * MiB));
    // Reserved by connections being set up: counted too.
    CHECK_FALSE(address_space_share_ok(200 * MiB, 70 * MiB, 30 * MiB, 5 * MiB, 6 * MiB));
    // A program already past its limit leaves nothing.
    CHECK_FALSE(address_space_share_ok(100 * MiB, 120 * MiB, 0, 0, 1));
}

TEST_CASE("the shim's pins keep to half of the locked memory the program has left") {
    // 64 MiB RLIMIT_MEMLOCK, the program pinned 24 MiB itself: 40 left, the shim may pin 20.
    CHECK(memlock_share_ok(64 * MiB, 24 * MiB, 0, 20 * MiB));
    CHECK_FALSE(memlock_share_ok(64 * MiB, 24 * MiB, 0, 20 * MiB + 1));
    // The shim's own pins are in the total but not the program's: they count against the share.
    CHECK(memlock_share_ok(64 * MiB, 30 * MiB, 6 * MiB, 14 * MiB));
    CHECK_FALSE(memlock_share_ok(64 * MiB, 30 * MiB, 6 * MiB, 14 * MiB + 1));
    // Taken but not registered yet (not in the total): the program looks that much smaller
    // (16 of 24 MiB: 48 left, a share of 24), but the shim's 8 still count against the share.
    CHECK(memlock_share_ok(64 * MiB, 24 * MiB, 8 * MiB, 16 * MiB));
    CHECK_FALSE(memlock_share_ok(64 * MiB, 24 * MiB, 8 * MiB, 16 * MiB + 1));
    // A program at its limit leaves nothing; a share already overdrawn stays refused.
    CHECK_FALSE(memlock_share_ok(8 * MiB, 8 * MiB, 0, 1));
    CHECK_FALSE(memlock_share_ok(8 * MiB, 5 * MiB, 5 * MiB, 1));
}

TEST_CASE("pins are checked and taken as one step under a real RLIMIT_MEMLOCK") {
    // In a child: the limit lowered to 1 MiB and CAP_IPC_LOCK dropped (with it the kernel, and
    // so the rule, would ignore the limit). 1 MiB left, nothing pinned: the shim may take 512 KiB.
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        rlimit rl{1 * MiB, 1 * MiB};
        if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) _exit(10);
        __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3]{};
        if (syscall(SYS_capget, &h, d) != 0) _exit(11);
        d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
        if (syscall(SYS_capset, &h, d) != 0) _exit(12);
        if (memlock_limit() != 1 * MiB) _exit(13);
        if (!memlock_allows(512 * 1024) || memlock_allows(512 * 1024 + 1)) _exit(1);
        if (!take_pinned(400 * 1024)) _exit(2);
        if (take_pinned(113 * 1024)) _exit(3);  // 513 KiB in all: over the half, nothing taken
        if (!take_pinned(112 * 1024)) _exit(4);  // exactly the half
        if (memlock_allows(1)) _exit(5);
        release_pinned(512 * 1024);
        if (!memlock_allows(512 * 1024)) _exit(6);
        _exit(0);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("a reservation is seen by the next check and given back at scope end") {
    std::string why;
    // The process's own cap (RDMASOCK_RING_MEMORY) of 3 MiB: one 1 MiB ring pair reserved leaves 1 MiB.
    const uint64_t cap = held_bytes() + 3 * MiB;
    {
        Reservation r;
        CHECK(capacity_for_new_rings(1 * MiB, two_rings, cap, why, &r) == 1 * MiB);
        CHECK(r.bytes() == 2 * MiB);
        // Not held yet, but reserved: the next connection gets a smaller ring.
        CHECK(capacity_for_new_rings(1 * MiB, two_rings, cap, why) == 512 * 1024);
    }
    CHECK(capacity_for_new_rings(1 * MiB, two_rings, cap, why) == 1 * MiB);
}
