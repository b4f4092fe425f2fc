// The shim's side of the stat page: take a slot when a connection is tracked,
// count bytes after each data call, republish when the phase moved.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include "fd_table.hpp"

namespace rdmasock::shim {

// After connect (peer = the address given to connect) or accept (peer null: asked of the kernel).
void stat_track(Socket& s, int fd, const sockaddr* peer = nullptr, socklen_t peer_len = 0);
// Rewrites the slot's transport, phase and reason from the connection.
void stat_refresh(Socket& s);

// The data path: one relaxed add, and a byte compare to notice a phase change.
inline void stat_bytes(Socket& s, ssize_t n, bool tx) {
    stat::Slot* slot = s.stat.get();
    if (!slot) return;
    if (n > 0) stat::StatPage::add_bytes(slot, tx, static_cast<uint64_t>(n));
    if (s.conn && slot->phase_code.load(std::memory_order_relaxed) != static_cast<uint8_t>(s.conn->phase()))
        stat_refresh(s);
}

}  // namespace rdmasock::shim
