// The stat page: each shimmed process publishes its live connections in a
// memfd it alone writes ("rdmasock-stat"); `rdmasock stat` finds it through
// /proc/PID/fd and reads it. One header page, then a fixed table of slots.
// Byte counters are relaxed atomic adds; everything else in a slot changes
// under a per-slot seqlock so a reader never sees a torn record.
// Format and rules: docs/stat.md.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace rdmasock::stat {

inline constexpr uint64_t kMagic = 0x3154415453534452ull;  // "RDSSTAT1" little-endian
inline constexpr uint32_t kVersion = 1;
inline constexpr const char* kMemfdName = "rdmasock-stat";
inline constexpr size_t kHeaderBytes = 4096;
inline constexpr uint32_t kDefaultSlots = 4096;

enum class Role : uint8_t { client = 0, server = 1 };

struct PageHeader {
    uint64_t magic;
    uint32_t version;
    uint32_t header_bytes;
    uint32_t slot_bytes;
    uint32_t slot_count;
    std::atomic<int32_t> pid;          // the process that writes this page
    std::atomic<uint32_t> high_water;  // slots [0, high_water) were ever used: readers stop there
    std::atomic<uint64_t> dropped;     // connections not listed because every slot was taken
};

// Text fields are NUL-padded; a reader must still bound them (the page may be hostile).
struct Slot {
    std::atomic<uint32_t> seq;  // odd while the fields below (except the counters) change
    std::atomic<uint8_t> in_use;
    std::atomic<uint8_t> role;
    std::atomic<uint8_t> phase_code;  // the writer's cheap "did the phase change" compare
    uint8_t reserved0;
    std::atomic<int32_t> fd;
    uint32_t reserved1;
    std::atomic<uint64_t> tx_bytes, rx_bytes;  // every byte the app moved, whatever the transport
    char transport[16];
    char phase[16];
    char local[64];
    char remote[64];
    char reason[64];
};
static_assert(sizeof(Slot) == 256);
static_assert(sizeof(PageHeader) <= kHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

// What the writer puts in a slot's metadata.
struct SlotInfo {
    int fd = -1;
    Role role = Role::client;
    uint8_t phase_code = 0;
    const char* transport = "";
    const char* phase = "";
    std::string local, remote, reason;
};

// "1.2.3.4:80" / "[::1]:80"; "" for anything else.
std::string format_address(const sockaddr* a, socklen_t len);

// The writer: this process's page. Slot metadata changes are serialised by one
// mutex (they happen at connect, accept, close and phase changes only).
class StatPage {
public:
    // Creates and maps the memfd; null when the kernel refuses (the caller runs without stats).
    static std::unique_ptr<StatPage> create(uint32_t slots = kDefaultSlots);
    ~StatPage();
    StatPage(const StatPage&) = delete;
    StatPage& operator=(const StatPage&) = delete;

    // A free slot filled with `info`, or null when all are taken (counted in `dropped`).
    Slot* acquire(const SlotInfo& info);
    // Everything but the addresses, which do not change after connect/accept.
    void update(Slot* s, const SlotInfo& info);
    void release(Slot* s);
    static void add_bytes(Slot* s, bool tx, uint64_t n) {
        (tx ? s->tx_bytes : s->rx_bytes).fetch_add(n, std::memory_order_relaxed);
    }

    // fork: hold the metadata lock across it (prepare/parent); in the child, move
    // the page onto a fresh memfd at the same address so parent and child stop
    // sharing it. False when the child could get no memfd (it then writes a
    // private copy nobody can see).
    void prepare_fork();
    void after_fork_parent();
    bool after_fork_child();

    int fd() const { return fd_; }
    const void* data() const { return base_; }
    size_t size() const { return size_; }
    const PageHeader& header() const { return *reinterpret_cast<const PageHeader*>(base_); }

private:
    StatPage(void* base, size_t size, uint32_t slots, int fd);
    Slot* slot(uint32_t i) const;
    void write(Slot* s, const SlotInfo* info, bool addresses);  // null info: clear and free
    bool is_our_fd(int fd) const;

    void* base_;
    size_t size_;
    uint32_t slots_;
    int fd_;
    uint64_t dev_ = 0, ino_ = 0;  // to tell, after fork, whether fd_ is still our memfd
    std::mutex mu_;
    std::vector<uint32_t> free_;  // released slots below high_water
    // The page as it was at fork: the parent goes on changing the shared page
    // while the child moves to its own, so the child copies from this.
    void* fork_copy_ = nullptr;
    size_t fork_copy_bytes_ = 0;
    size_t used_bytes() const;
};

// The reader side: one consistent record per live slot.
struct SlotView {
    uint32_t index = 0;
    int fd = -1;
    Role role = Role::client;
    std::string transport, phase, local, remote, reason;
    uint64_t tx_bytes = 0, rx_bytes = 0;
};

struct PageView {
    int pid = 0;
    uint32_t slot_count = 0;
    uint64_t dropped = 0;
    uint32_t unstable = 0;  // slots skipped because a writer kept changing them
    std::vector<SlotView> slots;
};

// Reads a mapped page of `len` bytes (possibly hostile or half-written): false
// with `error` set when it is not a valid page. Never reads outside [data, data+len).
bool read_page(const void* data, size_t len, PageView& out, std::string& error);

}  // namespace rdmasock::stat
