// fd -> Socket. The fast path for an fd the shim does not know is one relaxed
// byte load, so non-socket I/O pays next to nothing.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "connection/connection.hpp"
#include "stat_slot.hpp"

namespace rdmasock {

// What the shim knows about one TCP socket. Shared by every fd that refers to
// it (dup) so the last close, not the first, ends the stream.
struct Socket {
    std::shared_ptr<Connection> conn;  // null until connect/accept
    bool listening = false;
    bool nonblocking = false;
    int registry_fd = -1;              // listener: our same-host registry entry
    std::atomic<int> fd_refs{1};
    std::atomic<bool> dupped{false};   // ever had a second fd (epoll registrations may sit under either)
    // The application set what only the kernel's socket does (kernel_only.hpp,
    // O_ASYNC): no connection of it leaves TCP (nor, for a listener with such a
    // socket option, any it accepts: the kernel copies the option).
    std::atomic<bool> tcp_only{false};
    std::atomic<const char*> tcp_only_why{nullptr};  // what was set, for the statistics line
    std::atomic<bool> tcp_only_inherited{false};     // a socket option, which accepted sockets get too
    std::atomic<uint64_t> plain_tx{0}, plain_rx{0};  // bytes counted for statistics
    shim::StatSlotRef stat;            // its line in `rdmasock stat`
    // The network namespace it was made in, when the shim saw where (socket()
    // in a thread whose namespace is known, a listener's, accept()'s from its
    // listener): its rendezvous need not ask the kernel (sys/netns.hpp). Written
    // once a value is known; every value written is the same.
    struct MadeIn {
        std::atomic<ino_t> ino{0};
        std::atomic<dev_t> dev{0};
        std::atomic<bool> known{false};
        void set(netns::Id id) {
            if (!id.known) return;
            ino.store(id.ino, std::memory_order_relaxed);
            dev.store(id.dev, std::memory_order_relaxed);
            known.store(true, std::memory_order_release);
        }
        netns::Id get() const {
            if (!known.load(std::memory_order_acquire)) return {};
            return {ino.load(std::memory_order_relaxed), dev.load(std::memory_order_relaxed), true};
        }
    } netns;

    // Calls in progress (x2) and bit 0 = the last fd closed. The socket is
    // released (release()) when both say so, as the kernel releases a socket
    // file after its last fd and its last call in progress: a close in another
    // thread, or in a signal handler, while a call waits sends no end of
    // stream until that call returns.
    std::atomic<uint32_t> calls{0};
    std::atomic<bool> finished{false};
    bool enter() {
        if (!(calls.fetch_add(2, std::memory_order_acquire) & 1)) return true;
        leave();  // closed already: the caller takes the real call (EBADF)
        return false;
    }
    void leave() {
        if (calls.fetch_sub(2, std::memory_order_acq_rel) == 3) release();
    }
    // The connection's last close (finish(): Connection::close_last_reference
    // and the statistics line, once), then its fd let go (Connection::retire_fd).
    void release();
    void finish();
    // In a forked child: the parent's calls in progress are not here.
    void forget_other_threads() {
        calls.fetch_and(1, std::memory_order_relaxed);
        if (conn) conn->forget_other_threads();
    }
    // At the last close, before the kernel's: a call still in progress in another
    // thread moves to a private fd that lives until that call returns, and the
    // release waits for it.
    void last_fd_closing() {
        if ((calls.fetch_or(1, std::memory_order_acq_rel) >> 1) == 0 || !conn) {
            release();
            return;
        }
        conn->keep_own_fd();
        if (calls.load(std::memory_order_acquire) == 1) release();  // it left meanwhile
    }
};

class FdTable {
public:
    static constexpr int kMaxFd = 1 << 20;
    static constexpr int kChunk = 4096;

    std::shared_ptr<Socket> get(int fd) const;
    bool contains(int fd) const;
    void put(int fd, std::shared_ptr<Socket> s);
    // Remove and return. for_close (close()): until closed(fd), after the kernel's
    // close, the number answers EBADF to data calls (closing()): the kernel socket
    // still exists then, and a send that reached it would put bytes on the TCP
    // stream behind the ring. As the kernel orders a call that races a close:
    // after it. Only while the number still names that socket: a file another
    // thread opened under the freed number before closed() is that file's.
    std::shared_ptr<Socket> take(int fd, bool for_close = false);
    void closed(int fd);
    bool closing(int fd) const;
    // Grows whenever a number leaves the table or is given another socket: a
    // wait that holds sockets across a call (poll) looks its numbers up again
    // only after it moved.
    uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
    // The tracked fds in [first, last], ascending (close_range, closefrom).
    std::vector<int> present_in(unsigned first, unsigned last) const;
    // Around fork: the chunk lock is held across it (fork_lock.hpp). In a forked
    // child (one thread), forget_other_threads lets go of it, frees the slot locks the
    // parent's other threads held, and each socket forgets their calls
    // (Socket::forget_other_threads).
    static void before_fork();
    static void after_fork_parent();
    void forget_other_threads();

private:
    struct Slot {
        std::atomic<bool> present{false};
        std::atomic<bool> lock{false};
        std::atomic<uint64_t> closing{0};  // take(for_close) .. closed: the closing connection's socket inode
        std::shared_ptr<Socket> sock;
    };
    Slot* slot(int fd, bool create) const;
    mutable std::atomic<Slot*> chunks_[kMaxFd / kChunk] = {};
    std::atomic<uint64_t> generation_{0};
};

FdTable& fd_table();

// Whether `fd` is in the table, without allocating: libc's syscall() reaches
// the shim from inside malloc's own start-up (jemalloc reads a /proc file with
// it), where building the table would wait on malloc's lock for good.
bool fd_in_table_quietly(int fd);
bool fd_table_built();

}  // namespace rdmasock
