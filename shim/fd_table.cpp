#include "fd_table.hpp"
#include "sys/raw_syscall.hpp"
#include "sys/fork_lock.hpp"
#include "sys/signal_seen.hpp"

#include <sys/stat.h>
#include <sys/syscall.h>

#include <cerrno>
#include <mutex>
#include <new>

namespace rdmasock {

namespace {
// A slot's lock. Signal handlers of the holding thread are held back while
// it is taken: a handler's own socket call on the same fd would spin here for good.
struct SpinGuard {
    std::atomic<bool>& l;
    explicit SpinGuard(std::atomic<bool>& lock) : l(lock) {
        signals::defer_begin();
        while (l.exchange(true, std::memory_order_acquire)) __builtin_ia32_pause();
    }
    ~SpinGuard() {
        l.store(false, std::memory_order_release);
        signals::defer_end();
    }
};
std::mutex g_chunk_mu;
bool g_chunk_mu_held = false;  // by the forking thread (fork_lock.hpp); read in the fork's after-handlers
}  // namespace

FdTable::Slot* FdTable::slot(int fd, bool create) const {
    if (fd < 0 || fd >= kMaxFd) return nullptr;
    auto& c = chunks_[fd / kChunk];
    Slot* chunk = c.load(std::memory_order_acquire);
    if (!chunk && create) {
        std::lock_guard<std::mutex> lk(g_chunk_mu);
        chunk = c.load(std::memory_order_acquire);
        if (!chunk) {
            chunk = new Slot[kChunk];
            c.store(chunk, std::memory_order_release);
        }
    }
    return chunk ? &chunk[fd % kChunk] : nullptr;
}

bool FdTable::contains(int fd) const {
    Slot* s = slot(fd, false);
    return s && s->present.load(std::memory_order_acquire);
}

std::shared_ptr<Socket> FdTable::get(int fd) const {
    Slot* s = slot(fd, false);
    if (!s || !s->present.load(std::memory_order_acquire)) return nullptr;
    SpinGuard g(s->lock);
    return s->sock;
}

void FdTable::put(int fd, std::shared_ptr<Socket> sock) {
    Slot* s = slot(fd, true);
    if (!s) return;  // beyond the table: the socket simply stays plain
    SpinGuard g(s->lock);
    s->sock = std::move(sock);
    s->closing.store(0, std::memory_order_relaxed);  // a new socket under the number
    s->present.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
}

std::shared_ptr<Socket> FdTable::take(int fd, bool for_close) {
    Slot* s = slot(fd, false);
    if (!s || !s->present.load(std::memory_order_relaxed)) return nullptr;
    SpinGuard g(s->lock);
    // Only a connection has a stream behind a ring to protect (a listener has none).
    if (for_close && s->sock && s->sock->conn) s->closing.store(s->sock->conn->socket_inode(), std::memory_order_relaxed);
    s->present.store(false, std::memory_order_release);  // after `closing`: a caller that sees it gone sees why
    generation_.fetch_add(1, std::memory_order_acq_rel);
    return std::move(s->sock);
}

void FdTable::closed(int fd) {
    Slot* s = slot(fd, false);
    if (s && s->closing.load(std::memory_order_relaxed)) s->closing.store(0, std::memory_order_release);
}

bool FdTable::closing(int fd) const {
    const Slot* s = slot(fd, false);
    const uint64_t ino = s ? s->closing.load(std::memory_order_acquire) : 0;
    if (ino == 0) return false;
    // Rare (a call racing a close): is the number still that socket? (errno kept)
    const int saved = errno;
    struct stat st {};
    const bool same = raw_syscall(SYS_fstat, fd, &st) == 0 && st.st_ino == ino;
    errno = saved;
    return same;
}

std::vector<int> FdTable::present_in(unsigned first, unsigned last) const {
    std::vector<int> fds;
    if (last >= static_cast<unsigned>(kMaxFd)) last = kMaxFd - 1;
    for (unsigned fd = first; fd <= last;) {
        const Slot* chunk = chunks_[fd / kChunk].load(std::memory_order_acquire);
        if (!chunk) {  // a chunk never created holds nothing
            fd = (fd / kChunk + 1) * kChunk;
            continue;
        }
        if (chunk[fd % kChunk].present.load(std::memory_order_relaxed)) fds.push_back(static_cast<int>(fd));
        ++fd;
    }
    return fds;
}

void FdTable::before_fork() { g_chunk_mu_held = fork_lock::take(g_chunk_mu); }
void FdTable::after_fork_parent() { fork_lock::after_parent(g_chunk_mu, g_chunk_mu_held); }

void FdTable::forget_other_threads() {
    fork_lock::after_child(g_chunk_mu, g_chunk_mu_held);
    for (auto& c : chunks_) {
        Slot* chunk = c.load(std::memory_order_acquire);
        if (!chunk) continue;
        for (int i = 0; i < kChunk; ++i) {
            Slot& s = chunk[i];
            s.lock.store(false, std::memory_order_relaxed);
            s.closing.store(0, std::memory_order_relaxed);  // its closing thread is not here to clear it
            if (s.present.load(std::memory_order_relaxed) && s.sock) s.sock->forget_other_threads();
        }
    }
}

namespace {
std::atomic<bool> g_table_built{false};
}  // namespace

bool fd_table_built() { return g_table_built.load(std::memory_order_acquire); }
bool fd_in_table_quietly(int fd) { return fd_table_built() && fd_table().contains(fd); }

FdTable& fd_table() {
    static FdTable* t = [] {
        auto* made = new FdTable();  // never destroyed: interposers run during exit
        g_table_built.store(true, std::memory_order_release);
        return made;
    }();
    return *t;
}

}  // namespace rdmasock
