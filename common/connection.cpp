#include "connection.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "log.hpp"
#include "rdma_setup.hpp"
#include "shm_transport.hpp"

namespace rdmasock {

namespace {

std::atomic<int> g_pid{0};

int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

inline void cpu_relax() { __builtin_ia32_pause(); }

// How long a waiter watches the ring after the transport said "bytes in flight"
// before asking the peer again (see wait_for).
constexpr int64_t kInFlightSpinUs = 50;

size_t iov_total(const iovec* iov, int n) {
    size_t t = 0;
    for (int i = 0; i < n; ++i) t += iov[i].iov_len;
    return t;
}

// A copy of an iovec array advanced by `skip` bytes (for resuming partial I/O).
struct IovCursor {
    iovec v[64];
    int n = 0;
    IovCursor(const iovec* iov, int cnt, size_t skip) {
        for (int i = 0; i < cnt && n < 64; ++i) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            v[n].iov_base = static_cast<uint8_t*>(iov[i].iov_base) + skip;
            v[n].iov_len = iov[i].iov_len - skip;
            skip = 0;
            ++n;
        }
    }
};

void raise_sigpipe(int flags) {
    if (!(flags & MSG_NOSIGNAL)) pthread_kill(pthread_self(), SIGPIPE);
}

}  // namespace

int current_pid() {
    int p = g_pid.load(std::memory_order_relaxed);
    if (p == 0) {
        p = static_cast<int>(getpid());
        g_pid.store(p, std::memory_order_relaxed);
    }
    return p;
}
void refresh_current_pid() { g_pid.store(static_cast<int>(getpid()), std::memory_order_relaxed); }

const char* to_string(Phase p) {
    switch (p) {
        case Phase::undecided: return "undecided";
        case Phase::offered: return "offered";
        case Phase::accepted: return "accepted";
        case Phase::strip_hello: return "strip_hello";
        case Phase::upgraded: return "upgraded";
        case Phase::plain: return "plain";
        case Phase::failed: return "failed";
        case Phase::rv_listen: return "rv_listen";
        case Phase::rv_pending: return "rv_pending";
        case Phase::rv_offered: return "rv_offered";
        case Phase::rv_accepted: return "rv_accepted";
    }
    return "?";
}

Connection::Connection(int fd, Role role, bool nonblocking, const Config& config, const SocketOps& ops)
    : fd_(fd), role_(role), nonblocking_(nonblocking), config_(config), ops_(ops),
      spin_(config.spin_us, config.spin_max_us) {
    // A client stays plain unless set_offer() finds a shimmed peer.
    if (role == Role::client) phase_.store(Phase::plain);
}

Connection::~Connection() = default;

void Connection::set_offer(uint32_t offers) {
    offers_ = offers;
    phase_.store(offers ? Phase::undecided : Phase::plain, std::memory_order_release);
}

static ShmRendezvous::Options rendezvous_options(const Config& c) {
    ShmRendezvous::Options o;
    o.ring_bytes = c.ring_bytes;
    o.same_user_only = c.shm_same_user_only;
    o.fault = c.fault;
    return o;
}

bool Connection::start_rendezvous_client() {
    auto rv = std::make_unique<ShmRendezvous>(rendezvous_options(config_));
    if (config_.fault == "client-listen" || !rv->client_listen(fd_)) return false;
    rv_ = std::move(rv);
    side_tried_ = true;
    phase_.store(Phase::rv_listen, std::memory_order_release);
    return true;
}

void Connection::start_rendezvous_server() {
    rv_ = std::make_unique<ShmRendezvous>(rendezvous_options(config_));
    side_tried_ = true;
    phase_.store(Phase::rv_pending, std::memory_order_release);
}

int Connection::wake_fd() const {
    Phase p = phase();
    return (p == Phase::rv_accepted || p == Phase::upgraded) ? transport_->wake_fd() : -1;
}

void Connection::set_timeouts(int64_t recv_us, int64_t send_us) {
    if (recv_us >= 0) recv_timeout_us_ = recv_us;
    if (send_us >= 0) send_timeout_us_ = send_us;
}

int64_t Connection::timeout_for(bool write) const {
    int64_t t = write ? send_timeout_us_ : recv_timeout_us_;
    return t > 0 ? t : -1;
}

bool Connection::owned_by_this_process() const { return owner_pid_ == 0 || owner_pid_ == current_pid(); }

// ---------------------------------------------------------------- handshake

handshake::ParseResult Connection::peek_message(bool* eof, bool* empty) {
    uint8_t buf[handshake::kMaxMessage];
    *eof = *empty = false;
    ssize_t n = ops_.recv(fd_, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) *eof = true;
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) *empty = true;
        else *eof = true;  // the app's own next call reports the error
    }
    if (n <= 0) return {};
    auto r = handshake::parse(buf, static_cast<size_t>(n));
    if (r.status == handshake::Parse::need_more) {
        int64_t now = now_us() / 1000;
        if (need_more_since_ms_ == 0) need_more_since_ms_ = now;
        if (now - need_more_since_ms_ > static_cast<int64_t>(config_.handshake_timeout_ms)) {
            r.status = handshake::Parse::not_handshake;
            r.why = "incomplete handshake message timed out";
        }
    } else {
        need_more_since_ms_ = 0;
    }
    if (r.status == handshake::Parse::not_handshake && !r.why.empty())
        RS_LOG(warn, "fd %d: ignoring malformed handshake (%s); bytes stay application data", fd_, r.why.c_str());
    return r;
}

bool Connection::consume(size_t n) {
    uint8_t buf[handshake::kMaxMessage];
    while (n > 0) {
        ssize_t r = ops_.recv(fd_, buf, std::min(n, sizeof buf), MSG_DONTWAIT);
        if (r <= 0) return false;  // peeked bytes cannot vanish; treat as a broken stream
        n -= static_cast<size_t>(r);
    }
    return true;
}

bool Connection::send_message(const handshake::Message& m) {
    auto bytes = handshake::encode(m);
    size_t sent = 0;
    for (int spins = 0; sent < bytes.size() && spins < 1000; ++spins) {
        ssize_t w = ops_.send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            sent += static_cast<size_t>(w);
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
        pollfd p{fd_, POLLOUT, 0};
        ops_.poll(&p, 1, 10);
    }
    RS_LOG(debug, "fd %d: sent %s", fd_, handshake::to_string(m.type));
    return sent == bytes.size();
}

void Connection::become_plain(const char* why) {
    fallback_reason_ = why;
    pending_.reset();
    if (rv_) rv_->close();
    // A transport handed over but never switched to stays alive (unused) until
    // the connection ends: its eventfd may still be registered in an epoll set.
    phase_.store(Phase::plain, std::memory_order_release);
    RS_LOG(info, "fd %d: staying on tcp (%s)", fd_, why);
}

void Connection::become_failed(const char* why) {
    fallback_reason_ = why;
    pending_.reset();
    phase_.store(Phase::failed, std::memory_order_release);
    ::shutdown(fd_, SHUT_RDWR);
    RS_LOG(warn, "fd %d: handshake violated (%s); connection reset", fd_, why);
}

// Doorbells and handshake messages are single small segments: Nagle would hold
// them back for a delayed ACK (~40 ms). After the upgrade the TCP stream carries
// nothing else, so this changes no application-visible behaviour of the data.
static void no_delay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void Connection::upgrade(std::unique_ptr<Transport> t) {
    no_delay(fd_);
    transport_ = std::move(t);
    owner_pid_ = current_pid();
    phase_.store(Phase::upgraded, std::memory_order_release);
    RS_LOG(info, "fd %d: upgraded to %s", fd_, transport_->name());
}

bool Connection::progress_client_offer() {
    pollfd p{fd_, POLLOUT, 0};
    if (ops_.poll(&p, 1, 0) < 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) {
        become_plain("connect failed");
        return true;
    }
    if (!(p.revents & POLLOUT)) return false;  // still connecting
    // The server already spoke (a banner, or it wrote and closed): a HELLO now
    // would sit unread in its socket and its close would become a RST that
    // destroys these bytes. A server that writes first stays on TCP anyway.
    uint8_t first;
    if (ops_.recv(fd_, &first, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
        become_plain("server spoke first");
        return true;
    }
    handshake::Message hello;
    hello.type = handshake::Type::hello;
    if (offers_ & handshake::kOfferRdma) {
        // The QP and the rings exist before the HELLO: it carries their addresses.
        std::string err;
        pending_ = rdma_setup::offer(config_, hello.rdma, err);
        if (!pending_) {
            offers_ &= ~handshake::kOfferRdma;
            if (offers_ == 0) {
                become_plain(("no RDMA: " + err).c_str());  // nothing sent: the server sees a plain client
                return true;
            }
            RS_LOG(info, "fd %d: not offering rdma: %s", fd_, err.c_str());
        }
    }
    hello.offers = offers_;
    hello.uid = static_cast<uint32_t>(geteuid());
    hello.ring_bytes = config_.ring_bytes;
    hello.boot_id = handshake::local_boot_id();
    if (config_.fault == "client-hello" || !send_message(hello)) {
        become_failed("could not send HELLO");
        return true;
    }
    phase_.store(Phase::offered, std::memory_order_release);
    return true;
}

bool Connection::progress_client_reply() {
    bool eof, empty;
    auto r = peek_message(&eof, &empty);
    if (empty || r.status == handshake::Parse::need_more) return false;
    if (eof) {
        become_plain("server closed during the handshake");
        return true;
    }
    if (r.status == handshake::Parse::not_handshake) {
        become_plain("server does not speak the protocol");
        return true;
    }
    const auto& m = r.message;
    if (m.type == handshake::Type::decline) {
        consume(r.consumed);
        become_plain(handshake::to_string(m.reason));
        return true;
    }
    if (m.type != handshake::Type::accept || m.version != handshake::kVersion) {
        consume(r.consumed);
        become_failed("unexpected reply to HELLO");
        return true;
    }
    consume(r.consumed);
    std::string err;
    std::unique_ptr<Transport> t;
    if (m.transport == handshake::kOfferShm && (offers_ & handshake::kOfferShm)) {
        std::unique_ptr<ShmChannel> ch;
        if (config_.fault != "client-attach") ch = ShmChannel::attach(m.name, m.ring_bytes, err);
        else err = "fault injection client-attach";
        if (ch) {
            ch->unlink();  // both sides have it mapped now; the name has done its job
            t = std::make_unique<ShmTransport>(std::move(ch));
        }
    } else if (m.transport == handshake::kOfferRdma && pending_) {
        if (rdma_setup::complete(config_, *pending_, m.rdma, err)) t = std::move(pending_);
    } else {
        err = "the server accepted a transport we did not offer";
    }
    pending_.reset();
    handshake::Message reply;
    if (!t) {
        reply.type = handshake::Type::abort;
        reply.reason = handshake::Reason::setup_failed;
        if (!send_message(reply)) become_failed("could not send ABORT");
        else become_plain(("could not set up the accepted transport: " + err).c_str());
        return true;
    }
    reply.type = handshake::Type::ready;
    if (!send_message(reply)) {
        become_failed("could not send READY");
        return true;
    }
    upgrade(std::move(t));
    return true;
}

bool Connection::progress_server_hello(bool app_wants_to_write) {
    bool eof, empty;
    auto r = peek_message(&eof, &empty);
    if (empty) {
        if (!app_wants_to_write) return false;
        // The app speaks first: its bytes go out on TCP now; a shimmed client
        // will see them instead of a reply and stay on TCP too.
        phase_.store(Phase::strip_hello, std::memory_order_release);
        return true;
    }
    if (r.status == handshake::Parse::need_more) return false;
    if (eof || r.status == handshake::Parse::not_handshake || r.message.type != handshake::Type::hello) {
        become_plain(eof ? "client closed before sending" : "client does not speak the protocol");
        return true;
    }
    consume(r.consumed);
    const auto& m = r.message;
    handshake::Message reply;
    reply.type = handshake::Type::decline;
    if (m.version != handshake::kVersion) reply.reason = handshake::Reason::bad_version;
    else if (config_.transport == TransportChoice::tcp) reply.reason = handshake::Reason::disabled;
    else {
        // Same host and same user: shared memory. Otherwise RDMA, if offered.
        // Shared memory is never negotiated in band any more: only the side channel
        // proves that the peer holds this very connection (shm_rendezvous.hpp). An
        // in-band shm offer is declined like any transport we do not have.
        const bool want_shm = false;
        const bool want_rdma = (m.offers & handshake::kOfferRdma) && config_.transport != TransportChoice::shm;
        auto shm_refusal = handshake::Reason::none;
        if (m.uid != static_cast<uint32_t>(geteuid())) shm_refusal = handshake::Reason::other_user;
        else if (m.boot_id != handshake::local_boot_id()) shm_refusal = handshake::Reason::other_host;
        reply.reason = want_shm ? shm_refusal : handshake::Reason::no_transport;
        if (config_.fault == "server-setup") reply.reason = handshake::Reason::setup_failed;
        else if (want_shm && shm_refusal == handshake::Reason::none) accept_shm(m, reply);
        if (reply.type != handshake::Type::accept && want_rdma && config_.fault != "server-setup") accept_rdma(m, reply);
    }
    if (!send_message(reply)) {
        become_failed("could not send the reply to HELLO");
        return true;
    }
    if (reply.type == handshake::Type::decline) become_plain(handshake::to_string(reply.reason));
    else phase_.store(Phase::accepted, std::memory_order_release);
    return true;
}

void Connection::accept_shm(const handshake::Message& hello, handshake::Message& reply) {
    uint64_t ring = ring::valid_capacity(hello.ring_bytes) ? std::min(hello.ring_bytes, config_.ring_bytes) : config_.ring_bytes;
    std::string err;
    auto ch = ShmChannel::create(ring, err);
    if (!ch) {
        RS_LOG(warn, "fd %d: cannot create a shared-memory segment: %s", fd_, err.c_str());
        reply.reason = handshake::Reason::setup_failed;
        return;
    }
    reply.type = handshake::Type::accept;
    reply.transport = handshake::kOfferShm;
    reply.ring_bytes = ring;
    reply.name = ch->name();
    pending_ = std::make_unique<ShmTransport>(std::move(ch));
}

void Connection::accept_rdma(const handshake::Message& hello, handshake::Message& reply) {
    std::string err;
    auto t = rdma_setup::accept(config_, hello.rdma, reply.rdma, err);
    if (!t) {
        RS_LOG(warn, "fd %d: declining rdma: %s", fd_, err.c_str());
        reply.reason = handshake::Reason::setup_failed;
        return;
    }
    reply.type = handshake::Type::accept;
    reply.transport = handshake::kOfferRdma;
    reply.ring_bytes = config_.ring_bytes;
    pending_ = std::move(t);
}

bool Connection::progress_server_ready() {
    bool eof, empty;
    auto r = peek_message(&eof, &empty);
    if (empty || r.status == handshake::Parse::need_more) return false;
    if (eof) {
        become_plain("client closed during the handshake");
        return true;
    }
    if (r.status != handshake::Parse::complete || r.message.version != handshake::kVersion ||
        (r.message.type != handshake::Type::ready && r.message.type != handshake::Type::abort)) {
        become_failed("expected READY or ABORT after ACCEPT");
        return true;
    }
    consume(r.consumed);
    if (r.message.type == handshake::Type::abort) {
        become_plain("client could not set up the transport");
        return true;
    }
    pending_->on_peer_ready();
    upgrade(std::move(pending_));
    return true;
}

bool Connection::progress_strip_hello() {
    bool eof, empty;
    auto r = peek_message(&eof, &empty);
    if (empty || r.status == handshake::Parse::need_more) return false;
    if (r.status == handshake::Parse::complete && r.message.type == handshake::Type::hello) consume(r.consumed);
    become_plain("application spoke first");
    return true;
}

// One step of the side-channel rendezvous. `may_syscall` false (readiness
// queries): only look at shared memory.
bool Connection::progress_rendezvous(bool may_syscall) {
    using R = ShmRendezvous::Result;
    std::unique_ptr<Transport> t;
    // A reader blocked in the kernel on the TCP socket (tcp_recv holds read_mu_)
    // would sleep through the switch it cannot see: no step while one is there.
    // It comes back with the peer's next TCP byte and takes the step itself.
    std::unique_lock<std::mutex> no_reader(read_mu_, std::defer_lock);
    if (may_syscall && !no_reader.try_lock()) return false;
    switch (phase()) {
        case Phase::rv_listen: {
            if (!may_syscall) return false;
            R r = rv_->client_step(fd_, t);
            if (r == R::waiting) return false;
            if (r == R::failed) {
                become_plain(rv_->why().c_str());
                return true;
            }
            transport_ = std::move(t);
            owner_pid_ = current_pid();
            phase_.store(Phase::rv_accepted, std::memory_order_release);
            RS_LOG(debug, "fd %d: side channel: rings handed to the server", fd_);
            return true;
        }
        case Phase::rv_pending: {
            if (!may_syscall) return false;
            R r = config_.fault == "server-offer" ? R::failed : rv_->server_offer(fd_);
            if (r == R::waiting) {
                phase_.store(Phase::rv_offered, std::memory_order_release);
                return true;
            }
            rv_.reset();
            side_tried_ = false;
            // No side channel: the client may still speak in band (an RDMA HELLO, which
            // must be answered, even if only to decline it, never passed on as data).
            phase_.store(Phase::undecided, std::memory_order_release);
            return true;
        }
        case Phase::rv_offered: {
            if (!may_syscall) return false;
            R r = rv_->server_step(fd_, t);
            if (r == R::waiting) return false;
            if (r == R::failed) {
                become_plain(rv_->why().c_str());
                return true;
            }
            rv_.reset();
            upgrade(std::move(t));
            return true;
        }
        case Phase::rv_accepted: {
            // The server's switch offset is its acceptance.
            if (transport_->rx_switch()->load(std::memory_order_acquire) != RingControl::kNotSwitched) {
                if (may_syscall) rv_.reset();
                no_delay(fd_);
                phase_.store(Phase::upgraded, std::memory_order_release);
                RS_LOG(info, "fd %d: upgraded to %s (side channel)", fd_, transport_->name());
                return true;
            }
            if (!may_syscall) return false;
            auto r = rv_->client_confirmed();
            if (r == R::waiting) return false;
            if (r == R::failed) {
                become_plain(rv_->why().c_str());
                return true;
            }
            no_delay(fd_);
            phase_.store(Phase::upgraded, std::memory_order_release);
            RS_LOG(info, "fd %d: upgraded to %s (side channel)", fd_, transport_->name());
            return true;
        }
        default: return false;
    }
}

bool Connection::progress_locked(bool app_wants_to_write) {
    switch (phase()) {
        case Phase::rv_listen:
        case Phase::rv_pending:
        case Phase::rv_offered:
        case Phase::rv_accepted: return progress_rendezvous(true);
        case Phase::undecided:
            return role_ == Role::client ? progress_client_offer() : progress_server_hello(app_wants_to_write);
        case Phase::offered: return progress_client_reply();
        case Phase::accepted: return progress_server_ready();
        case Phase::strip_hello: return progress_strip_hello();
        default: return false;
    }
}

bool Connection::progress() {
    Phase ph = phase();
    if (ph == Phase::plain || ph == Phase::upgraded || ph == Phase::failed) return false;
    std::lock_guard<std::mutex> lk(handshake_mu_);
    if (ph == Phase::rv_listen || ph == Phase::rv_pending || ph == Phase::rv_offered || ph == Phase::rv_accepted)
        return progress_rendezvous(false);  // a readiness query does no I/O
    return progress_locked(false);
}

// Drives the handshake to a phase where the app's call can proceed. The thread
// that waits for handshake bytes holds handshake_mu_ across its poll, so no
// other thread can consume the message it is waiting for; the poll is short so
// the others get their turn.
bool Connection::settle(int flags, bool for_write) {
    const bool nb = nonblocking() || (flags & MSG_DONTWAIT);
    const int64_t timeout = timeout_for(for_write);
    const int64_t start = now_us();
    for (;;) {
        std::lock_guard<std::mutex> lk(handshake_mu_);
        while (progress_locked(for_write)) {}
        Phase ph = phase();
        if (ph == Phase::upgraded || ph == Phase::plain || ph == Phase::failed) return true;
        if (for_write && ph == Phase::strip_hello) return true;
        // The side-channel rendezvous never holds an application call back.
        if (ph == Phase::rv_listen || ph == Phase::rv_pending || ph == Phase::rv_offered || ph == Phase::rv_accepted)
            return true;
        if (nb) {
            errno = EAGAIN;
            return false;
        }
        int ms = 50;
        if (timeout > 0) {
            int64_t left = timeout - (now_us() - start);
            if (left <= 0) {
                errno = EAGAIN;
                return false;
            }
            ms = std::min<int64_t>(ms, (left + 999) / 1000);
        }
        short ev = (role_ == Role::client && ph == Phase::undecided) ? POLLOUT : POLLIN;
        pollfd p{fd_, ev, 0};
        ops_.poll(&p, 1, ms);
    }
}

// ---------------------------------------------------------------- data path

ssize_t Connection::send(const iovec* iov, int iovcnt, int flags) {
    if (!settle(flags, true)) return -1;
    switch (phase()) {
        case Phase::failed: errno = ECONNRESET; return -1;
        case Phase::upgraded: return ring_send(iov, iovcnt, flags);
        case Phase::rv_listen:
        case Phase::rv_pending:
        case Phase::rv_offered:
        case Phase::rv_accepted: return tcp_send(iov, iovcnt, flags);
        default: break;  // plain or strip_hello: the kernel carries it
    }
    if (side_tried_) return tcp_send(iov, iovcnt, flags);  // it counts its bytes
    msghdr mh{};
    mh.msg_iov = const_cast<iovec*>(iov);
    mh.msg_iovlen = static_cast<size_t>(iovcnt);
    return ops_.sendmsg(fd_, &mh, flags);
}

ssize_t Connection::recv(const iovec* iov, int iovcnt, int flags) {
    if (!settle(flags, false)) return -1;
    switch (phase()) {
        case Phase::failed: errno = ECONNRESET; return -1;
        case Phase::upgraded:
        case Phase::rv_accepted: return ring_recv(iov, iovcnt, flags);
        case Phase::rv_listen:
        case Phase::rv_pending:
        case Phase::rv_offered: return tcp_recv(iov, iovcnt, flags);
        default: break;
    }
    if (side_tried_) return tcp_recv(iov, iovcnt, flags);  // it counts its bytes
    msghdr mh{};
    mh.msg_iov = const_cast<iovec*>(iov);
    mh.msg_iovlen = static_cast<size_t>(iovcnt);
    return ops_.recvmsg(fd_, &mh, flags);
}

// A transport that broke after the upgrade (RDMA: a queue-pair error, the
// device gone) ends the connection as a TCP reset would: ECONNRESET here, and
// an abort byte on the doorbell stream, so a peer asleep in the kernel learns
// it too instead of waiting for records that will never come.
bool Connection::transport_failed() {
    if (!transport_->failed()) return false;
    if (!failure_reported_.exchange(true)) {
        RS_LOG(warn, "fd %d: %s transport failed; reporting a reset", fd_, transport_->name());
        const char b = kAbortByte;
        ops_.send(fd_, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        peer_reset_.store(true);
    }
    return true;
}

// ---------------------------------------------------------------- side-channel data path

ssize_t Connection::tcp_send(const iovec* iov, int iovcnt, int flags) {
    std::lock_guard<std::mutex> lk(write_mu_);
    msghdr mh{};
    mh.msg_iov = const_cast<iovec*>(iov);
    mh.msg_iovlen = static_cast<size_t>(iovcnt);
    ssize_t n = ops_.sendmsg(fd_, &mh, flags);
    if (n > 0) tcp_tx_ += static_cast<uint64_t>(n);
    return n;
}

ssize_t Connection::tcp_recv(const iovec* iov, int iovcnt, int flags) {
    ssize_t n;
    {
        std::unique_lock<std::mutex> lk(read_mu_);
        const Phase ph = phase();
        if (ph != Phase::rv_listen && ph != Phase::rv_pending && ph != Phase::rv_offered && ph != Phase::plain) {
            lk.unlock();  // another thread moved the rendezvous on meanwhile
            return recv(iov, iovcnt, flags);
        }
        msghdr mh{};
        mh.msg_iov = const_cast<iovec*>(iov);
        mh.msg_iovlen = static_cast<size_t>(iovcnt);
        n = ops_.recvmsg(fd_, &mh, flags);
        if (n > 0 && !(flags & MSG_PEEK)) tcp_rx_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    }
    // A shimmed server offers before its first byte leaves (shm_rendezvous.hpp):
    // server bytes without an OFFER mean a server without the shim. A client that
    // only sends gives up after a bounded number of calls.
    int saved = errno;
    if (phase() == Phase::rv_listen && (n > 0 || ++rv_calls_ > 64)) {
        std::lock_guard<std::mutex> lk(handshake_mu_);
        if (!progress_rendezvous(true) && phase() == Phase::rv_listen) become_plain("the server made no offer");
    }
    errno = saved;
    return n;
}

void Connection::switch_tx_locked() {
    if (tx_switched_) return;
    tx_switched_ = true;
    if (auto* sw = transport_->tx_switch()) {
        sw->store(tcp_tx_, std::memory_order_release);
        RS_LOG(debug, "fd %d: sends switch to the ring after %llu TCP bytes", fd_, static_cast<unsigned long long>(tcp_tx_));
        ring_doorbell();  // a peer asleep on TCP must look at the switch offset
    }
}

bool Connection::rx_on_tcp() {
    auto* sw = transport_->rx_switch();
    if (!sw) return false;
    uint64_t at = rx_switch_at_.load(std::memory_order_acquire);
    if (at == RingControl::kNotSwitched) {
        at = sw->load(std::memory_order_acquire);
        if (at == RingControl::kNotSwitched) return true;
        if (at < tcp_rx_.load(std::memory_order_relaxed)) {
            // We already read more than that over TCP: the peer lies about the past.
            RS_LOG(error, "fd %d: peer switch offset %llu is behind the %llu bytes received; resetting", fd_,
                   static_cast<unsigned long long>(at), static_cast<unsigned long long>(tcp_rx_.load()));
            peer_reset_.store(true);
            rx_switch_at_.store(tcp_rx_.load());
            return false;
        }
        rx_switch_at_.store(at, std::memory_order_release);
    }
    return tcp_rx_.load(std::memory_order_relaxed) < at;
}

bool Connection::tcp_readable() {
    pollfd p{fd_, POLLIN, 0};
    return ops_.poll(&p, 1, 0) > 0;
}

// Side-channel transports: the doorbell is the eventfd. After the peer switched,
// its TCP stream carries nothing but the end of the connection, so a byte found
// there was written around the shim: never dropped, never taken for data out of
// order; the connection is reset loudly instead.
void Connection::drain_side_channel_locked() {
    transport_->drain_wake();
    if (peer_closed_.load() || rx_on_tcp()) return;
    char b;
    ssize_t n = ops_.recv(fd_, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) {
        RS_LOG(debug, "fd %d: peer closed its socket", fd_);
        peer_closed_.store(true);
    } else if (n > 0) {
        RS_LOG(error, "fd %d: bytes on the TCP stream after the switch to the ring (written around the shim); resetting", fd_);
        peer_reset_.store(true);
        peer_closed_.store(true);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        peer_reset_.store(true);
        peer_closed_.store(true);
    }
}

void Connection::ring_doorbell() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!transport_->take_peer_reader_waiting()) return;
    if (transport_->wake_fd() >= 0) return transport_->ring_peer();
    char b = 1;
    if (ops_.send(fd_, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && (errno == EPIPE || errno == ECONNRESET)) {
        RS_LOG(debug, "fd %d: doorbell failed: %s", fd_, strerror(errno));
        peer_reset_.store(true);
    }
}

ssize_t Connection::ring_send(const iovec* iov, int iovcnt, int flags) {
    std::lock_guard<std::mutex> lk(write_mu_);
    if (!owned_by_this_process()) {
        errno = EIO;  // documented: an upgraded connection belongs to the process that upgraded it
        return -1;
    }
    switch_tx_locked();
    const size_t want = iov_total(iov, iovcnt);
    const bool nb = nonblocking() || (flags & MSG_DONTWAIT);
    auto& w = transport_->writer();
    size_t total = 0;
    for (;;) {
        if (shut_wr_ || transport_failed() || peer_reset_.load() || w.status() == ring::RingStatus::broken) {
            if (total > 0) return static_cast<ssize_t>(total);
            RS_LOG(debug, "fd %d: send refused: shut_wr=%d reset=%d closed=%d ring=%s", fd_, shut_wr_, peer_reset_.load(),
                   peer_closed_.load(), ring::to_string(w.status()));
            errno = shut_wr_ || peer_reset_.load() ? EPIPE : ECONNRESET;
            if (errno == EPIPE) raise_sigpipe(flags);
            return -1;
        }
        IovCursor cur(iov, iovcnt, total);
        auto r = w.writev(cur.v, cur.n);
        if (r.bytes > 0) {
            total += r.bytes;
            tx_bytes_ += r.bytes;
            ring_doorbell();
            if (total == want) return static_cast<ssize_t>(total);
            continue;
        }
        if (r.status == ring::RingStatus::broken) {
            RS_LOG(warn, "fd %d: send ring broken: %s", fd_, w.error().c_str());
            continue;
        }
        if (want == 0) return 0;
        send_full_.fetch_add(1, std::memory_order_relaxed);
        if (nb) {
            if (total > 0) return static_cast<ssize_t>(total);
            errno = EAGAIN;
            return -1;
        }
        auto res = wait_for([&] { return w.has_space() || peer_reset_.load() || peer_closed_.load() || transport_->failed(); }, false,
                            timeout_for(true));
        if (res == Wait::timeout) {
            if (total > 0) return static_cast<ssize_t>(total);
            errno = EAGAIN;
            return -1;
        }
        if (peer_closed_.load() && !w.has_space()) peer_reset_.store(true);  // nobody will ever read
    }
}

ssize_t Connection::ring_recv(const iovec* iov, int iovcnt, int flags) {
    std::lock_guard<std::mutex> lk(read_mu_);
    if (!owned_by_this_process()) {
        errno = EIO;
        return -1;
    }
    if (shut_rd_) return 0;
    const bool peek = flags & MSG_PEEK;
    const bool waitall = (flags & MSG_WAITALL) && !peek;
    const bool nb = nonblocking() || (flags & MSG_DONTWAIT);
    const size_t want = iov_total(iov, iovcnt);
    auto& rd = transport_->reader();
    size_t total = 0;
    for (;;) {
        if (rx_on_tcp()) {
            // Bytes the peer sent before its switch: from TCP, never past the offset.
            uint64_t at = rx_switch_at_.load(std::memory_order_acquire);
            size_t room = want - total;
            if (at != RingControl::kNotSwitched) room = std::min<uint64_t>(room, at - tcp_rx_.load());
            IovCursor cur(iov, iovcnt, total);
            size_t keep = 0;
            int n = 0;
            for (; n < cur.n && keep < room; ++n) {
                if (cur.v[n].iov_len > room - keep) cur.v[n].iov_len = room - keep;
                keep += cur.v[n].iov_len;
            }
            msghdr mh{};
            mh.msg_iov = cur.v;
            mh.msg_iovlen = static_cast<size_t>(n);
            ssize_t got = want == 0 ? 0 : ops_.recvmsg(fd_, &mh, (flags & (MSG_PEEK | MSG_TRUNC)) | MSG_DONTWAIT);
            if (got > 0) {
                total += static_cast<size_t>(got);
                if (!peek) tcp_rx_.fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
                if (!waitall || total == want) return static_cast<ssize_t>(total);
                continue;
            }
            if (got == 0) return static_cast<ssize_t>(total);  // end of stream before the switch
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                if (total > 0) return static_cast<ssize_t>(total);
                return -1;
            }
            if (nb) {
                if (total > 0) return static_cast<ssize_t>(total);
                errno = EAGAIN;
                return -1;
            }
            auto res = wait_for([&] { return !rx_on_tcp() || tcp_readable(); }, true, timeout_for(false));
            if (res == Wait::timeout) {
                if (total > 0) return static_cast<ssize_t>(total);
                errno = EAGAIN;
                return -1;
            }
            continue;
        }
        IovCursor cur(iov, iovcnt, total);
        auto r = rd.readv(cur.v, cur.n, !peek);
        if (r.bytes > 0) {
            total += r.bytes;
            if (!peek) {
                rx_bytes_ += r.bytes;
                if (rd.unpublished() == 0) {  // we just told the writer about free space
                    std::atomic_thread_fence(std::memory_order_seq_cst);
                    if (transport_->take_peer_writer_waiting()) {
                        if (transport_->wake_fd() >= 0) {
                            transport_->ring_peer();
                        } else {
                            char b = 1;
                            ops_.send(fd_, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                        }
                    }
                }
            }
            if (!waitall || total == want) return static_cast<ssize_t>(total);
            continue;
        }
        if (want == 0) return 0;
        if (r.status == ring::RingStatus::eof) {
            RS_LOG(debug, "fd %d: end of stream record", fd_);
            return static_cast<ssize_t>(total);
        }
        if (r.status == ring::RingStatus::broken) {
            RS_LOG(warn, "fd %d: receive ring broken: %s", fd_, rd.error().c_str());
            if (total > 0) return static_cast<ssize_t>(total);
            errno = ECONNRESET;
            return -1;
        }
        if ((transport_failed() || peer_reset_.load()) && !peer_closed_.load()) {
            if (total > 0) return static_cast<ssize_t>(total);
            errno = ECONNRESET;
            return -1;
        }
        if (peer_closed_.load()) {  // EOF after the last record
            RS_LOG(debug, "fd %d: peer gone, end of stream", fd_);
            return static_cast<ssize_t>(total);
        }
        if (nb && total == 0 && !peer_closed_.load()) {
            // Without a poll nobody drains the doorbell stream: look for the
            // peer's EOF here so a nonblocking reader is not told EAGAIN forever.
            std::unique_lock<std::mutex> dl(drain_mu_, std::try_to_lock);
            if (dl.owns_lock()) drain_locked();
            if (peer_closed_.load() && rd.poll() == ring::RingStatus::would_block) return 0;
            if (rd.poll() != ring::RingStatus::would_block) continue;
        }
        if (nb) {
            if (total > 0) return static_cast<ssize_t>(total);
            errno = EAGAIN;
            return -1;
        }
        auto res = wait_for([&] { return rd.poll() != ring::RingStatus::would_block || peer_closed_.load() || peer_reset_.load() || transport_->failed(); },
                            true, timeout_for(false));
        if (res == Wait::timeout) {
            if (total > 0) return static_cast<ssize_t>(total);
            errno = EAGAIN;
            return -1;
        }
    }
}

// Bytes waiting in the kernel socket (the peer's bytes before its switch). A raw
// syscall: ioctl() is interposed, and for an upgraded fd it would ask us again.
static size_t kernel_inq(int fd) {
    int q = 0;
    int saved = errno;
    if (syscall(SYS_ioctl, fd, FIONREAD, &q) != 0) q = 0;
    errno = saved;
    return q > 0 ? static_cast<size_t>(q) : 0;
}

size_t Connection::readable_bytes() {
    if (phase() == Phase::rv_accepted) return kernel_inq(fd_);
    if (phase() != Phase::upgraded) return 0;
    std::lock_guard<std::mutex> lk(read_mu_);
    if (rx_on_tcp()) return kernel_inq(fd_);
    return transport_->reader().readable_bytes();
}

uint64_t Connection::arrivals() {
    const Phase ph = phase();
    if (ph != Phase::upgraded && ph != Phase::rv_accepted) return 0;
    std::lock_guard<std::mutex> lk(read_mu_);
    if (ph == Phase::rv_accepted || rx_on_tcp()) {
        // Still reading the peer's TCP bytes: what landed there, and its FIN once.
        size_t q = kernel_inq(fd_);
        char b;
        int saved = errno;
        bool fin = q == 0 && ops_.recv(fd_, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
        errno = saved;
        return tcp_rx_.load() + q + (fin ? 1 : 0);
    }
    ring::RingReader& rd = transport_->reader();
    // The FIN record is never consumed and peer_closed_ never clears: +1 once, for good.
    const bool ended = rd.fin_landed() || peer_closed_.load();
    return tcp_rx_.load() + rx_bytes_ + rd.readable_bytes() + (ended ? 1 : 0);
}

// ---------------------------------------------------------------- waiting

bool Connection::arm_side(bool reader) {
    std::lock_guard<std::mutex> lk(arm_mu_);
    if (reader) return ++reader_sleepers_, transport_->arm_reader(true);
    return ++writer_sleepers_, transport_->arm_writer(true);
}

void Connection::disarm_side(bool reader) {
    std::lock_guard<std::mutex> lk(arm_mu_);
    if (reader) {
        if (--reader_sleepers_ == 0) transport_->arm_reader(false);
    } else if (--writer_sleepers_ == 0) {
        transport_->arm_writer(false);
    }
}

void Connection::drain_locked() {
    if (transport_->wake_fd() >= 0) return drain_side_channel_locked();
    char buf[256];
    for (;;) {
        ssize_t n = ops_.recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            if (std::memchr(buf, kAbortByte, static_cast<size_t>(n))) {
                RS_LOG(debug, "fd %d: the peer reports its transport failed", fd_);
                peer_reset_.store(true);
            }
            // A short read emptied the socket: skip the recv that would only say
            // EAGAIN (one syscall per wake-up). Bytes or a FIN arriving later make
            // the fd readable again, and the next sleep drains them.
            if (static_cast<size_t>(n) < sizeof buf) return;
            continue;
        }
        if (n == 0) {
            RS_LOG(debug, "fd %d: peer closed its socket", fd_);
            peer_closed_.store(true);
        } else if (errno == EINTR) {
            continue;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            RS_LOG(debug, "fd %d: doorbell stream error: %s", fd_, strerror(errno));
            peer_reset_.store(true);
        }
        return;
    }
}

template <class Ready>
Connection::Wait Connection::wait_for(Ready ready, bool reader, int64_t timeout_us) {
    const int64_t start = now_us();
    const int64_t spin_end = start + spin_.budget_us();
    // Every way out (ready or timed out) teaches the spin policy how long waits last.
    struct Learn {
        SpinPolicy& policy;
        int64_t start;
        ~Learn() { policy.record(now_us() - start); }
    } learn{spin_, start};
    do {
        for (int i = 0; i < 64; ++i) {
            if (ready()) return Wait::ready;
            cpu_relax();
        }
        if (spin_end > start) sched_yield();  // the peer may be queued on our CPU (docs/waiting.md)
    } while (now_us() < spin_end);
    for (;;) {
        bool may_sleep = arm_side(reader);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        // Only the owner of drain_mu_ swallows doorbells. A second thread on the
        // same connection must not block on that mutex (its own condition may
        // turn true while the owner sleeps for another reason): it sleeps in
        // the kernel too, but in short naps, because the owner may drain its
        // doorbell between its re-check and its poll.
        std::unique_lock<std::mutex> lk(drain_mu_, std::try_to_lock);
        if (!may_sleep || ready()) {
            if (lk.owns_lock()) lk.unlock();
            disarm_side(reader);
            // Progress is in flight (RDMA: posted, not landed yet). Re-arming costs
            // a round trip to the peer, so watch the ring for a while first.
            const int64_t until = now_us() + kInFlightSpinUs;
            do {
                if (ready()) return Wait::ready;
                cpu_relax();
            } while (now_us() < until);
            continue;
        }
        int ms = -1;
        if (timeout_us > 0) {
            int64_t left = timeout_us - (now_us() - start);
            if (left <= 0) {
                if (lk.owns_lock()) lk.unlock();
                disarm_side(reader);
                return Wait::timeout;
            }
            ms = static_cast<int>((left + 999) / 1000);
        }
        if (!lk.owns_lock()) ms = ms < 0 ? 1 : std::min(ms, 1);
        // The TCP socket (doorbell bytes, the peer's bytes before its switch, its
        // FIN or RST) and the transport's eventfd, if it has one.
        pollfd p[2] = {{fd_, POLLIN, 0}, {transport_->wake_fd(), POLLIN, 0}};
        if (p[1].fd >= 0 && peer_closed_.load()) p[0].fd = -1;  // its EOF stays readable: no busy loop
        int rc = ops_.poll(p, p[1].fd >= 0 ? 2 : 1, ms);
        if (rc > 0 && lk.owns_lock()) drain_locked();
        if (lk.owns_lock()) lk.unlock();
        disarm_side(reader);
        if (ready()) return Wait::ready;
        // EINTR: a blocking socket call restarts, as with SA_RESTART.
    }
}

short Connection::ready_events(short wanted, short* kernel_events) {
    while (progress()) {}
    *kernel_events = 0;
    const short in = wanted & (POLLIN | POLLRDNORM);
    const short out = wanted & (POLLOUT | POLLWRNORM);
    switch (phase()) {
        case Phase::plain:
        case Phase::rv_listen:
        case Phase::rv_pending:
        case Phase::rv_offered: *kernel_events = wanted; return 0;
        case Phase::rv_accepted: {
            // Both directions still on TCP; the server may switch any moment (wake fd).
            pollfd p{fd_, wanted, 0};
            ops_.poll(&p, 1, 0);
            *kernel_events = wanted;
            return p.revents;
        }
        case Phase::failed: return static_cast<short>(POLLERR | POLLHUP | in | out);
        case Phase::upgraded: break;
        case Phase::undecided:
            if (role_ == Role::client) {
                *kernel_events = POLLOUT;  // still connecting
                return 0;
            }
            [[fallthrough]];
        case Phase::strip_hello:
            // A server may write before the client spoke (its bytes go out on TCP):
            // a fresh connection is writable; reads wait for the first bytes.
            *kernel_events = POLLIN;
            return out;
        default: *kernel_events = POLLIN; return 0;  // waiting for a handshake reply
    }
    *kernel_events = POLLIN;  // doorbells and EOF
    short r = 0;
    if (transport_->wake_fd() >= 0) {
        if (peer_closed_.load()) *kernel_events = 0;  // its EOF stays readable: no busy loop
        if (rx_on_tcp()) {
            // The peer's bytes before its switch are still on TCP.
            pollfd p{fd_, static_cast<short>(in | (wanted & POLLRDHUP)), 0};
            ops_.poll(&p, 1, 0);
            r |= p.revents;
            if (out && (transport_->writer().writable() || peer_reset_.load())) r |= out;
            if (peer_reset_.load()) r |= static_cast<short>(POLLERR | POLLHUP | in);
            return r;
        }
    }
    auto st = transport_->reader().poll();
    const bool closed = peer_closed_.load(), reset = peer_reset_.load() || transport_failed();
    if (st == ring::RingStatus::ok) {
        r |= in;
        // TCP reports the peer's FIN as soon as it arrives, even behind unread data.
        if ((wanted & POLLRDHUP) && transport_->reader().fin_landed()) r |= POLLRDHUP;
    }
    else if (st == ring::RingStatus::eof || (closed && st == ring::RingStatus::would_block))
        r |= static_cast<short>(in | (wanted & POLLRDHUP));
    else if (st == ring::RingStatus::broken) r |= static_cast<short>(in | POLLERR);
    if (out && (transport_->writer().writable() || closed || reset)) r |= out;
    if (reset) r |= static_cast<short>(POLLERR | POLLHUP | in);
    if (shut_rd_ && in) r |= static_cast<short>(in | (wanted & POLLRDHUP));
    return r;
}

int Connection::arm(short wanted, bool* may_sleep) {
    if (phase() == Phase::rv_accepted) {  // only our reader can be woken by the ring yet
        if (wanted & (POLLIN | POLLRDNORM | POLLRDHUP)) return *may_sleep &= arm_side(true), 1;
        return 0;
    }
    if (phase() != Phase::upgraded) return 0;
    int token = 0;
    if (wanted & (POLLIN | POLLRDNORM | POLLRDHUP)) *may_sleep &= arm_side(true), token |= 1;
    if (wanted & (POLLOUT | POLLWRNORM)) *may_sleep &= arm_side(false), token |= 2;
    return token;
}

void Connection::disarm(int token) {
    if (token & 1) disarm_side(true);
    if (token & 2) disarm_side(false);
}

static bool has_rings(Phase p) { return p == Phase::upgraded || p == Phase::rv_accepted; }

bool Connection::try_begin_sleep() { return !has_rings(phase()) || drain_mu_.try_lock(); }

void Connection::end_sleep(bool owned) {
    if (!has_rings(phase())) return;
    if (owned) {
        drain_locked();
        drain_mu_.unlock();
    }
}

// ---------------------------------------------------------------- teardown

int Connection::shutdown(int how) {
    if (phase() != Phase::upgraded) {
        // The kernel carries this one (the caller shuts the TCP socket down); a
        // later switch to the ring must not reopen what the app closed.
        if (has_rings(phase())) {
            if (how == SHUT_RD || how == SHUT_RDWR) shut_rd_ = true;
            if (how == SHUT_WR || how == SHUT_RDWR) shut_wr_ = true;
        }
        return 0;
    }
    if (how == SHUT_RD || how == SHUT_RDWR) shut_rd_ = true;
    if ((how == SHUT_WR || how == SHUT_RDWR) && !shut_wr_) {
        std::lock_guard<std::mutex> lk(write_mu_);
        shut_wr_ = true;
        if (owned_by_this_process()) {
            switch_tx_locked();  // the FIN record comes after every TCP byte
            // The FIN record follows the data in the ring; wait briefly for space.
            for (int i = 0; i < 1000 && transport_->writer().write_fin() == ring::RingStatus::would_block; ++i) usleep(1000);
            ring_doorbell();
        }
    }
    return 0;
}

void Connection::close_last_reference() {
    RS_LOG(debug, "fd %d: last close in phase %s", fd_, to_string(phase()));
    switch (phase()) {  // a connection that ended while its bytes still went over TCP
        case Phase::rv_listen:
        case Phase::rv_pending:
        case Phase::rv_offered:
        case Phase::rv_accepted:
            if (fallback_reason_.empty()) fallback_reason_ = "closed before the switch";
            if (rv_) rv_->close();
            break;
        default: break;
    }
    if (role_ == Role::server && phase() == Phase::strip_hello) {
        // A HELLO left unread turns the kernel's close into a RST, which destroys
        // what the client has not read yet of the bytes this server wrote. Only
        // after our own write: an untouched socket may be a forked child's to
        // negotiate (a postmaster closing its copy must not eat the HELLO).
        std::lock_guard<std::mutex> lk(handshake_mu_);
        bool eof, empty;
        auto r = peek_message(&eof, &empty);
        if (r.status == handshake::Parse::complete && r.message.type == handshake::Type::hello) consume(r.consumed);
    }
    if (phase() == Phase::upgraded && owned_by_this_process() && !shut_wr_) {
        std::lock_guard<std::mutex> lk(write_mu_);
        switch_tx_locked();
        // Best effort: if the ring is full the kernel's FIN still ends the stream.
        if (transport_->writer().write_fin() == ring::RingStatus::ok) ring_doorbell();
        shut_wr_ = true;
    }
}

std::string Connection::stats_line(uint64_t plain_tx, uint64_t plain_rx) const {
    char buf[256];
    const bool up = phase() == Phase::upgraded;
    snprintf(buf, sizeof buf, "stats fd=%d role=%s transport=%s tx_bytes=%llu rx_bytes=%llu%s%s", fd_,
             role_ == Role::client ? "client" : "server", up ? transport_->name() : "tcp",
             static_cast<unsigned long long>(tx_bytes_ + tcp_tx_ + plain_tx),
             static_cast<unsigned long long>(rx_bytes_ + tcp_rx_.load() + plain_rx),
             fallback_reason_.empty() ? "" : " reason=", fallback_reason_.empty() ? "" : fallback_reason_.c_str());
    return up ? buf + transport_->stats_detail() : std::string(buf);
}

}  // namespace rdmasock
