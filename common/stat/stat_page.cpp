#include "stat/stat_page.hpp"
#include "sys/own_fd.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rdmasock::stat {

namespace {

// Text fields go through relaxed atomic byte accesses: a reader copies them
// while a writer may be changing them (the seqlock then discards the copy).
// Up to the first NUL only: a reader stops there (load_text), so what an older,
// longer text left after it is never read.
void store_text(char* dst, size_t cap, const char* src) {
    size_t n = src ? strnlen(src, cap - 1) : 0;
    for (size_t i = 0; i <= n; ++i)
        std::atomic_ref<char>(dst[i]).store(i < n ? src[i] : '\0', std::memory_order_relaxed);
}

// Bounded, printable: a hostile page cannot smuggle control bytes into a terminal or JSON.
std::string load_text(const char* src, size_t cap) {
    std::string out;
    for (size_t i = 0; i < cap; ++i) {
        char c = std::atomic_ref<char>(const_cast<char&>(src[i])).load(std::memory_order_relaxed);
        if (c == '\0') break;
        out += (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    return out;
}

constexpr int kReadTries = 1000;

}  // namespace

// Written at every connect and accept: digits by hand, no printf (which was
// a tenth of a short connection's shim time, docs/results.md).
std::string format_address(const sockaddr* a, socklen_t len) {
    char out[80];
    char* p = out;
    char* const end = out + sizeof out;
    uint16_t port;
    if (a && a->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
        auto* in = reinterpret_cast<const sockaddr_in*>(a);
        const auto* b = reinterpret_cast<const uint8_t*>(&in->sin_addr);
        for (int i = 0; i < 4; ++i) {
            if (i) *p++ = '.';
            p = std::to_chars(p, end, unsigned{b[i]}).ptr;
        }
        port = ntohs(in->sin_port);
    } else if (a && a->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
        auto* in6 = reinterpret_cast<const sockaddr_in6*>(a);
        *p++ = '[';
        if (!inet_ntop(AF_INET6, &in6->sin6_addr, p, INET6_ADDRSTRLEN)) return "";
        p += strlen(p);
        *p++ = ']';
        port = ntohs(in6->sin6_port);
    } else {
        return "";
    }
    *p++ = ':';
    p = std::to_chars(p, end, unsigned{port}).ptr;
    return std::string(out, p);
}

std::unique_ptr<StatPage> StatPage::create(uint32_t slots) {
    if (slots == 0) return nullptr;
    int fd = adopt_own_fd(memfd_create(kMemfdName, MFD_CLOEXEC));
    if (fd < 0) return nullptr;
    // Sparse: tmpfs backs only the pages written, so a process with a few
    // connections pays a page or two, not the whole table.
    size_t size = kHeaderBytes + size_t{slots} * sizeof(Slot);
    void* base = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(size)) == 0)
        base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        close_own_fd(fd);
        return nullptr;
    }
    std::unique_ptr<StatPage> p(new StatPage(base, size, slots, fd));
    auto* h = static_cast<PageHeader*>(base);
    h->version = kVersion;
    h->header_bytes = kHeaderBytes;
    h->slot_bytes = sizeof(Slot);
    h->slot_count = slots;
    h->pid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
    // The magic last: a reader that sees it sees a complete header.
    std::atomic_ref<uint64_t>(h->magic).store(kMagic, std::memory_order_release);
    return p;
}

StatPage::StatPage(void* base, size_t size, uint32_t slots, int fd)
    : base_(base), size_(size), slots_(slots), fd_(fd) {
    struct stat st {};
    if (fstat(fd, &st) == 0) {
        dev_ = st.st_dev;
        ino_ = st.st_ino;
    }
}

StatPage::~StatPage() {
    munmap(base_, size_);
    if (fd_ >= 0 && is_our_fd(fd_)) close_own_fd(fd_);
}

Slot* StatPage::slot(uint32_t i) const {
    return reinterpret_cast<Slot*>(static_cast<char*>(base_) + kHeaderBytes + size_t{i} * sizeof(Slot));
}

void StatPage::write(Slot* s, const SlotInfo* info, bool addresses) {
    uint32_t seq = s->seq.load(std::memory_order_relaxed);
    s->seq.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    if (info) {
        s->fd.store(info->fd, std::memory_order_relaxed);
        s->role.store(static_cast<uint8_t>(info->role), std::memory_order_relaxed);
        s->phase_code.store(info->phase_code, std::memory_order_relaxed);
        store_text(s->transport, sizeof s->transport, info->transport);
        store_text(s->phase, sizeof s->phase, info->phase);
        if (addresses) {
            store_text(s->local, sizeof s->local, info->local.c_str());
            store_text(s->remote, sizeof s->remote, info->remote.c_str());
        }
        store_text(s->reason, sizeof s->reason, info->reason.c_str());
    }
    s->in_use.store(info ? 1 : 0, std::memory_order_relaxed);
    s->seq.store(seq + 2, std::memory_order_release);
}

Slot* StatPage::acquire(const SlotInfo& info) {
    std::lock_guard<std::mutex> lk(mu_);
    auto* h = static_cast<PageHeader*>(base_);
    uint32_t i;
    if (!free_.empty()) {
        i = free_.back();
        free_.pop_back();
    } else {
        i = h->high_water.load(std::memory_order_relaxed);
        if (i >= slots_) {
            h->dropped.fetch_add(1, std::memory_order_relaxed);
            return nullptr;
        }
    }
    Slot* s = slot(i);
    // Zeroed inside the seqlock: a reader never pairs new metadata with old counts.
    uint32_t seq = s->seq.load(std::memory_order_relaxed);
    s->seq.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s->tx_bytes.store(0, std::memory_order_relaxed);
    s->rx_bytes.store(0, std::memory_order_relaxed);
    s->seq.store(seq + 2, std::memory_order_release);
    write(s, &info, true);
    if (i == h->high_water.load(std::memory_order_relaxed)) h->high_water.store(i + 1, std::memory_order_release);
    return s;
}

void StatPage::update(Slot* s, const SlotInfo& info) {
    std::lock_guard<std::mutex> lk(mu_);
    if (s->in_use.load(std::memory_order_relaxed)) write(s, &info, false);
}

void StatPage::release(Slot* s) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!s->in_use.load(std::memory_order_relaxed)) return;
    write(s, nullptr, false);
    free_.push_back(static_cast<uint32_t>(s - slot(0)));
}

bool StatPage::is_our_fd(int fd) const {
    struct stat st {};
    return fstat(fd, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

size_t StatPage::used_bytes() const {
    size_t used = kHeaderBytes + size_t{header().high_water.load(std::memory_order_relaxed)} * sizeof(Slot);
    return used < size_ ? used : size_;
}

namespace {
// The byte counters move while the page is copied (other threads add to them
// without mu_): word by word, each an atomic load, as the stat reader does.
void copy_live(void* to, const void* from, size_t bytes) {
    auto* d = static_cast<uint64_t*>(to);
    const auto* s = static_cast<const uint64_t*>(from);
    for (size_t i = 0; i < bytes / 8; ++i) d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
    memcpy(d + bytes / 8, s + bytes / 8, bytes % 8);
}
}  // namespace

void StatPage::prepare_fork() {
    mu_.lock();
    fork_copy_bytes_ = used_bytes();
    fork_copy_ = malloc(fork_copy_bytes_);  // counters may still move: the child gets them as of now
    if (fork_copy_) copy_live(fork_copy_, base_, fork_copy_bytes_);
}

void StatPage::after_fork_parent() {
    free(fork_copy_);
    fork_copy_ = nullptr;
    mu_.unlock();
}

bool StatPage::after_fork_child() {
    auto* h = static_cast<PageHeader*>(base_);
    const void* from = fork_copy_ ? fork_copy_ : base_;  // no copy (no memory): best effort
    size_t used = fork_copy_ ? fork_copy_bytes_ : used_bytes();
    bool ok = false;
    int nfd = adopt_own_fd(memfd_create(kMemfdName, MFD_CLOEXEC));
    if (nfd >= 0 && ftruncate(nfd, static_cast<off_t>(size_)) == 0) {
        void* tmp = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, nfd, 0);
        if (tmp != MAP_FAILED) {
            memcpy(tmp, from, used);
            munmap(tmp, size_);
            // Same address: every Slot* the child's sockets hold stays valid.
            ok = mmap(base_, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, nfd, 0) != MAP_FAILED;
        }
    }
    if (!ok) {
        // No memfd: keep writing, but into private memory the parent cannot see.
        if (nfd >= 0) close_own_fd(nfd);
        nfd = -1;
        void* tmp = mmap(nullptr, used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (tmp != MAP_FAILED) {
            memcpy(tmp, from, used);
            if (mmap(base_, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED)
                memcpy(base_, tmp, used);
            munmap(tmp, used);
        }
    }
    // The inherited fd is the parent's page: close it, unless the program already
    // reused that number for something of its own.
    if (fd_ >= 0 && is_our_fd(fd_)) close_own_fd(fd_);
    fd_ = nfd;
    struct stat st {};
    if (nfd >= 0 && fstat(nfd, &st) == 0) {
        dev_ = st.st_dev;
        ino_ = st.st_ino;
    }
    h->pid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
    free(fork_copy_);
    fork_copy_ = nullptr;
    mu_.unlock();
    return ok;
}

bool read_page(const void* data, size_t len, PageView& out, std::string& error) {
    out = PageView{};
    if (!data || len < kHeaderBytes) return error = "shorter than a header", false;
    auto* h = static_cast<const PageHeader*>(data);
    if (std::atomic_ref<uint64_t>(const_cast<uint64_t&>(h->magic)).load(std::memory_order_acquire) != kMagic)
        return error = "bad magic", false;
    if (h->version != kVersion) return error = "unknown version " + std::to_string(h->version), false;
    if (h->header_bytes != kHeaderBytes || h->slot_bytes != sizeof(Slot)) return error = "unknown layout", false;
    uint32_t count = h->slot_count;
    if (count > (len - kHeaderBytes) / sizeof(Slot)) return error = "slot count beyond the page", false;
    uint32_t hw = h->high_water.load(std::memory_order_acquire);
    if (hw > count) hw = count;
    out.pid = h->pid.load(std::memory_order_relaxed);
    out.slot_count = count;
    out.dropped = h->dropped.load(std::memory_order_relaxed);
    auto* slots = reinterpret_cast<const Slot*>(static_cast<const char*>(data) + kHeaderBytes);
    for (uint32_t i = 0; i < hw; ++i) {
        const Slot& s = slots[i];
        bool done = false;
        for (int t = 0; t < kReadTries && !done; ++t) {
            uint32_t s1 = s.seq.load(std::memory_order_acquire);
            if (s1 & 1) continue;
            SlotView v;
            bool in_use = s.in_use.load(std::memory_order_relaxed);
            v.index = i;
            v.fd = s.fd.load(std::memory_order_relaxed);
            v.role = s.role.load(std::memory_order_relaxed) ? Role::server : Role::client;
            v.tx_bytes = s.tx_bytes.load(std::memory_order_relaxed);
            v.rx_bytes = s.rx_bytes.load(std::memory_order_relaxed);
            v.transport = load_text(s.transport, sizeof s.transport);
            v.phase = load_text(s.phase, sizeof s.phase);
            v.local = load_text(s.local, sizeof s.local);
            v.remote = load_text(s.remote, sizeof s.remote);
            v.reason = load_text(s.reason, sizeof s.reason);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (s.seq.load(std::memory_order_relaxed) != s1) continue;
            done = true;
            if (in_use) out.slots.push_back(std::move(v));
        }
        if (!done) ++out.unstable;
    }
    return true;
}

}  // namespace rdmasock::stat
