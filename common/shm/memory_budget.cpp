#include "shm/memory_budget.hpp"
#include "sys/kernel_calls.hpp"
#include "sys/own_fd.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace rdmasock::memory_budget {

namespace {

constexpr uint64_t kNoLimit = 1ull << 60;  // cgroup v1 says "unlimited" as ~2^63

// The whole of a small kernel file (meminfo, memory.stat), or "" if unreadable.
std::string slurp(const std::string& path) {
    int fd = kernel::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string out;
    char buf[8192];
    for (;;) {
        ssize_t n = kernel::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    close_own_fd(fd);
    return out;
}

// The number after `key` at the start of a line ("MemTotal:", "inactive_file ").
bool field(std::string_view text, std::string_view key, uint64_t& out) {
    for (size_t at = 0; at < text.size();) {
        size_t eol = text.find('\n', at);
        std::string_view line = text.substr(at, eol == std::string_view::npos ? std::string_view::npos : eol - at);
        if (line.substr(0, key.size()) == key) {
            std::string num(line.substr(key.size()));
            char* end = nullptr;
            unsigned long long v = std::strtoull(num.c_str(), &end, 10);
            if (end == num.c_str()) return false;
            out = v;
            return true;
        }
        if (eol == std::string_view::npos) break;
        at = eol + 1;
    }
    return false;
}

// A file holding one number ("max" for none): false if absent or unlimited.
bool number_file(const std::string& path, uint64_t& out) {
    std::string s = slurp(path);
    if (s.empty() || s.compare(0, 3, "max") == 0) return false;
    char* end = nullptr;
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (end == s.c_str() || v >= kNoLimit) return false;
    out = v;
    return true;
}

// Keeps whichever view has less room left above its reserve (an eighth of its limit).
void tighter(MemoryView& best, uint64_t limit, uint64_t used, const std::string& where) {
    const uint64_t free = used < limit ? limit - used : 0;
    auto slack = [](uint64_t f, uint64_t l) { return static_cast<int64_t>(f) - static_cast<int64_t>(l / 8); };
    if (best.limit == 0 || slack(free, limit) < slack(best.free, best.limit)) best = {limit, free, where};
}

// One cgroup directory and each one above it (a cgroup namespace's root
// included: there the files are the container's own).
template <class F>
void each_level(const std::string& base, std::string path, F&& look) {
    for (;;) {
        look(base + (path == "/" ? "" : path), path);
        if (path == "/" || path.empty()) return;
        size_t slash = path.rfind('/');
        path = slash == 0 ? "/" : path.substr(0, slash);
    }
}

// The memory controller's path in /proc/self/cgroup: v1's "N:...memory...:/p",
// else v2's "0::/p". `v1` says which.
bool cgroup_path(const std::string& text, std::string& path, bool& v1) {
    std::string v2_path;
    bool have_v2 = false;
    for (size_t at = 0; at < text.size();) {
        size_t eol = text.find('\n', at);
        std::string line = text.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
        at = eol == std::string::npos ? text.size() : eol + 1;
        size_t c1 = line.find(':'), c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
        if (c2 == std::string::npos) continue;
        std::string ctl = "," + line.substr(c1 + 1, c2 - c1 - 1) + ",";
        if (ctl.find(",memory,") != std::string::npos) {
            path = line.substr(c2 + 1);
            v1 = true;
            return true;
        }
        if (line.compare(0, c2 + 1, "0::") == 0) v2_path = line.substr(c2 + 1), have_v2 = true;
    }
    if (!have_v2) return false;
    path = v2_path;
    v1 = false;
    return true;
}

std::atomic<uint64_t> g_held{0};
std::atomic<uint64_t> g_pending{0};  // Reservation bytes
std::atomic<uint64_t> g_mapped{0};   // ring mappings of this process

// This process's mapped size (/proc/self/statm's first field), 0 if unknown.
uint64_t vm_total() {
    const std::string s = slurp("/proc/self/statm");
    char* end = nullptr;
    const unsigned long long pages = std::strtoull(s.c_str(), &end, 10);
    if (end == s.c_str()) return 0;
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t as_limit() {
    rlimit rl{};
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
    return static_cast<uint64_t>(rl.rlim_cur);
}

bool as_allows_with(uint64_t pending, uint64_t need) {
    const uint64_t limit = as_limit();
    if (limit == UINT64_MAX) return true;
    return address_space_share_ok(limit, vm_total(), g_mapped.load(std::memory_order_relaxed), pending, need);
}

std::atomic<uint64_t> g_pinned{0};  // RDMA pins of this process, taken before they register

}  // namespace

// The kernel skips the check with CAP_IPC_LOCK.
uint64_t memlock_limit() {
    rlimit rl{};
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3]{};
    if (syscall(SYS_capget, &h, d) == 0 && (d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)))
        return UINT64_MAX;
    return static_cast<uint64_t>(rl.rlim_cur);
}

namespace {

// This process's pinned total (/proc/self/status VmPin), 0 if unknown.
uint64_t pinned_total() {
    uint64_t kb = 0;
    return field(slurp("/proc/self/status"), "VmPin:", kb) ? kb * 1024 : 0;
}

}  // namespace

MemoryView read_memory_view(const std::string& root) {
    MemoryView best;
    const std::string meminfo = slurp(root + "/proc/meminfo");
    uint64_t total_kb = 0, avail_kb = 0;
    if (field(meminfo, "MemTotal:", total_kb) && (field(meminfo, "MemAvailable:", avail_kb) || field(meminfo, "MemFree:", avail_kb)))
        tighter(best, total_kb * 1024, (total_kb - std::min(avail_kb, total_kb)) * 1024, "host");
    std::string path;
    bool v1 = false;
    if (cgroup_path(slurp(root + "/proc/self/cgroup"), path, v1) && !path.empty() && path[0] == '/') {
        const std::string base = root + (v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup");
        each_level(base, path, [&](const std::string& dir, const std::string& name) {
            uint64_t limit = 0, usage = 0, inactive = 0;
            if (!number_file(dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max"), limit)) return;
            if (!number_file(dir + (v1 ? "/memory.usage_in_bytes" : "/memory.current"), usage)) return;
            // Page cache the kernel would reclaim before it kills anyone.
            field(slurp(dir + "/memory.stat"), v1 ? "total_inactive_file " : "inactive_file ", inactive);
            tighter(best, limit, usage - std::min(inactive, usage), "cgroup " + name);
        });
    }
    return best;
}

uint64_t ring_capacity_within(uint64_t wanted, uint64_t (*segment)(uint64_t), uint64_t own_bytes, uint64_t own_cap,
                              const MemoryView& view) {
    const uint64_t reserve = view.limit / 8;
    for (uint64_t cap = wanted; cap >= kMinRing || cap == wanted; cap /= 2) {
        const uint64_t need = segment(cap);
        const bool own_ok = own_bytes <= own_cap && need <= own_cap - own_bytes;
        // No view (no /proc): nothing known to protect, only the cap applies.
        const bool host_ok = view.limit == 0 || (need <= view.free && view.free - need >= reserve);
        if (own_ok && host_ok) return cap;
        if (cap <= kMinRing) break;
    }
    return 0;
}

// Reading the view costs ~65 us (meminfo, memory.stat): a burst of connections
// shares one read per kViewTtl, less what this process took since.
MemoryView current_view(uint64_t held) {
    static std::mutex mu;
    static MemoryView cached;
    static uint64_t held_then = 0;
    static std::chrono::steady_clock::time_point taken{};
    constexpr auto kViewTtl = std::chrono::milliseconds(100);
    // Never waits: another thread is refreshing it, or a fork left it taken in a child.
    std::unique_lock<std::mutex> lk(mu, std::try_to_lock);
    if (!lk.owns_lock()) return read_memory_view();
    const auto now = std::chrono::steady_clock::now();
    if (taken == std::chrono::steady_clock::time_point{} || now - taken >= kViewTtl || now < taken) {
        cached = read_memory_view();
        held_then = held;
        taken = now;
    }
    MemoryView v = cached;
    const uint64_t taken_since = held > held_then ? held - held_then : 0;
    v.free = v.free > taken_since ? v.free - taken_since : 0;
    return v;
}

// The most this process may hold: RDMASOCK_RING_MEMORY, or auto_cap() of the view.
static uint64_t own_cap_for(uint64_t cap_setting, const MemoryView& view) {
    return cap_setting == UINT64_MAX ? (view.limit ? auto_cap(view) : UINT64_MAX) : cap_setting;
}

Reservation::~Reservation() {
    if (bytes_) g_pending.fetch_sub(bytes_, std::memory_order_relaxed);
}

bool address_space_share_ok(uint64_t limit, uint64_t vm, uint64_t shim_mapped, uint64_t pending, uint64_t need) {
    const uint64_t app = vm > shim_mapped ? vm - shim_mapped : 0;
    const uint64_t room = limit > app ? limit - app : 0;
    return shim_mapped + pending + need <= room / 4;
}

bool address_space_allows(uint64_t need) { return as_allows_with(g_pending.load(std::memory_order_relaxed), need); }
void mapped(int64_t delta) { g_mapped.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed); }

uint64_t capacity_for_new_rings(uint64_t wanted, uint64_t (*segment)(uint64_t), uint64_t cap_setting, std::string& why,
                                Reservation* r) {
    uint64_t cap = 0, held = 0, pending = 0;
    MemoryView view;
    uint64_t own_cap = 0;
    bool as_short = false;
    // Check and reserve as one step: a reservation made meanwhile by another
    // connection makes this one look again (compare-and-swap on the total).
    for (;;) {
        pending = g_pending.load(std::memory_order_acquire);
        held = held_bytes() + pending;
        view = current_view(held);
        own_cap = own_cap_for(cap_setting, view);
        cap = ring_capacity_within(wanted, segment, held, own_cap, view);
        as_short = false;
        while (cap && !as_allows_with(pending, segment(cap))) {
            as_short = true;
            cap = cap > kMinRing ? cap / 2 : 0;
        }
        if (!r || cap == 0) break;
        if (g_pending.compare_exchange_weak(pending, pending + segment(cap), std::memory_order_acq_rel)) {
            r->bytes_ += segment(cap);
            break;
        }
    }
    if (cap == 0 && as_short) {
        why = "not enough address space for rings (RLIMIT_AS): the shim keeps to a quarter of what the program has left";
    } else if (cap == 0) {
        auto mib = [](uint64_t b) { return b < (4u << 20) ? std::to_string(b >> 10) + " KiB" : std::to_string(b >> 20) + " MiB"; };
        why = "not enough memory for rings: " + mib(segment(std::min(wanted, kMinRing))) + " wanted, " + mib(view.free) +
              " free of " + mib(view.limit) + " (" + (view.where.empty() ? "unknown" : view.where) + "), this process holds " +
              mib(held) + " of its " + (own_cap == UINT64_MAX ? std::string("unlimited") : mib(own_cap)) + " (RDMASOCK_RING_MEMORY)";
    }
    return cap;
}

bool take_more(uint64_t bytes, uint64_t cap_setting) {
    for (;;) {
        uint64_t held = g_held.load(std::memory_order_acquire);
        const uint64_t counted = held + g_pending.load(std::memory_order_acquire);
        const MemoryView view = current_view(counted);
        const uint64_t own_cap = own_cap_for(cap_setting, view);
        if (ring_capacity_within(bytes, [](uint64_t b) { return b; }, counted, own_cap, view) != bytes) return false;
        if (g_held.compare_exchange_weak(held, held + bytes, std::memory_order_acq_rel)) return true;
    }
}

bool memlock_share_ok(uint64_t limit, uint64_t pinned, uint64_t shim_pinned, uint64_t need) {
    const uint64_t app = pinned > shim_pinned ? pinned - shim_pinned : 0;
    const uint64_t room = limit > app ? limit - app : 0;
    return shim_pinned <= room / 2 && need <= room / 2 - shim_pinned;
}

bool memlock_allows(uint64_t bytes) {
    const uint64_t limit = memlock_limit();
    return limit == UINT64_MAX || memlock_share_ok(limit, pinned_total(), g_pinned.load(std::memory_order_relaxed), bytes);
}

bool take_pinned(uint64_t bytes) {
    const uint64_t limit = memlock_limit();
    if (limit == UINT64_MAX) {
        g_pinned.fetch_add(bytes, std::memory_order_relaxed);
        return true;
    }
    const uint64_t total = pinned_total();
    for (uint64_t mine = g_pinned.load(std::memory_order_acquire);;) {
        if (!memlock_share_ok(limit, total, mine, bytes)) return false;
        if (g_pinned.compare_exchange_weak(mine, mine + bytes, std::memory_order_acq_rel)) return true;
    }
}

void release_pinned(uint64_t bytes) { g_pinned.fetch_sub(bytes, std::memory_order_relaxed); }

uint64_t held_bytes() { return g_held.load(std::memory_order_relaxed); }
void hold(uint64_t bytes) { g_held.fetch_add(bytes, std::memory_order_relaxed); }
void release(uint64_t bytes) { g_held.fetch_sub(bytes, std::memory_order_relaxed); }

}  // namespace rdmasock::memory_budget
