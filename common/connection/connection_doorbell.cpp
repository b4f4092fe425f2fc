// Doorbells, waiting and readiness of a connection that holds rings
// (docs/waiting.md). The wait itself is wait_engine.hpp's; this file supplies
// what one connection looks at: its ring, its TCP socket, its doorbell.
#include "connection/connection_detail.hpp"

#include <x86intrin.h>

#include <algorithm>
#include <cstring>

#include "sys/interruptible_sleep.hpp"
#include "base/log.hpp"
#include "wait/phase_bell.hpp"
#include "sys/signal_restart.hpp"
#include "wait/wait_engine.hpp"

namespace rdmasock {

using namespace detail;

// ---------------------------------------------------------------- doorbells

void Connection::ring_doorbell() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // Every transport has a doorbell of its own (a socket pair, a WRITE WITH
    // IMMEDIATE): after the switch, bytes on the TCP stream are data only.
    if (transport_->take_peer_reader_waiting()) transport_->ring_peer();
}

void Connection::wake_local() {
    // A call waiting for a direction's lock while the bytes still go over TCP
    // sleeps on its thread's bell (lock_tcp_side): no doorbell exists yet, and
    // one made meanwhile is not the one it sleeps on. (Rare events only: a
    // lock let go with a waiter, a shutdown, a reset.)
    ring_phase_bells();
    // Our own doorbell: every sleeper of this side waits on it (blocked calls,
    // poll, an epoll set's kernel half).
    if (transport_ && transport_->wake_self()) return;
    // No doorbell to write: an epoll set that wakes for anything else looks at
    // all its cold members again.
    local_epoch_.fetch_add(1, std::memory_order_acq_rel);
}

// ---------------------------------------------------------------- phase bells

void Connection::ring_phase_bells() {
    // After the phase's store (enter/start): a sleeper registered before our
    // lock is rung; one that registers after it sees the new phase in its
    // re-check (phase_bell.hpp).
    std::lock_guard<HandlerSafeMutex> lk(bell_mu_);
    if (const auto* list = bells_.load(std::memory_order_acquire))
        for (int b : *list) bell::ring(b);
}

// Under bell_mu_: the list with `bell` added (or one entry of it removed),
// published whole before the old one is freed (bells_).
void Connection::replace_bells_locked(int bell, bool add) {
    const auto* old = bells_.load(std::memory_order_relaxed);
    auto* next = old ? new std::vector<int>(*old) : new std::vector<int>();
    if (add) {
        next->push_back(bell);
    } else if (auto it = std::find(next->begin(), next->end(), bell); it != next->end()) {
        next->erase(it);
    }
    bells_.store(next, std::memory_order_release);
    delete old;
}

void Connection::watch_phase(int bell) {
    std::lock_guard<HandlerSafeMutex> lk(bell_mu_);
    replace_bells_locked(bell, true);
}

void Connection::unwatch_phase(int bell) {
    std::lock_guard<HandlerSafeMutex> lk(bell_mu_);
    // After this no ring reaches `bell` from here: its owner may close it.
    replace_bells_locked(bell, false);
}

bool Connection::arm_side(bool reader) {
    signals::DeferHandlers held;  // a handler on this thread must not wait for arm_mu_ (signal_seen.hpp)
    std::lock_guard<HandlerSafeMutex> lk(arm_mu_);
    if (reader) return ++reader_sleepers_, transport_->arm_reader(true);
    return ++writer_sleepers_, transport_->arm_writer(true);
}

void Connection::disarm_side(bool reader) {
    signals::DeferHandlers held;  // a handler on this thread must not wait for arm_mu_ (signal_seen.hpp)
    std::lock_guard<HandlerSafeMutex> lk(arm_mu_);
    if (reader) {
        if (--reader_sleepers_ == 0) transport_->arm_reader(false);
    } else if (--writer_sleepers_ == 0) {
        transport_->arm_writer(false);
    }
}

// Takes the doorbells that woke us (the sleep end, or the completion channel's
// event) and notes the peer's FIN.
void Connection::drain_locked(bool look_tcp) {
    transport_->drain_wake();
    // The socket's end is known: a reset or error taken (pending_err_ holds it
    // for the program), or its EOF. Another look would find the closed socket's
    // EOF and make a reset an end of stream.
    if (peer_closed_.load() || peer_reset_.load()) return;
    if (kernel_rd_shut_.load()) {
        // Our SHUT_RD is the kernel's too (Connection::shutdown): its reads say 0
        // and its poll RDHUP whatever the peer did. Only its error is news: the
        // RST that the peer's bytes past our shutdown drew.
        if (tcp_events(0) & POLLERR)
            if (int e = take_kernel_error(); e && !peer_reset_.exchange(true)) pending_err_.store(e);
        return;
    }
    // The kernel wait saw the socket quiet: a FIN or byte arriving since makes it
    // readable, and the next wait sees that.
    if (!look_tcp && !rx_on_tcp()) return;
    if (rx_on_tcp()) {
        // The peer's bytes before its switch are still there: look, do not take.
        // A FIN tells a writer that nobody may read its ring any more.
        if (tcp_events(POLLRDHUP) & (POLLRDHUP | POLLHUP | POLLERR)) peer_fin_.store(true);
        return;
    }
    char b;
    ssize_t n = ops_.recv(fd(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) {
        RS_LOG(debug, "fd %d: peer closed its socket", fd());
        peer_closed_.store(true);
        if (in_band()) {
            // Our marker will get no answer: what landed in our ring is the
            // peer's last data, read on from where our reader stopped.
            uint32_t asked = RingControl::asked;
            transport_->rx_control()->back_state.compare_exchange_strong(asked, RingControl::ring);
        }
    } else if (n > 0 && rx_back()) {
        // The peer took its direction back to TCP between our two looks.
    } else if (n > 0 && in_band() && static_cast<uint8_t>(b) == back_marker::kFirstByte) {
        read_marker();  // the peer starts the way back (connection_downgrade_inband.cpp)
    } else if (n > 0) {
        // Nothing of ours: a path around the shim wrote it, and no order with
        // the ring's bytes can be established. Never dropped, never read out of order.
        reset_both("bytes on the TCP stream after the switch to the ring (written around the shim)");
    } else if (errno == ECONNRESET) {
        // The peer's RST (SO_LINGER 0, or unread data at its close): ECONNRESET
        // for our reader, not EOF, as TCP reports it (our peek took the
        // kernel's error: it is ours to report once). After the peer's FIN
        // (its end-of-stream record landed: CLOSE_WAIT) tcp_reset says EPIPE;
        // after both FINs, nothing.
        const bool fin = peer_fin_seen();
        if (!peer_reset_.exchange(true) && !(fin && shut_wr_)) pending_err_.store(fin ? EPIPE : ECONNRESET);
    } else if (errno == EBADF || errno == ENOTSOCK || errno == ENOMEM || errno == ENOBUFS) {
        // The call's own failure, not the connection's (a retired fd number).
        peer_reset_.store(true);
        peer_closed_.store(true);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        socket_failed(errno);
    }
}

// The TCP socket under the rings ended with an error of its own (keepalive or
// TCP_USER_TIMEOUT gave up: ETIMEDOUT; an ICMP error made hard by IP_RECVERR).
// TCP reports it once, after the bytes that had arrived, then EOF; never an
// EOF alone, which would make a cut stream look complete. The kernel forgot
// the socket, so the peer's next segment draws a RST: over shared memory its
// writer reads that in the ring it writes (RingControl::gone); over RDMA its
// next write after our close finds no queue pair, and a NIC fails it after
// its retries: the way back to TCP meets the RST (rxe retries for good).
void Connection::socket_failed(int err) {
    RS_LOG(info, "fd %d: the TCP socket under the ring failed: %s", fd(), strerror(err));
    tcp_failed_.store(true);
    if (!peer_reset_.exchange(true)) pending_err_.store(err);
    // (The control block only: an RDMA peer meets the RST, above.)
    if (RingControl* c = transport_->rx_control()) c->reader_state.store(RingControl::gone, std::memory_order_release);
    wake_local();
}

bool Connection::drain_if_free(News n) {
    if (!try_own_drain()) return false;
    drain_for(n);
    release_drain();
    pass_wake_on();
    return true;
}

// A sleeper arms before it tries to own the drain; one that found it owned
// (Drain::busy: this drain, or a send's look at the socket) sleeps armed on the
// doorbell that a drain outside any sleep then takes: the peer's bytes or end
// rang it, and that sleeper slept on beside them (tokio: the driver thread in
// epoll_wait, while a worker's nonblocking read looked at the socket; its
// connection hung for good, 2026-12-03). The drain is taken where owners take
// it; the ring goes on to the armed ones, who look and sleep again, as owners.
void Connection::pass_wake_on() {
    {
        signals::DeferHandlers held;  // (as arm_side)
        std::lock_guard<HandlerSafeMutex> lk(arm_mu_);
        if (reader_sleepers_ == 0 && writer_sleepers_ == 0) return;
    }
    transport_->wake_self();
}

// The one place that turns what a wait saw into a drain (News, connection.hpp).
// Each News comes from a kernel look at the socket (the sleep's, or
// fds_have_news below): the next now-and-then look can wait.
void Connection::drain_for(News n) {
    next_tcp_look_.store(__rdtsc() + kTcpLookCycles, std::memory_order_relaxed);
    switch (n) {
        case News::none: return;
        case News::doorbell: return drain_locked(false);
        case News::some: return drain_locked();
        case News::unknown:
            if (fds_have_news()) drain_locked();
            return;
    }
}

// What drain_locked takes is announced on one of these two fds: the doorbell
// (readable), or the TCP socket's bytes, FIN, RST or error
// (POLLIN, POLLRDHUP, POLLERR, POLLHUP; a retired number POLLNVAL). All level-
// triggered: what a look leaves is still there for the next look or sleep,
// so skipping the drain when none is ready loses nothing. (Over RDMA the
// drain also reaps receive completions; the writer and the reader reap them
// on their own paths, rdma_transport.cpp.)
bool Connection::fds_have_news() {
    pollfd p[2] = {{fd(), POLLIN | POLLRDHUP, 0}, {transport_->wake_fd(), POLLIN, 0}};
    const int saved = errno;
    const int n = ops_.poll(p, 2, 0);
    errno = saved;
    return n != 0;  // the poll's own failure: the drain meets and reports it
}

// A peer that died (its kernel's FIN, or RST where it left our bytes unread)
// says so only on the TCP socket, which a program that only sends never has
// us read: TCP's send after the RST fails, ours went on into a ring nobody
// reads. A nonblocking reader that finds the ring empty and never waits is in
// the same place: told EAGAIN for good. Looked at now and then (a look costs
// a system call, a send on the ring none), the FIN or RST reaches them as if
// it had travelled about a millisecond longer. A program that also waits
// drains at every wake-up (drain_for), and then these looks are skipped.
bool Connection::look_at_socket_now_and_then() {
    if (peer_closed_.load(std::memory_order_relaxed) || peer_reset_.load(std::memory_order_relaxed)) return false;
    const uint64_t now = __rdtsc();
    if (now < next_tcp_look_.load(std::memory_order_relaxed)) return false;
    // Also when another thread owns the drain (one asleep in recv owns it):
    // then it looks, and we try again only in a millisecond.
    next_tcp_look_.store(now + kTcpLookCycles, std::memory_order_relaxed);
    return drain_if_free();
}

// ---------------------------------------------------------------- blocking calls

// wait_engine hooks for one blocking send or recv on this connection.
struct Connection::Sleeper {
    Connection& c;
    ReadyRef ready;
    bool reader;
    bool owned = false;
    News news = News::none;  // what the last kernel wait saw of the connection's fds (not the bell)
    Phase phase = Phase::undecided;  // at the arm
    int bell = -1;                   // this thread's, registered while the phase may change (phase_bell.hpp)
    bool bell_rang = false;

    int check(wait::Look /*look*/) { return ready() ? 1 : 0; }
    bool peek() { return ready(); }
    uint32_t spin_budget_us() { return c.spin_.budget_us(); }
    bool learns() { return c.spin_.learns(); }
    wait::Armed arm() {
        phase = c.phase();
        bool may_sleep = c.arm_side(reader);
        owned = c.try_own_drain();
        wait::Armed a{may_sleep, owned, c.max_sleep_us(reader ? POLLIN : POLLOUT)};
        if (Connection::phase_may_change(phase)) {
            bell = bell::thread_bell();
            if (bell >= 0) c.watch_phase(bell);
            else a.max_sleep_us = wait::kNapUs;  // no bell: look again now and then
        }
        return a;
    }
    // Another thread may switch the connection meanwhile: the wait set changes.
    bool changed() { return ready() || c.phase() != phase; }
    int sleep(int64_t timeout_us, const signals::Seen& since) {
        // The TCP socket (the peer's bytes before its switch, its FIN or
        // RST), the transport's doorbell, if it has one (poll skips -1), and the bell.
        pollfd p[3] = {{c.fd_, POLLIN, 0}, {c.transport_->wake_fd(), POLLIN, 0}, {bell, POLLIN, 0}};
        if (p[1].fd >= 0) {
            if (c.peer_closed_.load() || (!reader && c.peer_fin_.load()))
                p[0].fd = -1;  // its EOF stays readable: no busy loop
            // A writer while the peer's bytes still come over TCP: only its FIN matters
            // (unread data there would wake us for nothing, again and again).
            else if (!reader && c.rx_on_tcp()) p[0].events = POLLRDHUP;
        }
        int rc = sleep::poll(p, bell >= 0 ? 3 : 2, timeout_us, nullptr, since);
        // Only a doorbell fired: its drain need not look at the TCP socket.
        // Only the bell fired, or none (a timeout, a signal): nothing to drain.
        if (rc <= 0 || (p[0].revents | p[1].revents) == 0) news = News::none;
        else news = p[1].fd >= 0 && p[0].revents == 0 ? News::doorbell : News::some;
        bell_rang = rc > 0 && bell >= 0 && p[2].revents != 0;
        return rc;
    }
    void settle(int, bool) {
        if (owned) {
            c.drain_for(news);
            c.release_drain();
        }
        news = News::none;
        c.disarm_side(reader);
        if (bell >= 0) {
            c.unwatch_phase(bell);
            if (bell_rang) bell::drain(bell);
        }
        bell = -1;
        bell_rang = false;
    }
    void learn(int64_t waited_us, bool) { c.spin_.record(waited_us); }
};

Connection::Wait Connection::wait_for(ReadyRef ready, bool reader, int64_t timeout_us) {
    if (!shared_file_settings(reader, timeout_us)) return Wait::timeout;  // EAGAIN
    Sleeper s{*this, ready, reader};
    for (;;) {
        const signals::Seen since = signals::seen();
        int rc = wait::run(s, timeout_us, since);
        if (rc > 0) return Wait::ready;
        if (rc == 0) return Wait::timeout;
        if (errno == EINTR) return signal_restarts_call(since, timeout_us > 0) ? Wait::restart : Wait::interrupted;
        // Any other failure of the kernel wait: look again.
    }
}

int Connection::wait_failed(Wait w) {
    errno = w == Wait::timeout ? EAGAIN : w == Wait::restart ? ERESTART : EINTR;
    return -1;
}

// ---------------------------------------------------------------- poll and epoll

uint32_t Connection::state_changes() {
    const uint32_t races = races_lost_.load(std::memory_order_acquire) << 4;
    if (!transport_) return races;
    const bool fin = peer_end_shown(), reset = peer_reset_.load();
    return races | (shut_wr_ ? 1u : 0u) | (shut_rd_ ? 2u : 0u) | (fin || reset ? 4u : 0u) | (fin && reset ? 8u : 0u);
}

// The readers' lock is held by a look at the ring (a poll or epoll scan counts
// what is readable under it), a reader blocked for data, or a hand-over. A
// receive that may not wait says EAGAIN then, where the kernel's would only
// have waited for the socket lock and read: an edge-triggered waiter (tokio)
// had its edge for those bytes already, stopped reading, and slept for good
// beside them. So such an EAGAIN with bytes there is one more edge
// (state_changes) and a ring of our doorbell, for a waiter asleep to look.
// The peer's end is such news too: TCP's receive would have said 0 (a tokio
// sink waited for good for an EOF whose edge its lost race had spent), the
// kernel's FIN included: a peer that never switched (the client still in
// rv_accepted) ends on TCP, and peer_fin_ says so only once a drain looked
// (a tokio sink's server spun for good beside the readable EOF).
// With nothing there (a reader asleep for data holds it) there is no edge:
// an edge and an EAGAIN at every look would be a loop.
void Connection::lost_lock_race(bool reader) {
    if (!reader) return;  // (writers' lock: no look takes it)
    const bool news = kernel::inq(fd()) > 0 || (transport_ && (ring_readable(nullptr) > 0 || peer_fin_seen())) ||
                      peer_fin_.load() || peer_reset_.load() || (tcp_events(POLLRDHUP) & (POLLRDHUP | POLLHUP | POLLERR));
    if (!news) return;
    races_lost_.fetch_add(1, std::memory_order_acq_rel);
    RS_LOG(debug, "fd %d: a receive lost the readers' lock beside unread bytes or the peer's end: EAGAIN, and one more edge", fd());
    if (transport_) transport_->wake_self();
}

short Connection::ready_events(short wanted, short* kernel_events) {
    *kernel_events = 0;
    const short in = wanted & (POLLIN | POLLRDNORM);
    const short out = wanted & (POLLOUT | POLLWRNORM);
    // A reset shuts both directions (tcp_reset): everything reads, RDHUP too.
    // POLLERR only while the error is owed: TCP's sk_err goes once a call took it.
    auto reset_events = [&] {
        const short ev = static_cast<short>(POLLERR | POLLHUP | in | (wanted & POLLRDHUP));
        return owes_error() ? ev : static_cast<short>(ev & ~POLLERR);
    };
    // Both directions shut (ours for writing; ours for reading or the peer's
    // end): POLLHUP, which TCP reports whether asked for or not.
    auto both_shut = [&](bool peer_ended) { return shut_wr_ && (shut_rd_ || peer_ended); };
    // Shut for reading: readable, and RDHUP (tcp_poll, RCV_SHUTDOWN).
    const short shut_rd_events = static_cast<short>(in | (wanted & POLLRDHUP));
    switch (phase()) {
        case Phase::plain:
        case Phase::rv_listen:
        case Phase::rv_pending:
        case Phase::rv_offered: *kernel_events = wanted; return 0;
        case Phase::rv_accepted: {
            // Both directions still on TCP; the server may switch any moment (wake fd).
            pollfd p{fd(), wanted, 0};
            ops_.poll(&p, 1, 0);
            *kernel_events = wanted;
            // Our SHUT_RD is recorded, not the kernel's (Connection::shutdown): tcp_poll's part of it.
            if (shut_rd_) p.revents |= static_cast<short>(shut_rd_events | (shut_wr_ ? POLLHUP : 0));
            return p.revents;
        }
        case Phase::failed: return static_cast<short>(reset_events() | out);
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
        default:  // waiting for the peer's handshake message
            *kernel_events = POLLIN;
            // Our shutdowns then are recorded, not the kernel's (Connection::shutdown).
            if (!shut_rd_) return 0;
            return static_cast<short>(shut_rd_events | (shut_wr_ ? POLLHUP | out : 0));
    }
    *kernel_events = POLLIN;  // doorbells and EOF
    short r = 0;
    if (transport_->wake_fd() >= 0) {
        if (peer_closed_.load()) *kernel_events = 0;  // its EOF stays readable: no busy loop
        if (rx_on_tcp()) {
            // Only what the app waits for: a FIN kept readable would wake a writer for nothing.
            *kernel_events = in ? POLLIN : (peer_fin_.load() ? 0 : POLLRDHUP);
            // The peer's bytes before its switch are still on TCP.
            // Sends back on TCP (connection_downgrade.cpp): the kernel says when it may write.
            const short kout = tx_back() ? out : 0;
            if (kout) *kernel_events |= kout;
            pollfd p{fd(), static_cast<short>(in | kout | (wanted & POLLRDHUP)), 0};
            ops_.poll(&p, 1, 0);
            r |= p.revents;
            if (out && !kout && (transport_->writer().writable() || peer_reset_.load() || fin_peer_gone())) r |= out;
            // The peer's end-of-stream record behind its switch: the FIN TCP would
            // show behind the bytes still queued before it.
            const bool ring_end = transport_->reader().fin_landed() && tcp_part_queued(nullptr);
            if (ring_end) r |= static_cast<short>(wanted & POLLRDHUP);
            // Our shutdowns are recorded, not the kernel's: tcp_poll's part of them is ours to add.
            if (shut_rd_) r |= shut_rd_events;
            if (both_shut(peer_closed_.load() || peer_fin_.load() || ring_end)) r |= POLLHUP;
            // The peer's end, not before TCP's FIN would have landed (connection_end_window.cpp).
            if ((r & (POLLRDHUP | POLLHUP)) && !(r & POLLERR) && !shut_rd_ && !end_fits())
                r &= static_cast<short>(~(POLLRDHUP | POLLHUP));
            note_resets();  // ring bytes past our shutdown both ways, a peer gone
            if (peer_reset_.load()) r |= reset_events();
            return r;
        }
    }
    if (out && tx_back()) {
        // Our sends are back on TCP (connection_downgrade.cpp), our receives not yet:
        // the kernel says when we may write; the ring, whether there is more to read.
        *kernel_events |= out;
        pollfd p{fd(), out, 0};
        ops_.poll(&p, 1, 0);
        r |= static_cast<short>(p.revents & (out | POLLERR | POLLHUP));
        wanted &= static_cast<short>(~out);
    }
    const short out_left = wanted & (POLLOUT | POLLWRNORM);
    // We asked the peer to send our unread ring bytes again over TCP: until it
    // has, nothing is readable (the ring's bytes are no longer ours to read).
    auto st = rx_waiting_back() ? ring::RingStatus::would_block : transport_->reader().poll();
    note_resets();
    const bool closed = peer_closed_.load(), reset = peer_reset_.load() || transport_failed();
    // Asked at most once per look: past the peer's FIN it walks the ring.
    int end_shown = -1;
    auto end_shown_now = [&] {
        if (end_shown < 0) end_shown = peer_end_shown() ? 1 : 0;
        return end_shown == 1;
    };
    if (st == ring::RingStatus::ok) {
        r |= in;
        // TCP reports the peer's FIN as soon as it arrives, even behind unread
        // data, once no more than its receive window is unread ahead of it.
        if ((wanted & POLLRDHUP) && end_shown_now()) r |= POLLRDHUP;
    }
    else if (st == ring::RingStatus::eof || (closed && st == ring::RingStatus::would_block))
        r |= static_cast<short>(in | (wanted & POLLRDHUP));
    else if (st == ring::RingStatus::broken) r |= static_cast<short>(in | POLLERR);
    // In band, between our marker and the peer's, a write would only wait.
    const bool tx_waits = marker_out() && !tx_back();
    // Shut for writing: writable, the write fails with EPIPE (as tcp_poll says).
    if (out_left && (closed || reset || shut_wr_ || (!tx_waits && (transport_->writer().writable() || fin_peer_gone()))))
        r |= out_left;
    if (reset) r |= reset_events();
    if (shut_rd_) r |= shut_rd_events;
    if (shut_wr_ && (shut_rd_ || st == ring::RingStatus::eof || (closed && st == ring::RingStatus::would_block) || end_shown_now()))
        r |= POLLHUP;
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

int64_t Connection::max_sleep_us(short wanted) {
    constexpr int64_t kPeerGoneCheckUs = 100000;  // fin_peer_gone() looks at most this often
    if ((wanted & (POLLOUT | POLLWRNORM)) && peer_fin_.load() && !peer_gone_.load()) return kPeerGoneCheckUs;
    return -1;
}

void Connection::disarm(int token) {
    if (token & 1) disarm_side(true);
    if (token & 2) disarm_side(false);
}

Connection::Drain Connection::try_begin_sleep() {
    if (!has_rings(phase())) return Drain::none;
    return try_own_drain() ? Drain::owned : Drain::busy;
}

void Connection::end_sleep(Drain d, News n) {
    if (d != Drain::owned) return;
    if (has_rings(phase())) drain_for(n);
    release_drain();
}

}  // namespace rdmasock
