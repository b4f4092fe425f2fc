#include "shm/leftover.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "ring/downgrade.hpp"
#include "shm/memfd_segment.hpp"
#include "shm/peer_check.hpp"
#include "base/log.hpp"
#include "sys/iov_check.hpp"
#include "sys/process_id.hpp"
#include "sys/kernel_calls.hpp"
#include "sys/raw_syscall.hpp"

namespace rdmasock::leftover {

namespace {

constexpr uint64_t kMagic = 0x52444d534c45464full;  // "RDMSLEFO"
constexpr const char* kName = "rdmasock-leftover";

// At the start of the memfd; the bytes follow. Shared by every process that
// maps it (a forked child, an SCM_RIGHTS receiver, an exec'd image).
struct Header {
    uint64_t magic;
    uint64_t inode;   // the socket these bytes belong to
    uint64_t length;  // bytes after the header
    std::atomic<uint64_t> consumed;
    std::atomic<int32_t> lock;      // a pid (downgrade::lock: a dead holder is taken over)
    std::atomic<int32_t> owed_err;  // the kernel's reset, reported after the bytes
    uint32_t order;                  // Order
    std::atomic<uint32_t> fin;       // Order::before_kernel: 1 the writer's end follows, 2 it was reported
    uint8_t pad[16];
};
static_assert(sizeof(Header) == 64);

// The header's words that never change after `keep` are read once, when the
// memfd is made or adopted, and kept here: a process that passed it may still
// map it and write them (the mutable words, consumed, lock, fin and owed_err,
// are checked at each use).
struct Entry {
    uint64_t inode;
    int fd;  // close-on-exec, except while an exec passes it
    Header* h;
    size_t size;
    uint64_t length;  // bytes after the header, within `size`
    bool first;       // Order::before_kernel
};

// A kept memfd holds at most one ring's bytes (RDMASOCK_RING_SIZE is at most 1G).
constexpr uint64_t kMaxKept = 1ull << 30;

std::mutex g_mu;
std::vector<Entry>* g_entries;  // never freed: a process keeps few
std::atomic<bool> g_any{false};
std::atomic<bool> g_any_first{false};  // some entry's bytes go before the kernel's

Entry* find_locked(uint64_t inode) {
    if (!g_entries) return nullptr;
    for (auto& e : *g_entries)
        if (e.inode == inode) return &e;
    return nullptr;
}

bool unread(const Entry& e) { return e.h->consumed.load(std::memory_order_acquire) < e.length; }
// Bytes, or the writer's end, still to be served before the kernel's.
bool first_owed(const Entry& e) { return e.first && (unread(e) || e.h->fin.load(std::memory_order_acquire) == 1); }

// Anything left for a reader: bytes, or (before_kernel) the writer's end.
bool owed(const Entry& e) { return unread(e) || first_owed(e); }

// The reset a receive reports after the bytes: one the kernel reports, or none.
int owed_error(int v) { return v == ECONNRESET || v == EPIPE || v == ETIMEDOUT ? v : 0; }

// Whether a receive must look here before the kernel: kept true while any
// entry owes something first, so plain receives stop paying for the look.
void refresh_first_locked() {
    bool owed = false;
    if (g_entries)
        for (auto& e : *g_entries) owed = owed || first_owed(e);
    g_any_first.store(owed, std::memory_order_release);
}

// Copies kept bytes from `at` into `iov` (the caller holds h->lock); moves
// the consumed count past them unless MSG_PEEK. Returns how many.
size_t serve(const Entry& e, uint64_t at, const iovec* iov, int cnt, int flags) {
    Header* h = e.h;
    const uint64_t len = e.length;
    const uint8_t* src = reinterpret_cast<const uint8_t*>(h + 1) + at;
    size_t n = 0;
    for (int i = 0; i < cnt && at + n < len; ++i) {
        const size_t k = std::min<size_t>(iov[i].iov_len, len - at - n);
        std::memcpy(iov[i].iov_base, src + n, k);
        n += k;
    }
    if (!(flags & MSG_PEEK)) h->consumed.store(at + n, std::memory_order_release);
    return n;
}

void add_locked(const Entry& e) {
    if (!g_entries) g_entries = new std::vector<Entry>;
    if (Entry* old = find_locked(e.inode)) {  // a newer connection on a reused inode
        munmap(old->h, old->size);
        raw_syscall(SYS_close, old->fd);
        *old = e;
    } else {
        g_entries->push_back(e);
    }
    g_any.store(true, std::memory_order_release);
    refresh_first_locked();
}

Header* map_fd(int fd, size_t size) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? nullptr : static_cast<Header*>(p);
}

}  // namespace

bool any() { return g_any.load(std::memory_order_relaxed); }
bool any_first() { return g_any_first.load(std::memory_order_relaxed); }

uint64_t inode_of(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
    return st.st_ino;
}

bool keep(uint64_t inode, const void* data, size_t len, Order order, bool fin) {
    const size_t size = sizeof(Header) + len;
    int fd = memfd_create(kName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return false;
    Header* h = nullptr;
    if (posix_fallocate(fd, 0, static_cast<off_t>(size)) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 || !(h = map_fd(fd, size))) {
        if (h) munmap(h, size);
        raw_syscall(SYS_close, fd);
        return false;
    }
    h->magic = kMagic;
    h->inode = inode;
    h->length = len;
    h->consumed.store(0);
    h->lock.store(0);
    h->owed_err.store(0);
    h->order = static_cast<uint32_t>(order);
    h->fin.store(order == Order::before_kernel && fin ? 1 : 0);
    std::memcpy(reinterpret_cast<uint8_t*>(h + 1), data, len);
    std::lock_guard<std::mutex> lk(g_mu);
    add_locked(Entry{inode, fd, h, size, len, order == Order::before_kernel});
    return true;
}

bool pending(uint64_t inode) {
    if (!any()) return false;
    std::lock_guard<std::mutex> lk(g_mu);
    Entry* e = find_locked(inode);
    return e && owed(*e);
}

ssize_t after_kernel(uint64_t inode, const iovec* iov, int cnt, int flags, ssize_t r, int err) {
    auto kernels = [&] {
        errno = err;
        return r;
    };
    if (r > 0 || inode == 0 || !any()) return kernels();
    if (r < 0 && err != ECONNRESET && err != EPIPE && err != ETIMEDOUT) return kernels();
    Entry e;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        const Entry* found = find_locked(inode);
        if (!found || found->first) return kernels();  // (before_kernel's)
        e = *found;
    }
    Header* h = e.h;
    if (!downgrade::lock(h->lock, current_pid())) return kernels();
    const uint64_t len = e.length, at = std::min(h->consumed.load(std::memory_order_acquire), len);
    if (at == len) {
        const int owed = owed_error((flags & MSG_PEEK) ? h->owed_err.load() : h->owed_err.exchange(0));
        downgrade::unlock(h->lock);
        if (r < 0 || !owed) return kernels();
        errno = owed;  // the peer's reset, after its last bytes (as TCP reports it)
        return -1;
    }
    if (r < 0) h->owed_err.store(err);
    const size_t n = serve(e, at, iov, cnt, flags);
    downgrade::unlock(h->lock);
    return static_cast<ssize_t>(n);
}

bool before_kernel(uint64_t inode, const iovec* iov, int cnt, int flags, ssize_t& out) {
    if (!any_first() || inode == 0) return false;
    Entry e;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        const Entry* found = find_locked(inode);
        if (!found || !first_owed(*found)) return false;
        e = *found;
    }
    Header* h = e.h;
    if (!downgrade::lock(h->lock, current_pid())) return false;
    const uint64_t len = e.length, at = std::min(h->consumed.load(std::memory_order_acquire), len);
    bool served = true;
    if (at < len) {
        out = static_cast<ssize_t>(serve(e, at, iov, cnt, flags));
    } else if (h->fin.load(std::memory_order_acquire) == 1) {
        // The writer's end, once (a writer stopped before its shim could end
        // the kernel's stream: it does when it runs again; the kernel says so then).
        if (!(flags & MSG_PEEK)) h->fin.store(2, std::memory_order_release);
        out = 0;
    } else {
        served = false;  // another process took the last of them meanwhile
    }
    downgrade::unlock(h->lock);
    if (served && !first_owed(e)) {
        std::lock_guard<std::mutex> lk(g_mu);
        refresh_first_locked();
    }
    return served;
}

bool receive_first(int fd, uint64_t inode, const iovec* iov, size_t cnt, int flags, ssize_t& out,
                   ssize_t (*kernel_recvmsg)(int, msghdr*, int)) {
    if (!any_first() || (flags & (MSG_OOB | MSG_ERRQUEUE)) || cnt > 1024) return false;
    const size_t want = iov_total(iov, cnt);
    if (want == 0) return false;  // the kernel answers a receive of nothing
    const int saved = errno;
    const bool served = before_kernel(inode, iov, static_cast<int>(cnt), flags, out);
    errno = saved;
    if (!served) return false;
    const size_t got = static_cast<size_t>(out);
    if (got == 0 || got == want) return true;
    // The kernel's queue follows the kept bytes, and one TCP receive takes what
    // is queued after them too (a peek shows it): asked without waiting, and only
    // when bytes are there (an empty socket's receive would take its pending
    // error, which TCP reports after the bytes). MSG_WAITALL waits for the rest.
    const bool waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
    if (!waitall && kernel::inq(fd) == 0) {
        errno = saved;
        return true;
    }
    std::vector<iovec> rest;
    size_t skip = got;
    for (size_t i = 0; i < cnt; ++i) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        rest.push_back({static_cast<char*>(iov[i].iov_base) + skip, iov[i].iov_len - skip});
        skip = 0;
    }
    msghdr m{};
    m.msg_iov = rest.data();
    m.msg_iovlen = rest.size();
    // (A signal or the end there: the bytes so far, as a TCP receive returns them.)
    const ssize_t r = kernel_recvmsg(fd, &m, waitall ? flags : flags | MSG_DONTWAIT);
    if (r > 0) out += r;
    errno = saved;
    return true;
}

bool known(uint64_t inode) {
    if (!any() || inode == 0) return false;
    std::lock_guard<std::mutex> lk(g_mu);
    return find_locked(inode) != nullptr;
}

size_t unread_bytes(uint64_t inode) {
    if (!any() || inode == 0) return 0;
    std::lock_guard<std::mutex> lk(g_mu);
    const Entry* e = find_locked(inode);
    if (!e) return 0;
    const uint64_t consumed = e->h->consumed.load(std::memory_order_acquire);
    return consumed < e->length ? static_cast<size_t>(e->length - consumed) : 0;
}

std::vector<uint64_t> known_inodes() {
    std::vector<uint64_t> out;
    if (!any()) return out;
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_entries)
        for (const auto& e : *g_entries) out.push_back(e.inode);
    return out;
}

bool first_pending(uint64_t inode) {
    if (!any_first() || inode == 0) return false;
    std::lock_guard<std::mutex> lk(g_mu);
    Entry* e = find_locked(inode);
    return e && first_owed(*e);
}

void drop(uint64_t inode) {
    if (!any() || inode == 0) return;
    std::lock_guard<std::mutex> lk(g_mu);
    Entry* e = find_locked(inode);
    if (!e) return;
    RS_LOG(debug, "kept bytes of socket %llu dropped (%s): its last descriptor here closed",
           static_cast<unsigned long long>(inode), owed(*e) ? "unread" : "all read");
    munmap(e->h, e->size);
    raw_syscall(SYS_close, e->fd);
    *e = g_entries->back();
    g_entries->pop_back();
    g_any.store(!g_entries->empty(), std::memory_order_release);
    refresh_first_locked();
}

void closing_last(int fd, uint64_t inode) {
    if (!any() || inode == 0) return;
    // Kept bytes nobody read are TCP's unread bytes: the socket's last close
    // (no other process holds it) is a RST, as TCP's close with bytes unread.
    if (first_pending(inode) && peer_check::held_only_here(inode)) {
        const linger l{1, 0};
        const int saved = errno;
        raw_syscall(SYS_setsockopt, fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        errno = saved;
    }
    drop(inode);
}

int memfd_of(uint64_t inode) {
    std::lock_guard<std::mutex> lk(g_mu);
    Entry* e = find_locked(inode);
    return e && owed(*e) ? e->fd : -1;
}

uint64_t memfd_inode(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) < sizeof(Header)) return 0;
    char path[64], target[64] = {};
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0 || std::strncmp(target, "/memfd:rdmasock-leftover", 24) != 0) return 0;
    Header h;
    if (pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) || h.magic != kMagic) return 0;
    return h.inode;
}

bool adopt(int fd, uint64_t inode) {
    // The sender may be another user, or hostile: the memfd must be one we can
    // map safely, made by this user or root (a stranger's kept bytes would be
    // served as the socket's own), and what we register is one look at its
    // header, bounded by the mapping; the socket is the one passed with it.
    struct stat st {};
    const char* why = nullptr;
    size_t size = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < sizeof(Header) ||
        static_cast<uint64_t>(st.st_size) > sizeof(Header) + kMaxKept)
        why = "not a kept-bytes memfd of a possible size";
    else if (st.st_uid != geteuid() && st.st_uid != 0)
        why = "made by another user";
    else
        why = unsafe_to_map(fd, size = static_cast<size_t>(st.st_size));
    Header* h = why ? nullptr : map_fd(fd, size);
    if (!why && !h) why = "cannot map it";
    uint64_t length = 0;
    uint32_t order = 0;
    if (h) {
        length = __atomic_load_n(&h->length, __ATOMIC_RELAXED);
        order = __atomic_load_n(&h->order, __ATOMIC_RELAXED);
        if (__atomic_load_n(&h->magic, __ATOMIC_RELAXED) != kMagic || __atomic_load_n(&h->inode, __ATOMIC_RELAXED) != inode ||
            length > size - sizeof(Header) || order > 1 || h->fin.load() > 2)
            why = "its header is not one a shim wrote for this socket";
    }
    if (why) {
        RS_LOG(error, "socket %llu: the bytes kept for it, passed with it, are refused (%s)",
               static_cast<unsigned long long>(inode), why);
        if (h) munmap(h, size);
        raw_syscall(SYS_close, fd);
        return false;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    std::lock_guard<std::mutex> lk(g_mu);
    add_locked(Entry{inode, fd, h, size, length, order == static_cast<uint32_t>(Order::before_kernel)});
    return true;
}

std::string for_exec() {
    std::string out;
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_entries) return out;
    for (auto& e : *g_entries) {
        if (!owed(e)) continue;
        fcntl(e.fd, F_SETFD, 0);
        if (!out.empty()) out += ',';
        out += std::to_string(e.fd);
    }
    return out;
}

void adopt_from_env() {
    const char* v = getenv("RDMASOCK_LEFTOVER");
    if (!v || !*v) return;
    std::string list = v;
    unsetenv("RDMASOCK_LEFTOVER");  // for this image only: a later exec names its own
    for (size_t at = 0; at < list.size();) {
        size_t end = list.find(',', at);
        if (end == std::string::npos) end = list.size();
        char* stop;
        long fd = strtol(list.c_str() + at, &stop, 10);
        if (stop != list.c_str() + at && fd >= 0)
            if (const uint64_t inode = memfd_inode(static_cast<int>(fd))) adopt(static_cast<int>(fd), inode);
        at = end + 1;
    }
}

}  // namespace rdmasock::leftover
