// How much memory a new connection's rings may take.
//
// Ring pages are allocated when the connection upgrades (pinned by
// registration for RDMA, the whole ring) or as a same-host ring's writer
// widens its window (shm_channel.hpp: the first 16 KiB of each ring at the
// upgrade, then doublings), and are charged to the allocating process's
// memory cgroup. Past the cgroup's limit the kernel does not fail that
// allocation: it OOM-kills a process of the group (measured: a memfd
// fallocate loop in a 64 MiB cgroup got SIGKILL, docs/robustness.md). A TCP
// connection costs a few KiB; a program with many connections must not die of
// the shim where TCP serves it. So before creating rings the creator asks
// here (for the whole segment, what its windows may grow to), and each
// window's growth asks again (take_more): the largest
// capacity, halving from the configured size down to kMinRing, that leaves
// the memory it lives under (the tightest of the host and each memory cgroup
// above this process) an eighth of its limit free, and keeps this process's
// rings within its cap. None fits: the connection stays on TCP and says why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rdmasock::memory_budget {

// The smallest ring the budget shrinks to before giving up on the upgrade.
constexpr uint64_t kMinRing = 64 * 1024;

struct MemoryView {
    uint64_t limit = 0;  // the tightest limit: MemTotal, or a memory cgroup's limit
    uint64_t free = 0;   // what is left under it (reclaimable page cache counted as free)
    std::string where;   // which limit that is ("host", "cgroup /a/b")
};

// Reads <root>/proc/meminfo and the memory cgroup (v2, or v1's memory
// controller) of this process and each cgroup above it. `root` is "" outside tests.
MemoryView read_memory_view(const std::string& root = "");

// The ring capacity to create (a power of two from `wanted` down to kMinRing),
// or 0 when even kMinRing does not fit. segment(c) is the memory a connection
// with rings of capacity c takes; own_bytes what this process holds already;
// own_cap the most it may hold.
uint64_t ring_capacity_within(uint64_t wanted, uint64_t (*segment)(uint64_t), uint64_t own_bytes, uint64_t own_cap,
                              const MemoryView& view);

// The cap for own_bytes when RDMASOCK_RING_MEMORY is `auto`: a quarter of the limit.
inline uint64_t auto_cap(const MemoryView& view) { return view.limit / 4; }

// Memory a connection is about to take (between its check and its rings'
// hold()): concurrent connections see each other's reservations, so they
// cannot all pass one check before any has allocated. Dropped at scope end.
class Reservation {
public:
    Reservation() = default;
    ~Reservation();
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    uint64_t bytes() const { return bytes_; }

private:
    friend uint64_t capacity_for_new_rings(uint64_t, uint64_t (*)(uint64_t), uint64_t, std::string&, Reservation*);
    uint64_t bytes_ = 0;
};

// What to create for a new connection now: ring_capacity_within() over this
// process's view and holdings (and the reservations of connections being set
// up), with `cap_setting` (RDMASOCK_RING_MEMORY; UINT64_MAX = auto_cap), and
// within the address-space share below. 0 with `why` when nothing fits. With
// `r`, the segment's bytes stay reserved until `r` goes.
uint64_t capacity_for_new_rings(uint64_t wanted, uint64_t (*segment)(uint64_t), uint64_t cap_setting, std::string& why,
                                Reservation* r = nullptr);

// RLIMIT_AS: the shim's mappings (all of them, with `need` more) stay within a
// quarter of the address space the application has left under its limit, so
// the application's own allocations keep the rest. True when there is no limit.
bool address_space_allows(uint64_t need);
// Ring mappings of this process (created or attached), for the above.
void mapped(int64_t delta);
// The share rule itself (unit-tested): limit, the process's whole mapped size,
// the shim's part of it, reserved-but-not-mapped bytes, the new need.
bool address_space_share_ok(uint64_t limit, uint64_t vm_total, uint64_t shim_mapped, uint64_t pending, uint64_t need);

// RLIMIT_MEMLOCK: an RDMA registration pins its pages, and the kernel counts
// every pin of the process (its pinned_vm: the shim's rings, and the
// program's own registrations, io_uring buffers...) against RLIMIT_MEMLOCK,
// unless the process has CAP_IPC_LOCK. The shim's pins, with `bytes` more,
// stay within half of what the program has left under that limit, so that
// the program's own registrations keep the rest. (Half, not the quarter of
// the address-space rule: most programs pin nothing, and at the kernel's
// default limit of 8 MiB a quarter refused the second connection of
// `pgbench -c 2` as the postgres user in the Soft-RoCE VM.)
//   memlock_allows: the check alone (sizing a ring before anything exists);
//   take_pinned:    checked and counted as one step (concurrent connections
//                   see each other's pins before any registered); false: it
//                   does not fit, nothing taken. release_pinned gives it back.
bool memlock_allows(uint64_t bytes);
// RLIMIT_MEMLOCK as it applies to pins: UINT64_MAX with none or with CAP_IPC_LOCK.
uint64_t memlock_limit();
bool take_pinned(uint64_t bytes);
void release_pinned(uint64_t bytes);
// The share rule itself (unit-tested): the limit, the process's pinned total
// (VmPin), the shim's part of it (taken, registered or about to be), the need.
bool memlock_share_ok(uint64_t limit, uint64_t pinned_total, uint64_t shim_pinned, uint64_t need);
// Why take_pinned refused, for the connection's reason.
constexpr const char* kMemlockShort =
    "not enough locked memory for rings (RLIMIT_MEMLOCK): the shim keeps to half of what the program has left";

// More memory for rings already set up (a writer's window grows,
// shm_channel.hpp): the same rule as a new connection's, checked and taken
// into held_bytes() as one step. False: it does not fit, nothing taken.
bool take_more(uint64_t bytes, uint64_t cap_setting);

// Ring memory this process holds (shared-memory segments it created, RDMA
// rings it registered): counted by their owners.
uint64_t held_bytes();
void hold(uint64_t bytes);
void release(uint64_t bytes);

}  // namespace rdmasock::memory_budget
