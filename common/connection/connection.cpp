#include "sys/fd_budget.hpp"
#include "sys/raw_syscall.hpp"
#include "sys/kernel_calls.hpp"
#include "connection/connection_detail.hpp"
#include "connection/idle_windows.hpp"
#include "shm/leftover.hpp"
#include "wait/cpu_load.hpp"

#include <sys/stat.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "ring/downgrade.hpp"
#include "sys/fault_guard.hpp"
#include "sys/interruptible_sleep.hpp"
#include "base/log.hpp"
#include "sys/own_fd.hpp"
#include "rdma/rdma_setup.hpp"
#include "shm/shm_transport.hpp"
#include "sys/signal_restart.hpp"
#include "sys/thread_cancel.hpp"

namespace rdmasock {

using namespace detail;

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
    : fd_(fd), role_(role), nonblocking_(nonblocking), made_forks_(forks_begun()), config_(config), ops_(ops),
      spin_(config.spin_us, config.spin_max_us) {
    // A client stays plain unless set_offer() finds a shimmed peer.
    if (role == Role::client) phase_.store(Phase::plain, std::memory_order_relaxed);  // not yet shared
    struct stat st;
    if (raw_syscall(SYS_fstat, fd, &st) == 0) inode_ = st.st_ino;
    if (config.fault.find("handover") != std::string::npos) {
        uint64_t seed = static_cast<uint64_t>(now_us()) * 6364136223846793005ull ^ static_cast<uint64_t>(fd) << 32 ^ getpid();
        seed ^= seed >> 29;
        handover_at_ = 1 + seed % (16u << 20);
    }
}

void Connection::fault_handover() {
    if (!handover_at_ || tx_bytes_ + rx_bytes_ < handover_at_ || phase() != Phase::upgraded) return;
    handover_at_ = 0;
    hand_over("fault point: handover");
}

Connection::~Connection() {
    idle_windows::forget(this);
    if (own_fd_) retire_fd();
    delete bells_.load(std::memory_order_relaxed);
}

bool Connection::stream_closed(bool our_fin_counts) {
    if (phase() != Phase::upgraded) return false;
    drain_socket_now();  // a dead peer's FIN or RST, which no call may have looked at yet
    note_resets();
    return closed_both_ways(our_fin_counts);
}

bool Connection::closed_both_ways(bool our_fin_counts) {
    // (A peer that never switched ended on TCP: its kernel's FIN is its end.)
    const bool ended_on_tcp = peer_fin_.load() && transport_->rx_switch() &&
                              transport_->rx_switch()->load(std::memory_order_acquire) == RingControl::kNotSwitched;
    return peer_reset_.load() || (our_fin_counts && shut_wr_ && (peer_fin_seen() || ended_on_tcp));
}

bool Connection::unread_at_close() {
    // The peer's bytes before its switch (or after its way back) are the
    // kernel's, whose close resets for them: no end-of-stream record may
    // precede that RST. After the switch the ring's count too.
    if ((rx_on_tcp() || rx_back()) && kernel::inq(fd()) > 0) return true;
    if (rx_back()) return false;
    return transport_->reader().readable_bytes_look() > 0;
}

bool Connection::abortive_close() const {
    linger l{};
    socklen_t len = sizeof l;
    int saved = errno;
    bool abort = kernel_sockopt_get(fd(), SO_LINGER, &l, &len) == 0 && l.l_onoff && l.l_linger == 0;
    errno = saved;
    return abort;
}

// The application is about to close the fd number we use while the connection
// lives on (a dup'd fd, or another thread still inside a call): take our own
// reference to the socket, as the kernel's file reference keeps a call in
// progress on its socket, so nothing of ours ever lands on a reused number.
// High numbers, so the application's next open still gets the number it expects
// (own_fd.hpp).
bool Connection::keep_own_fd() {
    signals::DeferHandlers held;  // a handler on this thread must not wait for fd_mu_ (signal_seen.hpp)
    std::lock_guard<HandlerSafeMutex> lk(fd_mu_);
    if (own_fd_) return true;
    int d = dup_own_fd(fd());
    if (d < 0) return false;
    const int app_fd = fd();
    if (app_fd < 0) return close_own_fd(d), false;  // retired meanwhile
    fd_.store(d, std::memory_order_release);  // threads inside a call read it on their next syscall
    own_fd_ = true;
    RS_LOG(debug, "fd %d: the connection now holds its own fd %d", app_fd, d);
    return true;
}

void Connection::lose_fd_number(int fd) {
    signals::DeferHandlers held;  // a handler on this thread must not wait for fd_mu_ (signal_seen.hpp)
    std::lock_guard<HandlerSafeMutex> lk(fd_mu_);
    if (own_fd_ || fd_.load(std::memory_order_relaxed) != fd) return;  // its own dup still names the socket
    fd_.store(-1, std::memory_order_release);
    RS_LOG(warn, "fd %d was closed without the shim seeing it (a system call made without libc?) and now names another "
                 "file: its connection is dropped", fd);
}

void Connection::forget_other_threads() {
    fd_mu_.forget_holders();
    const bool stepping = handshake_mu_.forget_holders();
    arm_mu_.forget_holders();
    // The bells stay registered: a parent's thread bell or an inherited epoll
    // set's is still open here, and a ring wakes that sleeper to look again.
    // (The list is whole whenever the fork came: bells_.)
    bell_mu_.forget_holders();
    read_mu_.forget_holders();
    write_mu_.forget_holders();
    drain_owned_.store(false, std::memory_order_relaxed);
    if (Transport* t = transport_.get()) t->forget_other_threads();
    if (stepping) drop_torn_rendezvous();
}

// The thread that held handshake_mu_ was somewhere inside a rendezvous step (a
// name half published, an answer half read, a reason string being reassigned):
// nothing it was changing can be trusted here, not even to be closed. The
// rendezvous object is left as it is (leaked: its fds stay open in this process
// until it execs or exits), the reasons start empty, and the connection stays on
// TCP now, as forked_during_rendezvous would decide at the child's first call.
// After rv_accepted the step under way touches only the CONFIRM, and the
// hand-over that call makes needs the rings: left to it.
void Connection::drop_torn_rendezvous() {
    const Phase ph = phase();
    if (!rendezvous_on_tcp(ph)) return;
    (void)rv_.release();
    new (&fallback_reason_) std::string();  // the old ones are leaked, never assigned over
    new (&side_channel_why_) std::string();
    new (&tcp_only_why_) std::string();
    become_plain("forked while the same-host rendezvous was under way");
}

void Connection::retire_fd() {
    if (eos_after_calls_.exchange(false)) {
        // The close came while a send was in progress; that send has returned.
        cancel::Shield shield;  // this runs in a destructor (Call's): no cancellation inside
        std::lock_guard<SideLock> lk(write_mu_);
        if (phase() == Phase::upgraded && !shut_wr_) end_stream_locked();
        if (phase() == Phase::upgraded) transport_->flush_sends(1000);
    }
    signals::DeferHandlers held;  // a handler on this thread must not wait for fd_mu_ (signal_seen.hpp)
    std::lock_guard<HandlerSafeMutex> lk(fd_mu_);
    // Forgotten before closed: a fork in between leaves no child a number it
    // lacks (sys/fork_fence.hpp).
    const int fd = fd_.exchange(-1, std::memory_order_acq_rel);  // EBADF, never someone else's socket
    if (own_fd_) {
        own_fd_ = false;
        close_own_fd(fd);
    }
}
void Connection::set_offer(uint32_t offers) {
    offers_ = offers;
    claim_rendezvous();  // the process that may offer (progress_client_offer)
    start(offers ? Phase::undecided : Phase::plain);
}

static ShmRendezvous::Options rendezvous_options(const Config& c) {
    ShmRendezvous::Options o;
    o.ring_bytes = c.ring_bytes;
    o.ring_memory = c.ring_memory;
    o.same_user_only = c.shm_same_user_only;
    o.fault = c.fault;
    return o;
}

bool Connection::start_rendezvous_client(netns::Id socket_ns) {
    // A listener now, a side channel and doorbells later (sys/fd_budget.hpp).
    // (Discovery deferred: asked when the listener is made, client_discovery_step.)
    discovery_deferred_ = discovery_may_wait(config_);
    if (!discovery_deferred_ && !fd_budget::may_take(3, fd())) {
        RS_LOG(info, "fd %d: the shim's share of file descriptors is in use; staying on tcp", fd());
        return false;
    }
    auto o = rendezvous_options(config_);
    o.socket_ns = socket_ns;
    auto rv = std::make_unique<ShmRendezvous>(std::move(o));
    // Deferred: the name is published at the first call once the connection has
    // lived (client_discovery_step); a shorter one costs no rendezvous at all.
    if (!discovery_deferred_ && (config_.fault == "client-listen" || !rv->client_listen(fd()))) return false;
    rv_ = std::move(rv);
    rv_since_us_ = offer_wait_since_us_ = wait::now_us();
    side_tried_.store(true, std::memory_order_relaxed);
    claim_rendezvous();
    start(Phase::rv_listen);
    return true;
}

void Connection::claim_rendezvous() {
    rv_pid_ = current_pid();
    rv_gen_ = forks_begun();
}

// Only while the rendezvous is under way in some process (not rv_pending: the
// postmaster pattern, where the process that uses the socket first starts it).
bool Connection::forked_since_rendezvous() const { return rv_pid_ != current_pid() || rv_gen_ != forks_begun(); }

bool Connection::forked_during_rendezvous() {
    const Phase ph = phase();
    const bool claimed_pending = ph == Phase::rv_pending && rv_claimed_.load(std::memory_order_relaxed);
    if (ph != Phase::rv_listen && ph != Phase::rv_offered && ph != Phase::rv_accepted && !claimed_pending) return false;
    if (!forked_since_rendezvous()) return false;
    if (ph == Phase::rv_accepted) {
        // Rings exist and the server may have switched already: go back in order.
        hand_over("forked while the same-host rendezvous was under way");
        return true;
    }
    std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
    if (phase() == ph) become_plain("forked while the same-host rendezvous was under way");
    return true;
}

void Connection::start_rendezvous_server(netns::Id socket_ns) {
    auto o = rendezvous_options(config_);
    o.socket_ns = socket_ns;
    rv_ = std::make_unique<ShmRendezvous>(std::move(o));
    side_tried_.store(true, std::memory_order_relaxed);
    rv_since_us_ = wait::now_us();
    discovery_deferred_ = discovery_may_wait(config_);
    start(Phase::rv_pending);
}

int Connection::wake_fd() const {
    Phase p = phase();
    return (p == Phase::rv_accepted || p == Phase::upgraded) ? transport_->wake_fd() : -1;
}

unsigned Connection::wake_generation() const {
    Phase p = phase();
    return (p == Phase::rv_accepted || p == Phase::upgraded) ? transport_->wake_generation() : 0;
}

void Connection::set_timeouts(int64_t recv_us, int64_t send_us) {
    if (recv_us >= 0) recv_timeout_us_.store(recv_us, std::memory_order_relaxed);
    if (send_us >= 0) send_timeout_us_.store(send_us, std::memory_order_relaxed);
}

bool Connection::file_now_nonblocking() {
    const long fl = raw_syscall(SYS_fcntl, fd(), F_GETFL);
    if (fl < 0) return nonblocking();
    set_nonblocking(fl & O_NONBLOCK);
    return fl & O_NONBLOCK;
}

bool Connection::shared_file_settings(bool reader, int64_t& timeout_us) {
    if (forks_begun() == made_forks_) return true;
    const int saved = errno;
    const bool nb = file_now_nonblocking();
    timeval tv{};
    socklen_t l = sizeof tv;
    if (!nb && kernel::getsockopt(fd(), SOL_SOCKET, reader ? SO_RCVTIMEO : SO_SNDTIMEO, &tv, &l) == 0) {
        const int64_t us = static_cast<int64_t>(tv.tv_sec) * 1000000 + tv.tv_usec;
        if (us != (reader ? recv_timeout_us_ : send_timeout_us_).load(std::memory_order_relaxed)) {
            set_timeouts(reader ? us : -1, reader ? -1 : us);
            timeout_us = us > 0 ? us : -1;  // from now: the kernel's call would start its timer here
        }
    }
    errno = saved;
    return !nb;
}

bool Connection::program_nodelay(int& v) const {
    v = program_nodelay_.load(std::memory_order_acquire);
    return v >= 0;
}

void Connection::set_program_nodelay(int v) {
    if (program_nodelay_.load(std::memory_order_acquire) < 0) return;
    program_nodelay_.store(v ? 1 : 0, std::memory_order_release);
    no_delay(fd());  // (the program's 0 reached the kernel: on again)
}

void Connection::no_delay_for_shim() {
    if (program_nodelay_.load(std::memory_order_acquire) < 0) {
        int v = 0;
        socklen_t l = sizeof v;
        const int saved = errno;
        if (kernel::getsockopt(fd(), IPPROTO_TCP, TCP_NODELAY, &v, &l) == 0) program_nodelay_.store(v ? 1 : 0);
        errno = saved;
    }
    no_delay(fd());
}

CallTimeout::CallTimeout(int64_t timeout_us) {
    if (timeout_us > 0) deadline_us_ = wait::now_us() + timeout_us;
}

int64_t CallTimeout::left_us() const {
    if (deadline_us_ < 0) return -1;
    return std::max<int64_t>(0, deadline_us_ - wait::now_us());
}

int64_t Connection::timeout_for(bool write) const {
    const int64_t t = (write ? send_timeout_us_ : recv_timeout_us_).load(std::memory_order_relaxed);
    return t > 0 ? t : -1;
}

bool Connection::owned_by_this_process() const { return owner_pid_ == 0 || owner_pid_ == current_pid(); }

void Connection::enter(Phase to) {
    const Phase from = phase_.exchange(to, std::memory_order_acq_rel);
    started_ = true;
    ring_phase_bells();  // sleepers that began under the old phase look again
    if (allowed_move(from, to)) return;
#ifdef RDMASOCK_CHECK_PHASES
    RS_LOG(error, "fd %d: phase %s -> %s is not in the table (connection_phase.hpp)", fd(), to_string(from), to_string(to));
    __builtin_trap();
#else
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
        RS_LOG(error, "fd %d: phase %s -> %s is not in the table (connection_phase.hpp)", fd(), to_string(from), to_string(to));
#endif
}

void Connection::start(Phase to) {
    if (started_ || !allowed_start(to)) {
        enter(to);  // not a set-up move: checked as any other
        return;
    }
    phase_.store(to, std::memory_order_release);
    ring_phase_bells();
}

void Connection::become_plain(const char* why) {
    // What the application set is the reason, whatever the handshake saw then.
    if (tcp_only_.load() && !tcp_only_why_.empty()) why = tcp_only_why_.c_str();
    fallback_reason_ = why;
    pending_.reset();
    if (rv_) rv_->close();
    // A SHUT_RD made while we held rings was only recorded (Connection::shutdown).
    if (shut_rd_.load()) kernel_shutdown(fd(), SHUT_RD);
    // A transport handed over but never switched to stays alive (unused) until
    // the connection ends: its doorbell may still be registered in an epoll set.
    enter(Phase::plain);
    RS_LOG(info, "fd %d: staying on tcp (%s)", fd(), why);
}

void Connection::become_failed(const char* why) {
    fallback_reason_ = why;
    pending_.reset();
    enter(Phase::failed);
    kernel::shutdown(fd(), SHUT_RDWR);
    RS_LOG(warn, "fd %d: handshake violated (%s); connection reset", fd(), why);
}

void Connection::upgrade(std::unique_ptr<Transport> t) {
    no_delay_for_shim();
    transport_.publish(std::move(t));
    upgraded_once_.store(true, std::memory_order_relaxed);
    owner_pid_ = current_pid();
    fork_gen_ = fork_generation();
    // Bad application buffers get EFAULT from the ring copies from now on (fault_guard.hpp).
    if (!guard::install()) RS_LOG(debug, "fd %d: no fault guard: a bad buffer faults in the ring copy", fd());
    enter(Phase::upgraded);
    RS_LOG(info, "fd %d: upgraded to %s", fd(), transport_->name());
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
    if (settled(ph)) return false;
    signals::DeferHandlers held;  // a handler on this thread must not wait for handshake_mu_ (signal_seen.hpp)
    std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
    if (ph == Phase::rv_listen || ph == Phase::rv_pending || ph == Phase::rv_offered || ph == Phase::rv_accepted)
        return progress_rendezvous(false);  // a readiness query does no I/O
    return progress_locked(false);
}

// Our HELLO waits for a reply that only a server end of this very process can
// give (a program connected to itself): its shim reads the HELLO and answers
// now, as its next call would. (Without our handshake lock: its progress
// takes its own.)
void Connection::serve_peer_in_process() {
    PeerInProcess find = peer_in_process_.load(std::memory_order_acquire);
    if (!find) return;
    auto peer = find(fd());
    if (!peer || peer.get() == this) return;
    RS_LOG(debug, "fd %d: the server end of this connection is in this process: its shim answers our HELLO now", fd());
    while (peer->progress()) {}
}

// Drives the handshake to a phase where the app's call can proceed. The thread
// that waits for handshake bytes holds handshake_mu_ across its poll, so no
// other thread can consume the message it is waiting for; the poll is short so
// the others get their turn.
bool Connection::settle(int flags, bool for_write) {
    // Settled already (every call after the handshake): no lock, no clock.
    if (settled(phase())) return true;
    const bool nb = nonblocking() || (flags & MSG_DONTWAIT);
    const int64_t timeout = timeout_for(for_write);
    const int64_t start = timeout > 0 ? now_us() : 0;
    const signals::Seen since = signals::seen();
    int64_t next_peer_look = 0;  // serve_peer_in_process: after 10 ms of waiting, then every 100 ms
    for (;;) {
        if (!nb && role_ == Role::client && phase() == Phase::offered) {
            const int64_t now = now_us();
            if (next_peer_look == 0) next_peer_look = now + 10000;
            else if (now >= next_peer_look) {
                serve_peer_in_process();
                next_peer_look = now + 100000;
            }
        }
        // Handlers wait for handshake_mu_ to be let go (one that jumped out of
        // this wait left it taken for good); the wait ends for them, and the
        // interposer runs them and restarts the call where the kernel would.
        signals::DeferHandlers held;
        std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
        while (progress_locked(for_write)) {}
        Phase ph = phase();
        if (settled(ph)) return true;
        if (for_write && ph == Phase::strip_hello) return true;
        // Shut by the application while the peer's message is owed: TCP answers
        // at once (a read 0, a write EPIPE), whatever the handshake does.
        if (awaits_peer_message(ph) && (for_write ? shut_wr_.load() : shut_rd_.load())) return true;
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
        pollfd p{fd(), ev, 0};
        // A signal ends this wait as it would end the kernel's (wait_for).
        if (sleep::poll(&p, 1, ms * int64_t{1000}, nullptr, since) < 0 && errno == EINTR) {
            errno = signal_restarts_call(since, timeout > 0) ? ERESTART : EINTR;
            return false;
        }
    }
}

// ---------------------------------------------------------------- data path

// A hand-over that could not finish: after the reset it made (the peer's
// bytes lost with it), what TCP reports after a RST; else EIO.
ssize_t Connection::failed_hand_over() {
    errno = peer_reset_.load() ? ECONNRESET : EIO;
    return -1;
}

ssize_t Connection::send(const iovec* iov, int iovcnt, int flags) {
    forked_during_rendezvous();
    if (!settle(flags, true)) return -1;
    if (handover_at_) fault_handover();
    // Urgent data has no place in a ring: the connection goes back to TCP, which carries it.
    if ((flags & MSG_OOB) && has_rings(phase())) hand_over("MSG_OOB");
    switch (phase()) {
        case Phase::failed: errno = ECONNRESET; return -1;
        case Phase::upgraded:
            if (!owned_by_this_process()) {  // a forked child: both processes go on over TCP
                if (!hand_over("a forked child used the connection", Unread::claim_when_sole)) return failed_hand_over();
                return send(iov, iovcnt, flags);
            }
            // Forked while our sends were still on TCP: a child may have written the
            // socket too, and our switch offset would count only our own bytes (the
            // peer would find the child's past it). Nobody can know the offset: TCP.
            if (forked_before_tx_switch()) {
                if (!hand_over("forked before this side's sends switched to the ring", Unread::claim_when_sole)) return failed_hand_over();
                return send(iov, iovcnt, flags);
            }
            return ring_send(iov, iovcnt, flags);
        case Phase::rv_listen:
        case Phase::rv_pending:
        case Phase::rv_offered:
        case Phase::rv_accepted: return tcp_send(iov, iovcnt, flags);
        default: break;  // plain or strip_hello: the kernel carries it
    }
    if (counts_own_bytes()) return tcp_send(iov, iovcnt, flags);
    return kernel_io(true, iov, iovcnt, flags);
}

ssize_t Connection::recv(const iovec* iov, int iovcnt, int flags) {
    forked_during_rendezvous();
    // Urgent data is the kernel socket's, and a recv of it never waits
    // (tcp_recv_urg): while the in-band handshake is unsettled the kernel
    // answers at once, reading no byte of the stream.
    if ((flags & MSG_OOB) && !settled(phase()) && !has_rings(phase())) return kernel_io(false, iov, iovcnt, flags);
    if (!settle(flags, false)) return -1;
    // Our SHUT_RD, recorded while the peer's message is owed (Connection::shutdown):
    // nothing of the stream can be queued ahead of that message.
    if (awaits_peer_message(phase()) && shut_rd_.load()) return 0;
    if (handover_at_) fault_handover();
    if (phase() == Phase::upgraded && downgrade_due()) serve_downgrade();  // plain now, if the peer went back
    switch (phase()) {
        case Phase::failed: errno = ECONNRESET; return -1;
        case Phase::upgraded:
        case Phase::rv_accepted:
            if (!owned_by_this_process()) {
                if (!hand_over("a forked child used the connection", Unread::claim_when_sole)) return failed_hand_over();
                return recv(iov, iovcnt, flags);
            }
            return ring_recv(iov, iovcnt, flags);
        case Phase::rv_listen:
        case Phase::rv_pending:
        case Phase::rv_offered: return tcp_recv(iov, iovcnt, flags);
        default: break;
    }
    if (ssize_t r; kept_first(iov, iovcnt, flags, r)) return r;
    if (counts_own_bytes()) return tcp_recv(iov, iovcnt, flags);
    return kernel_io(false, iov, iovcnt, flags);
}

// Bytes a forked child's hand-over claimed (Unread::claim_when_sole) come
// before the kernel's, for every receive of this (now plain) connection: the
// other claims leave the shim's connection behind, and the socket's receives
// find them in the interposer (shim::recv_first), through the same function.
bool Connection::kept_first(const iovec* iov, int iovcnt, int flags, ssize_t& out) {
    return leftover::any_first() &&
           leftover::receive_first(fd(), inode_, iov, static_cast<size_t>(iovcnt), flags, out, ops_.recvmsg);
}

// A transport that broke after the upgrade (RDMA: a queue-pair error, a peer
// ring that fails validation): the stream goes on over TCP
// (connection_downgrade_inband.cpp) while the peer can answer; false then.
// Otherwise the connection ends as a TCP reset would, at both ends, so a peer
// asleep in the kernel learns it too instead of waiting for records that will
// never come.
bool Connection::transport_failed() {
    if (!transport_->failed()) return false;
    if (marker_out() && !peer_reset_.load()) return false;  // on its way back
    if (can_go_back()) {
        begin_way_back(std::string(transport_->name()) + " transport failed: " + transport_->failure());
        return false;
    }
    if (!failure_reported_.exchange(true)) reset_both((std::string(transport_->name()) + " transport failed").c_str());
    return true;
}

// ---------------------------------------------------------------- teardown

int Connection::shutdown(int how, bool* kernel_carries) {
    cancel::Shield shield;  // a hand-over, the writer's lock for the FIN record (thread_cancel.hpp)
    const bool rd = how == SHUT_RD || how == SHUT_RDWR, wr = how == SHUT_WR || how == SHUT_RDWR;
    if (kernel_carries) *kernel_carries = false;
    if (phase() == Phase::upgraded && !owned_by_this_process()) {
        // A forked copy: the socket is both processes', and so is its shutdown
        // (the parent reads EOF or a reset as over TCP). The FIN record is the
        // owner's to write: the connection goes back to TCP, and the kernel shuts it.
        if (!hand_over("a forked child used the connection", Unread::claim_when_sole)) return failed_hand_over();
        return static_cast<int>(raw_syscall(SYS_shutdown, fd(), how));
    }
    bool fin_owed = false;  // our sends reached the ring while this call began on TCP
    if (phase() != Phase::upgraded) {
        if (awaits_peer_message(phase())) {
            // The peer's shim still owes a message (awaits_peer_message): the kernel
            // gets our FIN, not our SHUT_RD, which is recorded (reads say 0, poll
            // says readable) and reaches the kernel once the handshake is settled
            // (become_plain); the handshake itself ends on TCP (progress_*).
            signals::DeferHandlers held;
            std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
            if (awaits_peer_message(phase())) {
                if (rd) shut_rd_ = true;
                // A client that shut a direction ends the handshake on TCP
                // (progress_client_reply); a server upgrades at the READY it
                // owes, its FIN carried by the kernel as before.
                if (wr && role_ == Role::client) shut_wr_ = true;
                const int r = wr ? kernel::shutdown(fd(), SHUT_WR) : kernel_stream_closed(fd()) ? (errno = ENOTCONN, -1) : 0;
                wake_local();  // readers, pollers and epoll sets look again (ready_events)
                return r;
            }
        }
        // The kernel carries this one (the caller shuts the TCP socket down); a
        // later switch to the ring must not reopen what the app closed.
        if (!has_rings(phase())) {
            if (!rendezvous_on_tcp(phase())) {
                if (kernel_carries) *kernel_carries = true;
                return 0;
            }
            // In a rendezvous it is recorded too, under the lock the steps run
            // under: the switch moves only a stream open both ways
            // (stream_open_both_ways), so this one ends on TCP, where the kernel
            // keeps what the app shut. (A send after it must fail as TCP's does,
            // not find a ring.)
            signals::DeferHandlers held;
            std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
            if (!has_rings(phase())) {
                if (rd) shut_rd_ = true;
                if (wr) shut_wr_ = true;
                if (kernel_carries) *kernel_carries = true;
                return 0;
            }
            // It took its rings meanwhile (rv_accepted): as a connection with rings.
        }
        if (rd) shut_rd_ = true;
        const bool first_wr = wr && !shut_wr_.exchange(true);
        // Dekker with a send's first switch to the ring (ring_send): either it
        // sees shut_wr_ and never switches, or we see the phase it switched in.
        // Then its records may be in the ring already, and the kernel's FIN
        // would end the peer's stream before them: our end-of-stream record
        // follows them instead, below, under the writers' lock (issue 36).
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (!first_wr || phase() != Phase::upgraded) {
            wake_local();
            // The kernel carries our FIN (our sends stay on TCP), never a SHUT_RD:
            // a socket with rings is read for doorbells and the peer's end, which
            // a kernel SHUT_RD would fake (its reads say 0, its poll RDHUP). Ours
            // is recorded; the kernel gets it if the switch falls through (become_plain).
            if (shut_rd_ && shut_wr_ && has_rings(phase())) {
                // Shut both ways before the switch: the kernel gets both, so TCP
                // bytes landing past here draw its own RST (tcp_rcv_state_process),
                // and ring bytes ours (note_shut_both_ways). Its reads and its
                // poll then say nothing of the peer (drain_locked knows).
                kernel_rd_shut_.store(true);
                note_shut_both_ways();
                return kernel::shutdown(fd(), SHUT_RDWR);
            }
            if (wr) return kernel::shutdown(fd(), SHUT_WR);
            return kernel_stream_closed(fd()) ? (errno = ENOTCONN, -1) : 0;
        }
        fin_owed = true;
    }
    // A socket whose stream ended both ways (our FIN sent and the peer's
    // landed) or was reset is TCP_CLOSE: shutdown says ENOTCONN, and still
    // takes effect (inet_shutdown).
    // (Our FIN owed by this very call is not one that was sent before it: a
    // shutdown that began before the switch would say ENOTCONN to itself.)
    const bool ended = stream_closed(!fin_owed);
    if (rd) shut_rd_ = true;
    // In band, on the way back: our unread ring bytes go over TCP before the
    // kernel's FIN (hand_over waits for the peer's marker).
    if (wr && marker_out() && !tx_back()) hand_over("shutdown on the way back to tcp");
    if (wr && (!shut_wr_.exchange(true) || fin_owed)) {
        // A writer blocked on a full ring holds write_mu_: wake it first; it sees
        // shut_wr_ and gives up (EPIPE, as a blocked TCP sender does).
        wake_local();
        std::lock_guard<SideLock> lk(write_mu_);
        if (owned_by_this_process()) {
            // The FIN record follows the data in the ring. It always fits
            // (RingWriter::kFinReserve): the retry is a guard, not a wait.
            for (int i = 0; i < 1000; ++i, usleep(1000)) {
                if (tx_enter_locked() != Way::ring) {
                    kernel_shutdown(fd(), SHUT_WR);  // back on TCP: the kernel's FIN
                    break;
                }
                switch_tx_locked();  // the FIN record comes after every TCP byte
                auto st = write_fin_locked();
                tx_leave_locked();
                if (st != ring::RingStatus::would_block) break;
            }
            ring_doorbell();
        }
    }
    if (shut_rd_ && shut_wr_ && !ended) note_shut_both_ways();
    wake_local();  // blocked readers return, epoll sets look again
    if (ended) return errno = ENOTCONN, -1;
    return 0;
}

// Our reader is gone: the peer's writer reads it in the ring it writes, a
// reset (`aborted`, bytes left unread) or a close. (A socket that failed told
// the peer's writer already: kept.)
void Connection::tell_reader_gone(bool aborted) {
    if (RingControl* c = transport_->rx_control(); c && c->reader_state.load() != RingControl::gone)
        transport_->tell_reader_state(aborted ? RingControl::aborted : RingControl::closed);
}

void Connection::discard_landed_message(std::initializer_list<handshake::Type> types) {
    std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
    bool eof, empty;
    auto r = peek_message(&eof, &empty);
    if (r.status != handshake::Parse::complete) return;
    for (handshake::Type t : types)
        if (r.message.type == t) {
            consume(r.consumed);
            return;
        }
}

void Connection::close_last_reference() {
    cancel::Shield shield;  // its end-of-stream and hand-over finish (thread_cancel.hpp)
    RS_LOG(debug, "fd %d: last close in phase %s", fd(), to_string(phase()));
    switch (phase()) {  // a connection that ended while its bytes still went over TCP
        case Phase::rv_listen:
        case Phase::rv_pending:
        case Phase::rv_offered:
        case Phase::rv_accepted:
            if (fallback_reason_.empty()) fallback_reason_ = "closed before the switch";
            if (rv_) rv_->close();
            // ACCEPT is out: the server may switch after this close and write to
            // rings nobody reads. It learns we are gone as from an upgraded close,
            // from its ring's reader state (a reset where bytes were left unread,
            // as TCP's close with unread bytes).
            if (phase() == Phase::rv_accepted && transport_ && owned_by_this_process()) tell_reader_gone(kernel::inq(fd()) > 0);
            break;
        case Phase::plain:
            leftover::closing_last(fd(), inode_);  // bytes a claim kept (claim_when_sole)
            break;
        default: break;
    }
    if (role_ == Role::server && phase() == Phase::strip_hello) {
        // A HELLO left unread turns the kernel's close into a RST, which destroys
        // what the client has not read yet of the bytes this server wrote. Only
        // after our own write: an untouched socket may be a forked child's to
        // negotiate (a postmaster closing its copy must not eat the HELLO).
        discard_landed_message({handshake::Type::hello});
    }
    if (phase() == Phase::offered && !forked_since_rendezvous()) {
        // The server's reply to our HELLO, if it landed, left unread would make
        // the kernel's close a RST where TCP, with nothing of the stream unread,
        // sends a FIN. (One still on its way draws that RST all the same: a
        // limit, in docs/protocol.md.) A forked copy may still negotiate.
        discard_landed_message({handshake::Type::accept, handshake::Type::decline});
    }
    // TCP's close sends a RST instead of a FIN when bytes were left unread: so
    // does ours (SO_LINGER 0 on the kernel socket), and the peer's writer, which
    // may never look at its socket, reads which it was in the ring it writes.
    // Only a sole owner: a forked child may still read, and only the kernel
    // knows when the socket is gone then.
    if (phase() == Phase::upgraded && owned_by_this_process() && fork_gen_ == fork_generation()) {
        bool aborted = abortive_close();
        if (stream_closed()) {
            // TCP_CLOSE already: TCP's close sends nothing, with or without
            // SO_LINGER 0; the kernel socket, which carried no FIN, sends a FIN.
            if (aborted) {
                linger off{0, 0};
                kernel_sockopt_set(fd(), SO_LINGER, &off, sizeof off);
            }
            aborted = false;
            // Bytes the kernel still holds (the peer's before its switch) would
            // make that FIN a RST, which a closed TCP socket never sends.
            if (kernel::inq(fd()) > 0) {
                const int saved = errno;
                char sink[4096];
                while (ops_.recv(fd(), sink, sizeof sink, MSG_DONTWAIT) > 0) {}
                errno = saved;
            }
        } else if (!aborted && unread_at_close()) {
            linger l{1, 0};
            const int saved = errno;
            aborted = kernel_sockopt_set(fd(), SO_LINGER, &l, sizeof l) == 0;
            errno = saved;
            RS_LOG(debug, "fd %d: closed with unread bytes: a reset, as TCP's", fd());
        }
        tell_reader_gone(aborted);
    }
    // SO_LINGER {1, 0}: no end-of-stream record; the kernel's RST at the close
    // tells the peer, which then reports ECONNRESET as TCP would.
    // In band, on the way back: what the peer has not read goes over TCP first.
    if (phase() == Phase::upgraded && owned_by_this_process() && !abortive_close() && marker_out())
        hand_over("closed on the way back to tcp");
    // A socket that failed (socket_failed) ends nothing: TCP's close sends no FIN then.
    if (phase() == Phase::upgraded && owned_by_this_process() && !shut_wr_ && !abortive_close() && !tcp_failed_.load()) {
        std::unique_lock<SideLock> lk(write_mu_, std::try_to_lock);
        if (lk.owns_lock()) {
            end_stream_locked();
        } else {
            // A send in progress in another thread (asleep on a full ring, or
            // about to be): the kernel sends its FIN once the last call on the
            // socket returns, and this close returns now. So does ours: the
            // end of stream follows that call (retire_fd). (A close that
            // waited here for the writer hung when the peer read only later,
            // and an exit() hung for good.)
            eos_after_calls_.store(true);
        }
    }
    // Records still in flight land before the kernel's FIN can overtake them
    // (the peer reads its ring to the end when its TCP socket says EOF).
    if (phase() == Phase::upgraded && owned_by_this_process()) transport_->flush_sends(1000);
}

// The end-of-stream record after every byte written (under write_mu_), or
// the kernel's FIN where the stream went back to TCP.
void Connection::end_stream_locked() {
    if (fork_gen_ != fork_generation() && transport_->tx_control()) {
        // A child forked since the upgrade may hold the socket: only the
        // kernel knows when the stream ends. Shared memory: what the peer
        // has not read goes to TCP, and the kernel's FIN, if any, follows
        // it. In band (RDMA): no end-of-stream record either; a child that
        // goes on takes the connection back to TCP itself (shared state),
        // else the kernel's FIN comes after every record landed (below),
        // and the peer reads them all before its end of stream.
        if (!in_band() && lock_busy(transport_->tx_control()->writer_busy)) {
            take_back_locked();
            downgrade::unlock(transport_->tx_control()->writer_busy);
        }
    } else if (tx_enter_locked() == Way::ring) {
        // (tx_enter serves a take-back the peer asked for: a peer that
        // closes never leaves bytes its reader asked for behind.)
        switch_tx_locked();
        // The record always fits (RingWriter::kFinReserve); on a broken ring the
        // kernel's FIN still ends the stream.
        auto st = write_fin_locked();
        tx_leave_locked();
        if (st == ring::RingStatus::ok) ring_doorbell();
    }
    shut_wr_ = true;
}

// Our end-of-stream record, noting where our bytes end: a peer that dies
// having read them all but not this record left nothing unread (TCP's FIN is
// no data), peer_left_unread.
ring::RingStatus Connection::write_fin_locked() {
    data_end_.store(transport_->writer().written());
    return transport_->writer().write_fin();
}

std::string Connection::stats_line(uint64_t plain_tx, uint64_t plain_rx) const {
    char buf[256];
    const bool up = phase() == Phase::upgraded;
    snprintf(buf, sizeof buf, "stats fd=%d role=%s transport=%s tx_bytes=%llu rx_bytes=%llu%s%s", fd(),
             role_ == Role::client ? "client" : "server", up ? transport_->name() : "tcp",
             static_cast<unsigned long long>(tx_bytes_ + tcp_tx_ + plain_tx),
             static_cast<unsigned long long>(rx_bytes_ + tcp_rx_.load() + plain_rx),
             fallback_reason_.empty() ? "" : " reason=", fallback_reason_.empty() ? "" : fallback_reason_.c_str());
    if (!up) return buf;
    // How many of this process's waits slept at once because runnable threads
    // outnumbered the CPUs (cpu_load.hpp): the wait policy's decision, shown.
    char busy[64];
    snprintf(busy, sizeof busy, " busy_skips=%llu", static_cast<unsigned long long>(cpu_load::spins_skipped()));
    return buf + transport_->stats_detail() + busy;
}

}  // namespace rdmasock
