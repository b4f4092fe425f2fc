// fd -> Socket. The fast path for an fd the shim does not know is one relaxed
// byte load, so non-socket I/O pays next to nothing.
#pragma once

#include <atomic>
#include <memory>

#include "connection.hpp"
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
    std::atomic<uint64_t> plain_tx{0}, plain_rx{0};  // bytes counted for statistics
    shim::StatSlotRef stat;            // its line in `rdmasock stat`
};

class FdTable {
public:
    static constexpr int kMaxFd = 1 << 20;
    static constexpr int kChunk = 4096;

    std::shared_ptr<Socket> get(int fd) const;
    bool contains(int fd) const;
    void put(int fd, std::shared_ptr<Socket> s);
    std::shared_ptr<Socket> take(int fd);  // remove and return

private:
    struct Slot {
        std::atomic<bool> present{false};
        std::atomic<bool> lock{false};
        std::shared_ptr<Socket> sock;
    };
    Slot* slot(int fd, bool create) const;
    mutable std::atomic<Slot*> chunks_[kMaxFd / kChunk] = {};
};

FdTable& fd_table();

}  // namespace rdmasock
