// The same-host side channel as the Connection sees it: the rendezvous steps and
// the data path while bytes still travel over TCP (docs/protocol.md, "Switching at
// a byte offset").
#include "connection/connection_detail.hpp"
#include "sys/kernel_calls.hpp"

#include "shm/peer_check.hpp"

#include <cstring>

#include "sys/fault_guard.hpp"
#include "sys/fd_budget.hpp"
#include "negotiation/back_marker.hpp"
#include "base/log.hpp"
#include "rdma/rdma_device.hpp"
#include "rdma/rdma_setup.hpp"
#include "shm/shm_transport.hpp"

namespace rdmasock {

using namespace detail;

// One step of the side-channel rendezvous. `may_syscall` false (readiness
// queries): only look at shared memory.
bool Connection::progress_rendezvous(bool may_syscall) {
    using R = ShmRendezvous::Result;
    std::unique_ptr<Transport> t;
    // A reader blocked in the kernel on the TCP socket (tcp_recv holds read_mu_)
    // would sleep through the switch it cannot see: no step while one is there.
    // It comes back with the peer's next TCP byte and takes the step itself.
    std::unique_lock<SideLock> no_reader(read_mu_, std::defer_lock);
    if (may_syscall && !no_reader.try_lock()) return false;
    switch (phase()) {
        case Phase::rv_listen: {
            if (!may_syscall) return false;
            if (discovery_deferred_) {
                bool ended = false;
                if (!client_discovery_step(ended)) return ended;
            }
            R r = rv_->client_step(fd(), t, shm_due(), [this] { return stream_open_both_ways(); });
            if (r == R::waiting) return false;
            if (r == R::failed) {
                // Another network namespace than the socket's: in-band offers are
                // declined too, and the reason is the statistics line's.
                if (rv_->stay_plain()) mark_tcp_only(rv_->why().c_str());
                become_plain(rv_->why().c_str());
                return true;
            }
            transport_.publish(std::move(t));
            owner_pid_ = current_pid();
            fork_gen_ = fork_generation();
            // The ring copies may start at any call now: bad buffers get EFAULT (fault_guard.hpp).
            if (!guard::install()) RS_LOG(debug, "fd %d: no fault guard: a bad buffer faults in the ring copy", fd());
            peer_inode_ = rv_->peer_socket().inode;
            enter(Phase::rv_accepted);
            RS_LOG(debug, "fd %d: side channel: rings handed to the server", fd());
            return true;
        }
        case Phase::rv_pending: {
            if (!may_syscall) return false;
            // Claimed at this process's first step, before its first byte or
            // OFFER (rv_claimed_): a fork since then, even one in the middle of
            // this step (drop_torn_rendezvous), keeps the stream on TCP for good.
            if (!rv_claimed_.load(std::memory_order_relaxed)) {
                claim_rendezvous();
                rv_claimed_.store(true, std::memory_order_relaxed);
            } else if (forked_since_rendezvous()) {
                become_plain("forked while the same-host rendezvous was under way");
                return true;
            }
            if (!server_may_offer_now()) return false;
            R r = config_.fault == "server-offer" ? R::failed : rv_->server_offer(fd());
            if (r == R::waiting) {
                enter(Phase::rv_offered);
                return true;
            }
            // A client that publishes its name once its connection has lived may
            // not have yet: try again at a later call (a few times, further apart).
            constexpr int kOfferTries = 12;
            if (discovery_deferred_ && rv_->client_absent() && ++offer_tries_ < kOfferTries) {
                next_look_us_ = wait::now_us() + (int64_t{1000} << (offer_tries_ - 1));
                return false;
            }
            RS_LOG(debug, "fd %d: no side channel (%s): the client may still ask in band", fd(), rv_->why().c_str());
            // Another network namespace than the socket's: in-band offers are
            // declined too, and the reason is the statistics line's.
            if (rv_->stay_plain()) mark_tcp_only(rv_->why().c_str());
            side_channel_why_ = rv_->why();  // the reason's first half if in band ends on TCP too
            rv_.reset();
            side_tried_.store(false, std::memory_order_relaxed);
            // No side channel: the client may still speak in band (an RDMA HELLO, which
            // must be answered, even if only to decline it, never passed on as data).
            enter(Phase::undecided);
            return true;
        }
        case Phase::rv_offered: {
            if (!may_syscall) return false;
            R r = rv_->server_step(fd(), t, [this] { return stream_open_both_ways(); });
            if (r == R::waiting) return false;
            if (r == R::failed) {
                if (rv_->stay_plain()) mark_tcp_only(rv_->why().c_str());
                become_plain(rv_->why().c_str());
                return true;
            }
            peer_inode_ = rv_->peer_socket().inode;
            rv_.reset();
            upgrade(std::move(t));
            return true;
        }
        case Phase::rv_accepted: {
            // The server's switch offset is its acceptance.
            if (transport_->rx_switch()->load(std::memory_order_acquire) != RingControl::kNotSwitched) {
                if (may_syscall) {
                    // CONFIRM is queued (the server sent it before it switched): take
                    // the server's doorbell now rather than at our first ring.
                    (void)rv_->client_confirmed(*transport_);
                    rv_.reset();
                }
                no_delay_for_shim();
                enter(Phase::upgraded);
                RS_LOG(info, "fd %d: upgraded to %s (side channel)", fd(), transport_->name());
                return true;
            }
            if (!may_syscall) return false;
            auto r = rv_->client_confirmed(*transport_);
            if (r == R::waiting) return false;
            if (r == R::failed) {
                become_plain(rv_->why().c_str());
                return true;
            }
            no_delay_for_shim();
            enter(Phase::upgraded);
            RS_LOG(info, "fd %d: upgraded to %s (side channel)", fd(), transport_->name());
            return true;
        }
        default: return false;
    }
}

// ---------------------------------------------------------------- side-channel data path

ssize_t Connection::tcp_send(const iovec* iov, int iovcnt, int flags) {
    // (A send waiting for room holds write_mu_; one that may not block does not
    // wait behind it, as tcp_recv's: TCP says EAGAIN there.)
    std::unique_lock<SideLock> lk(write_mu_, std::defer_lock);
    if (!lock_tcp_side(lk, flags, true)) return -1;
    // send() chose TCP from the phase before it held the writers' lock; another
    // thread's send may have switched our sends to the ring meanwhile, at the
    // offset that counts every TCP byte so far (switch_tx_locked). Bytes sent
    // over TCP after it lie past the peer's switch offset, where nobody reads:
    // a whole send accepted and lost (issue 36). Only under this lock does the
    // way stand still: the call goes the way the phase says now.
    if (phase() == Phase::upgraded) {
        lk.unlock();
        return send(iov, iovcnt, flags);
    }
    return tcp_send_locked(iov, iovcnt, flags);
}

ssize_t Connection::tcp_send_locked(const iovec* iov, int iovcnt, int flags) {
    ssize_t n = tcp_io(true, iov, iovcnt, flags);  // connection_tcp_io.cpp
    if (n > 0) tcp_tx_ += static_cast<uint64_t>(n);
    // The kernel's buffer full, as a ring found full (send_full_count): the
    // room freed later is an EPOLLOUT edge of the emulated set (TCP's
    // SOCK_NOSPACE). Else a writer that took EAGAIN here while the set had
    // last seen it writable waited for good (a tokio client still in
    // rv_accepted, 262,144 bytes short).
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) send_full_.fetch_add(1, std::memory_order_relaxed);
    return n;
}

ssize_t Connection::tcp_recv(const iovec* iov, int iovcnt, int flags) {
    ssize_t n;
    {
        // (A recv waiting on the socket holds read_mu_ so that no switch passes it; a
        // call that may not block does not wait behind it: lock_tcp_side.)
        std::unique_lock<SideLock> lk(read_mu_, std::defer_lock);
        if (!lock_tcp_side(lk, flags, false)) return -1;
        if (!kernel_driven()) {
            lk.unlock();  // another thread moved the rendezvous on meanwhile
            return recv(iov, iovcnt, flags);
        }
        n = tcp_io(false, iov, iovcnt, flags);  // connection_tcp_io.cpp
        if (n > 0 && !(flags & MSG_PEEK)) tcp_rx_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    }
    // A shimmed server offers before its first byte leaves (shm_rendezvous.hpp):
    // server bytes without an OFFER mean a server without the shim. A client that
    // only sends gives up after kRendezvousCalls calls spread over at least
    // kRendezvousWaitUs: a count alone gave up on servers starved of CPU.
    int saved = errno;
    // A held OFFER is the server's answer already: it waits only for shm_due().
    // (Discovery deferred: the server offers only once its connection has lived,
    // maybe after bytes of its own; client_discovery_step gives up instead.)
    if (phase() == Phase::rv_listen && !discovery_deferred_ && (n > 0 || rendezvous_gave_up())) {
        std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
        if (!progress_rendezvous(true) && phase() == Phase::rv_listen && !(rv_ && rv_->offer_held()))
            become_plain("the server made no offer");
    }
    errno = saved;
    return n;
}

namespace {
// The host's RDMA probe (RdmaDevice::host_may_have_rdma, read once per process),
// without its reason: asked at every new connection, which then copies no string.
bool host_may_have_rdma() {
    static const bool rdma = [] {
        std::string why;
        return RdmaDevice::host_may_have_rdma(why);
    }();
    return rdma;
}
}  // namespace

// Rings cost a connection more than its first round trips over loopback TCP
// (benchmarks/connect_rate.sh): a client answers the OFFER only once its
// connection has lived RDMASOCK_SHM_AFTER_US, so one that lives for a request
// or two ends as it would over TCP. Asked at the client's calls, under handshake_mu_.
bool Connection::shm_due() const {
    const uint32_t after = shm_after_us(config_);
    return after == 0 || wait::now_us() - rv_since_us_ >= int64_t{after};
}

// Unset: deferred where that saves the discovery itself (no RDMA device: nothing
// is negotiated in band, so both ends wait without a word). With a device the
// side channel is looked up at connect anyway, and only the rings would wait.
uint32_t Connection::shm_after_us(const Config& c) {
    if (c.shm_after_us != Config::kShmAfterAuto) return c.shm_after_us;
    return host_may_have_rdma() ? 0 : Config::kShmAfterDefaultUs;
}

// The switch moves an open stream. A shutdown of ours (recorded in the
// rendezvous phases too), the peer's FIN, a reset or an error: the kernel holds
// that state and the rings would not (a send after SHUT_WR found a ring and
// succeeded), so such a connection stays on TCP.
bool Connection::stream_open_both_ways() {
    if (shut_rd_.load() || shut_wr_.load()) return false;
    return (tcp_events(POLLRDHUP) & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) == 0;
}

bool Connection::rendezvous_gave_up() {
    constexpr int kRendezvousCalls = 64;
    constexpr int64_t kRendezvousWaitUs = 10'000'000;
    return ++rv_calls_ > kRendezvousCalls && wait::now_us() - offer_wait_since_us_ > kRendezvousWaitUs;
}

// Discovery waits for the connection to live RDMASOCK_SHM_AFTER_US (a short
// connection then makes no listener, no sock_diag query, no side channel: the
// system calls it costs are TCP's). Only where both ends agree on it without a
// word: on a host without RDMA nothing is negotiated in band, so a server that
// has not offered yet reads no HELLO in the client's first bytes. With an RDMA
// device a same-host client may speak in band (RDMASOCK_TRANSPORT=rdma), and the
// server must have looked for the side channel before its first read.
bool Connection::discovery_may_wait(const Config& c) {
    if (shm_after_us(c) == 0 || c.fault.find("inband-anyway") != std::string::npos) return false;
    return !host_may_have_rdma();
}

// Client, rv_listen, discovery deferred. Publishes the name at the first call
// once the connection has lived; then looks for the OFFER at most every
// kLookEveryUs (an accept that finds nothing is a system call), and gives up
// as rendezvous_gave_up says: the server's bytes say nothing here, a server
// that offers late has sent some before.
bool Connection::client_discovery_step(bool& ended) {
    constexpr int64_t kLookEveryUs = 1000;
    if (!rv_->listening()) {
        if (!discovery_due()) return false;
        if (!fd_budget::may_take(3, fd())) {
            become_plain("the shim's share of file descriptors is in use");
            ended = true;
            return false;
        }
        if (config_.fault == "client-listen" || !rv_->client_listen(fd())) {
            if (rv_->stay_plain()) mark_tcp_only(rv_->why().c_str());
            become_plain(rv_->stay_plain() ? rv_->why().c_str() : "cannot publish the side-channel name");
            ended = true;
            return false;
        }
        offer_wait_since_us_ = next_look_us_ = wait::now_us();  // (the server cannot have found it yet: look at the next call)
        rv_calls_ = 0;
        return false;
    }
    const int64_t now = wait::now_us();
    if (now < next_look_us_) return false;
    next_look_us_ = now + kLookEveryUs;
    if (!rv_->offer_held() && rendezvous_gave_up()) {
        become_plain("the server made no offer");
        ended = true;
        return false;
    }
    return true;
}

// Server, rv_pending: at once, or (discovery deferred) once the connection has
// lived and the next try is due.
bool Connection::server_may_offer_now() {
    if (!discovery_deferred_) return true;
    if (offer_tries_ == 0) return discovery_due();
    return wait::now_us() >= next_look_us_;
}

// Lived RDMASOCK_SHM_AFTER_US, and made kDiscoveryCalls calls: a time alone
// does not tell a short connection from a long one on a busy machine (ab's
// one-request connections live for milliseconds beside 19 others on 2 CPUs);
// a connection that sends and reads a few times more than one exchange does
// is worth asking about. Counted at each call that steps the rendezvous.
bool Connection::discovery_due() {
    constexpr int kDiscoveryCalls = 8;
    if (discovery_calls_ < kDiscoveryCalls) ++discovery_calls_;
    return discovery_calls_ >= kDiscoveryCalls && shm_due();
}

void Connection::switch_tx_locked() {
    if (tx_switched_.load(std::memory_order_relaxed) || tx_back()) return;
    tx_switched_.store(true, std::memory_order_relaxed);
    if (auto* sw = transport_->tx_switch()) {
        sw->store(tcp_tx_, std::memory_order_release);
        RS_LOG(debug, "fd %d: sends switch to the ring after %llu TCP bytes", fd(), static_cast<unsigned long long>(tcp_tx_));
        ring_doorbell();  // a peer asleep on TCP must look at the switch offset
    }
}

bool Connection::rx_on_tcp() {
    if (rx_back()) return true;  // the peer's bytes after our place come over TCP now
    auto* sw = transport_->rx_switch();
    if (!sw) return false;
    uint64_t at = rx_switch_at_.load(std::memory_order_acquire);
    if (at == RingControl::kNotSwitched) {
        at = sw->load(std::memory_order_acquire);
        if (at == RingControl::kNotSwitched) return true;
        if (at < tcp_rx_.load(std::memory_order_relaxed)) {
            // We already read more than that over TCP: the peer lies about the past.
            RS_LOG(error, "fd %d: peer switch offset %llu is behind the %llu bytes received; resetting", fd(),
                   static_cast<unsigned long long>(at), static_cast<unsigned long long>(tcp_rx_.load()));
            peer_reset_.store(true);
            rx_switch_at_.store(tcp_rx_.load());
            return false;
        }
        rx_switch_at_.store(at, std::memory_order_release);
    }
    return tcp_rx_.load(std::memory_order_relaxed) < at;
}

short Connection::tcp_events(short events) {
    pollfd p{fd(), events, 0};
    const int saved = errno;
    const int n = ops_.poll(&p, 1, 0);
    errno = saved;
    return n < 0 ? static_cast<short>(POLLNVAL) : p.revents;
}

bool Connection::tcp_readable() {
    pollfd p{fd(), POLLIN, 0};
    return ops_.poll(&p, 1, 0) > 0;
}

// Side-channel transports: the doorbell is a socket pair (shm_doorbell.hpp). After the peer switched,
// its TCP stream carries nothing but the end of the connection, so a byte found
// there was written around the shim: never dropped, never taken for data out of
// order; the connection is reset loudly instead.
bool Connection::fin_peer_gone() {
    if (!peer_fin_.load()) return false;
    if (peer_gone_.load() || peer_inode_ == 0) return true;
    const int64_t now = now_us();
    int64_t last = fin_checked_us_.load(std::memory_order_relaxed);
    if (now - last < 100000 || !fin_checked_us_.compare_exchange_strong(last, now)) return false;
    sockaddr_storage local{}, remote{};
    socklen_t l1 = sizeof local, l2 = sizeof remote;
    peer_check::SocketId id;
    std::string err;
    int saved = errno;
    bool gone = kernel::getsockname(fd(), reinterpret_cast<sockaddr*>(&local), &l1) != 0 ||
                kernel::getpeername(fd(), reinterpret_cast<sockaddr*>(&remote), &l2) != 0 ||
                !peer_check::find_socket(remote, local, id, err) || id.inode != peer_inode_;
    errno = saved;
    if (gone) {
        RS_LOG(debug, "fd %d: the peer's socket is gone after its FIN", fd());
        peer_gone_.store(true);  // for good
    }
    return gone;
}

bool Connection::reader_gone() { return peer_closed_.load() || fin_peer_gone(); }

}  // namespace rdmasock

namespace rdmasock {

// The program's descriptor table is full (sys/fd_budget.hpp): a rendezvous that
// made no rings gives its side-channel sockets back. No byte moved off TCP yet,
// so the connection simply stays there, as begin_hand_over does in these phases.
bool Connection::give_back_side_channel(const char* why) {
    auto early = [](Phase p) { return p == Phase::rv_listen || p == Phase::rv_offered; };
    if (!early(phase())) return false;
    signals::DeferHandlers held;  // a handler on this thread must not wait for handshake_mu_
    std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
    if (!early(phase())) return false;
    become_plain(why);
    return true;
}

}  // namespace rdmasock
