#include "stat_hooks.hpp"

#include <pthread.h>

#include <mutex>

namespace rdmasock::shim {

namespace {

// The process's page, made at the first tracked connection and never freed
// (interposers run during exit). Null when memfd_create failed: no stats.
std::atomic<stat::StatPage*> g_page{nullptr};
std::once_flag g_page_once;

void fork_prepare() { g_page.load()->prepare_fork(); }
void fork_parent() { g_page.load()->after_fork_parent(); }
void fork_child() { g_page.load()->after_fork_child(); }

stat::StatPage* page() {
    std::call_once(g_page_once, [] {
        auto p = stat::StatPage::create();
        if (!p) return;
        g_page.store(p.release());
        pthread_atfork(fork_prepare, fork_parent, fork_child);
    });
    return g_page.load(std::memory_order_acquire);
}

stat::SlotInfo describe(const Socket& s, int fd) {
    stat::SlotInfo info;
    info.fd = s.conn->fd() >= 0 ? s.conn->fd() : fd;
    info.role = s.conn->role() == Role::server ? stat::Role::server : stat::Role::client;
    Phase ph = s.conn->phase();
    info.phase_code = static_cast<uint8_t>(ph);
    info.phase = to_string(ph);
    info.transport = s.conn->transport_name();
    // The reason is written before the phase that ends the negotiation: read it only then.
    if (ph == Phase::plain || ph == Phase::failed) info.reason = s.conn->fallback_reason();
    return info;
}

}  // namespace

StatSlotRef::~StatSlotRef() {
    if (stat::Slot* s = get())
        if (auto* p = g_page.load(std::memory_order_acquire)) p->release(s);
}

void stat_track(Socket& s, int fd, const sockaddr* peer, socklen_t peer_len) {
    if (!s.conn || s.stat.get()) return;
    stat::StatPage* p = page();
    if (!p) return;
    stat::SlotInfo info = describe(s, fd);
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
        info.local = stat::format_address(reinterpret_cast<sockaddr*>(&a), len);
    len = sizeof a;
    if (peer) info.remote = stat::format_address(peer, peer_len);
    else if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
        info.remote = stat::format_address(reinterpret_cast<sockaddr*>(&a), len);
    s.stat.set(p->acquire(info));
}

void stat_refresh(Socket& s) {
    stat::Slot* slot = s.stat.get();
    stat::StatPage* p = g_page.load(std::memory_order_acquire);
    if (!slot || !p || !s.conn) return;
    stat::SlotInfo info = describe(s, -1);
    p->update(slot, info);
}

}  // namespace rdmasock::shim
