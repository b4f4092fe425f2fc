// The ring data path of an upgraded connection: send, recv and what they count
// (docs/protocol.md). Doorbells, waiting and readiness: connection_doorbell.cpp.
#include "connection/connection_detail.hpp"

#include <poll.h>

#include <cstring>

#include "connection/idle_windows.hpp"
#include "sys/iov_check.hpp"
#include "base/log.hpp"
#include "rdma/rdma_setup.hpp"
#include "shm/shm_transport.hpp"
#include "sys/interruptible_sleep.hpp"
#include "sys/signal_restart.hpp"
#include "sys/thread_cancel.hpp"
#include "wait/phase_bell.hpp"

namespace rdmasock {

using namespace detail;

// A direction's lock before the rings (the rendezvous phases, or back on TCP).
// A blocking call holds it across its kernel wait (the kernel lets go of the
// socket lock while it sleeps): a call that may not block never waits behind
// it, it takes EAGAIN, as the kernel answers the thread that lost the race.
// One that may block waits as over TCP, where both sleep on the socket, each
// ended by its own signal or timeout (a mutex wait was not: the second reader
// of signal_check's two_readers_case never returned EINTR, and then slept for
// good on a socket the first had emptied). It sleeps on its thread's bell,
// which the holder's unlock rings (SideLock's wake: wake_local).
bool Connection::lock_tcp_side(std::unique_lock<SideLock>& lk, int flags, bool for_write) {
    if (lk.try_lock()) return true;
    if (nonblocking() || (flags & MSG_DONTWAIT)) {
        lost_lock_race(!for_write);
        errno = EAGAIN;
        return false;
    }
    SideLock::Waiting counted(*lk.mutex());
    const int64_t timeout = timeout_for(for_write);
    const CallTimeout tmo(timeout);
    const signals::Seen since = signals::seen();
    const int bell = bell::thread_bell();
    for (;;) {
        if (bell >= 0) watch_phase(bell);
        if (lk.try_lock()) {
            if (bell >= 0) unwatch_phase(bell);
            return true;
        }
        const int64_t left = tmo.left_us();
        if (left == 0) {
            if (bell >= 0) unwatch_phase(bell);
            errno = EAGAIN;  // SO_RCVTIMEO/SO_SNDTIMEO passed
            return false;
        }
        // No bell (none could be made): look again now and then.
        const int64_t us = bell >= 0 ? left : (left < 0 || left > wait::kNapUs ? wait::kNapUs : left);
        pollfd p{bell, POLLIN, 0};
        const int rc = sleep::poll(&p, bell >= 0 ? 1 : 0, us, nullptr, since);
        const int err = errno;
        if (bell >= 0) {
            unwatch_phase(bell);
            if (rc > 0) bell::drain(bell);
        }
        if (rc < 0 && err == EINTR) {
            errno = signal_restarts_call(since, timeout > 0) ? ERESTART : EINTR;
            return false;
        }
    }
}

// A direction's lock on the ring path. Another blocked call may hold it across
// its sleep (two threads reading one socket): over TCP both would sleep on the
// socket, each ended by its own timeout or signal, so waiting for the lock is a
// wait like the others, ended by the holder's unlock (side_lock.hpp).
bool Connection::lock_ring_side(std::unique_lock<SideLock>& lk, int flags, bool reader, const CallTimeout& tmo) {
    if (lk.try_lock()) return true;
    if (nonblocking() || (flags & MSG_DONTWAIT)) {
        lost_lock_race(reader);
        errno = EAGAIN;
        return false;
    }
    SideLock::Waiting counted(*lk.mutex());
    const Wait res = wait_for([&] { return lk.owns_lock() || lk.try_lock(); }, reader, tmo.left_us());
    if (lk.owns_lock()) return true;
    wait_failed(res);
    return false;
}

ssize_t Connection::ring_send(const iovec* iov, int iovcnt, int flags) {
    const CallTimeout tmo(timeout_for(true));
    std::unique_lock<SideLock> lk(write_mu_, std::defer_lock);
    if (!lock_ring_side(lk, flags, false, tmo)) return -1;
    if (!user_iov_ok(iov, iovcnt)) {
        errno = EFAULT;  // no process maps it; other bad buffers fault in the guarded copy
        return -1;
    }
    const size_t want = iov_total(iov, iovcnt);
    const bool nb = nonblocking() || (flags & MSG_DONTWAIT);
    auto& w = transport_->writer();
    size_t total = 0;
    look_at_socket_now_and_then();
    for (;;) {
        note_resets();
        const bool failed = transport_failed();  // in band: starts the way back instead (false)
        if (!failed && w.status() == ring::RingStatus::broken) begin_way_back("send ring broken: " + w.error());
        const bool going_back = marker_out();
        if (shut_wr_ || failed || peer_reset_.load() ||
            (going_back ? peer_closed_.load() && !tx_back() : w.status() == ring::RingStatus::broken)) {
            if (total > 0) return static_cast<ssize_t>(total);
            RS_LOG(debug, "fd %d: send refused: shut_wr=%d reset=%d closed=%d ring=%s", fd(), shut_wr_.load(), peer_reset_.load(),
                   peer_closed_.load(), ring::to_string(w.status()));
            errno = shut_wr_ || peer_reset_.load() ? EPIPE : ECONNRESET;
            // The peer's RST: its error once (ECONNRESET without SIGPIPE, or
            // EPIPE), then EPIPE; also past our own SHUT_WR (sk_stream_error).
            if (errno == EPIPE) {
                if (int e = take_pending_err()) errno = e;
            }
            if (errno == EPIPE) raise_sigpipe(flags);
            return -1;
        }
        IovCursor cur(iov, iovcnt, total);
        const Way way = tx_enter_locked();
        if (way == Way::wait) {
            // In band, our marker is out (connection_downgrade_inband.cpp): the
            // peer's says where the take-back starts; then the rest goes on TCP.
            drain_if_free();
            if (downgrade_due()) continue;
            if (nb) {
                if (total > 0) return static_cast<ssize_t>(total);
                errno = EAGAIN;
                return -1;
            }
            auto res = wait_for([&] { return downgrade_due() || peer_reset_.load() || peer_closed_.load() || shut_wr_.load(); },
                                false, tmo.left_us());
            if (res != Wait::ready) {
                if (total > 0) return static_cast<ssize_t>(total);
                return wait_failed(res);
            }
            continue;
        }
        if (way != Way::ring) {
            // Back on TCP (connection_downgrade.cpp): the rest follows what was sent again there.
            ssize_t n = tcp_send_locked(cur.v, cur.n, flags);
            if (n < 0) return total > 0 ? static_cast<ssize_t>(total) : -1;
            return static_cast<ssize_t>(total + static_cast<size_t>(n));
        }
        if (!tx_switched_.load(std::memory_order_relaxed)) {
            // Dekker with a shutdown() that began before the switch (Connection::shutdown):
            // either it sees our phase and writes its end of stream after our records,
            // or we see its shut_wr_ here and never switch (the kernel's FIN ends the stream).
            std::atomic_thread_fence(std::memory_order_seq_cst);
            if (shut_wr_.load()) {
                tx_leave_locked();
                continue;  // refused at the top: EPIPE, or what this call sent before
            }
        }
        switch_tx_locked();
        auto r = w.writev(cur.v, cur.n);
        tx_leave_locked();
        if (r.fault && r.bytes == 0) {  // the application's buffer: what was sent before it, or EFAULT
            if (total > 0) return static_cast<ssize_t>(total);
            errno = EFAULT;
            return -1;
        }
        if (r.bytes > 0) {
            total += r.bytes;
            tx_bytes_ += r.bytes;
            ring_doorbell();
            if (w.window_grown() && !idle_watched_.load(std::memory_order_relaxed)) idle_windows::watch(this);
            note_resets(true);  // bytes to a socket that is gone draw TCP's RST: the next call fails
            if (r.fault || total == want) return static_cast<ssize_t>(total);
            continue;
        }
        if (r.status == ring::RingStatus::broken) {
            RS_LOG(warn, "fd %d: send ring broken: %s", fd(), w.error().c_str());
            continue;
        }
        if (want == 0) return 0;
        send_full_.fetch_add(1, std::memory_order_relaxed);
        if (!w.has_space() && reader_gone()) {
            // A full ring nobody will ever read: the RST TCP would have seen.
            if (!peer_reset_.exchange(true)) pending_err_.store(ECONNRESET);
            continue;
        }
        if (nb) {
            if (total > 0) return static_cast<ssize_t>(total);
            // Without a poll nobody looks at the TCP socket: a peer killed with our
            // bytes unread (its kernel's FIN or RST) must not leave a writer that
            // only retries with EAGAIN for good. TCP says ECONNRESET.
            if (drain_if_free() && (peer_reset_.load() || reader_gone())) continue;
            errno = EAGAIN;
            return -1;
        }
        auto res = wait_for([&] { return w.has_space() || peer_reset_.load() || reader_gone() || transport_->failed() || shut_wr_.load() || downgrade_due() || handing_over_.load(); }, false,
                            tmo.left_us());
        if (res != Wait::ready) {
            if (total > 0) return static_cast<ssize_t>(total);
            return wait_failed(res);
        }
        if (!w.has_space() && reader_gone() && !peer_reset_.exchange(true)) pending_err_.store(ECONNRESET);  // nobody will ever read
    }
}

// An idle connection's grown send window goes back (idle_windows.hpp).
Connection::Idle Connection::give_back_idle_window() {
    std::unique_lock<SideLock> lk(write_mu_, std::try_to_lock);
    if (!lk.owns_lock()) return Idle::later;  // a send under way (or one asleep on a full ring)
    if (phase() != Phase::upgraded || !owned_by_this_process() || shut_wr_) return Idle::done;
    auto& w = transport_->writer();
    if (!w.window_grown()) return Idle::done;
    if (tx_bytes_ != idle_seen_tx_) {  // sent since the last pass: not idle yet
        idle_seen_tx_ = tx_bytes_;
        idle_passes_ = 0;
        return Idle::later;
    }
    RingControl* c = transport_->tx_control();
    // Held by another process (a forked copy's take-back, the peer's claim):
    // the next pass, rather than wait for it here.
    if (c && c->writer_busy.load(std::memory_order_relaxed) != 0) return Idle::later;
    // On the way back to TCP: a send's take-back (which may wait on the
    // socket) is not this pass's business, and the rings are done with.
    if (handing_over_.load() || (c && (c->back_state.load() != RingControl::ring ||
                                       transport_->rx_control()->back_state.load() == RingControl::back)))
        return Idle::done;
    if (tx_enter_locked() != Way::ring) return Idle::done;
    const bool back = w.give_back_if_drained();
    tx_leave_locked();
    if (back) {
        RS_LOG(debug, "fd %d: idle: the send window went back to %llu KiB", fd(),
               static_cast<unsigned long long>(w.window() >> 10));
        return Idle::done;
    }
    return ++idle_passes_ >= idle_windows::kGiveUpPasses ? Idle::done : Idle::later;
}

namespace {
// MSG_PEEK|MSG_TRUNC: how many bytes a read would take, nothing copied.
ring::IoResult peek_count(ring::RingReader& rd, size_t len) {
    ring::IoResult r;
    r.bytes = std::min(len, rd.readable_bytes());
    r.status = r.bytes > 0 ? ring::RingStatus::ok : rd.check_next();
    return r;
}
}  // namespace

// TCP's peek for all of it waits until all of it is queued (or the end, a
// reset, a signal, the timeout: then it shows what there is, if anything); the
// peek that follows shows it. False with errno when nothing came. Out of line:
// the receive path every call takes stays as it was (inlined here, it cost the
// 64 B ping-pong 20 ns a round trip).
[[gnu::cold, gnu::noinline]] bool Connection::wait_to_peek_all(size_t want, const CallTimeout& tmo) {
    auto& rd = transport_->reader();
    auto enough = [&] {
        return rd.readable_bytes() >= want || rd.fin_landed() || peer_closed_.load() || peer_reset_.load() ||
               transport_->failed() || shut_rd_.load() || rx_back() || downgrade_due() || ask_pending();
    };
    while (!enough()) {
        const Wait w = wait_for(enough, true, tmo.left_us());
        if (w == Wait::ready) continue;
        if (rd.readable_bytes() == 0) return wait_failed(w), false;
        break;
    }
    return true;
}

// After shutdown(SHUT_RD) TCP still hands out what is queued, and what arrives
// later too; only where a read would wait does it return 0 (tcp_recvmsg checks
// RCV_SHUTDOWN when the queue is empty). So does the ring.
ssize_t Connection::ring_recv(const iovec* iov, int iovcnt, int flags) {
    const CallTimeout tmo(timeout_for(false));
    std::unique_lock<SideLock> lk(read_mu_, std::defer_lock);
    if (!lock_ring_side(lk, flags, true, tmo)) return shut_rd_ ? 0 : -1;  // a blocked reader holds it
    const bool peek = flags & MSG_PEEK;
    const bool fault = !(flags & MSG_TRUNC) && !user_iov_ok(iov, iovcnt);
    if ((flags & MSG_OOB) && !rx_on_tcp()) {
        errno = EINVAL;  // TCP with no urgent mark pending; the ring never carries one
        return -1;
    }
    const bool waitall = (flags & MSG_WAITALL) && !peek;
    const bool nb = nonblocking() || (flags & MSG_DONTWAIT);
    const size_t want = iov_total(iov, iovcnt);
    note_resets();
    if (want == 0) return recv_nothing(nb);
    auto& rd = transport_->reader();
    if (peek && (flags & MSG_WAITALL) && !nb && !rx_on_tcp()) [[unlikely]]
        if (!wait_to_peek_all(want, tmo)) return -1;
    size_t total = 0;
    // A peek that saw every TCP byte before the peer's switch goes on into the
    // ring: TCP's peek shows all that is queued (the TCP part is not consumed,
    // so rx_on_tcp() still says TCP).
    bool peeked_to_switch = false;
    for (;;) {
        if (downgrade_due()) serve_downgrade();  // the peer asked for our sends back
        if (ask_pending()) ask_locked();         // hand_over() is waiting for us to ask
        if (!peeked_to_switch && rx_on_tcp()) {
            // Handed back by a claim while this reader waited for the lock: its kept bytes first.
            if (ssize_t r; total == 0 && rx_back() && kept_first(iov, iovcnt, flags, r)) return r;
            // Bytes the peer sent before its switch: from TCP, never past the offset.
            uint64_t at = rx_switch_at_.load(std::memory_order_acquire);
            size_t room = want - total;
            if (at != RingControl::kNotSwitched && !rx_back()) room = std::min<uint64_t>(room, at - tcp_rx_.load());
            IovCursor cur(iov, iovcnt, total);
            cur.cap(room);
            msghdr mh{};
            mh.msg_iov = cur.v;
            mh.msg_iovlen = static_cast<size_t>(cur.n);
            ssize_t got = want == 0 ? 0 : ops_.recvmsg(fd(), &mh, (flags & (MSG_PEEK | MSG_TRUNC | MSG_OOB)) | MSG_DONTWAIT);
            if (got > 0) {
                total += static_cast<size_t>(got);
                if (!peek) {
                    tcp_rx_.fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
                    if (at != RingControl::kNotSwitched && !rx_back() && rd.poll() != ring::RingStatus::would_block)
                        tcp_read_ahead_of_ring_.fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
                }
                // Up to the peer's switch: its next bytes wait in the ring, and TCP's
                // recv returns all that is queued. A read cut at the switch looks like
                // an emptied queue to a program that takes a short read after
                // POLLRDHUP for the end of the stream (haproxy does): the read goes on
                // into the ring.
                const uint64_t seen = tcp_rx_.load() + (peek ? total : 0);
                const bool at_switch = !(flags & MSG_OOB) && at != RingControl::kNotSwitched && !rx_back() && seen == at;
                if (total == want || (!waitall && !at_switch)) return static_cast<ssize_t>(total);
                peeked_to_switch = peek;
                continue;
            }
            if (got == 0) return static_cast<ssize_t>(total);  // end of stream before the switch
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                kernel_error_taken(errno, total > 0);
                if (total > 0) return static_cast<ssize_t>(total);
                return -1;
            }
            if (shut_rd_.load()) return static_cast<ssize_t>(total);
            if (peer_reset_.load() && peer_socket_gone()) {
                // Our ring send drew the RST that TCP's socket would report here.
                if (total > 0) return static_cast<ssize_t>(total);
                if (int e = take_pending_err()) return errno = e, -1;
                return 0;
            }
            if (nb) {
                if (total > 0) return static_cast<ssize_t>(total);
                errno = EAGAIN;
                return -1;
            }
            auto res = wait_for([&] { return !rx_on_tcp() || tcp_readable() || shut_rd_.load() || downgrade_due() || ask_pending() ||
                                             (peer_reset_.load() && peer_socket_gone()); },
                                true, tmo.left_us());
            if (res != Wait::ready) {
                if (total > 0) return static_cast<ssize_t>(total);
                return wait_failed(res);
            }
            continue;
        }
        const Way way = rx_enter_locked();
        if (way == Way::tcp && !rx_on_tcp() && peer_reset_.load()) {
            // The ring's busy word could not be had (lock_busy reset the connection).
            if (total > 0) return static_cast<ssize_t>(total);
            errno = ECONNRESET;
            return -1;
        }
        if (way == Way::tcp) {
            // Back on TCP: rx_on_tcp() says so now. A peek that took the TCP
            // part already would skip it again and loop: it has its bytes.
            if (peeked_to_switch) return static_cast<ssize_t>(total);
            continue;
        }
        if (way == Way::wait) {
            // We asked the peer to send our unread bytes again over TCP (hand_over).
            // In band its answer is a marker on the TCP stream: look for it.
            if (in_band() && drain_if_free() && !rx_waiting_back()) continue;
            if (peer_reset_.load()) {
                if (total > 0) return static_cast<ssize_t>(total);
                errno = ECONNRESET;
                return -1;
            }
            if (shut_rd_.load()) return static_cast<ssize_t>(total);
            if (nb || (total > 0 && !waitall)) {
                if (total > 0) return static_cast<ssize_t>(total);
                errno = EAGAIN;
                return -1;
            }
            auto res = wait_for([&] { return !rx_waiting_back() || shut_rd_.load() || peer_reset_.load(); }, true,
                                tmo.left_us());
            if (res != Wait::ready) {
                if (total > 0) return static_cast<ssize_t>(total);
                return wait_failed(res);
            }
            continue;
        }
        // TCP fails a copy into a bad buffer only when there is something to copy,
        // and leaves the bytes queued; MSG_TRUNC discards without copying.
        IovCursor cur(iov, iovcnt, total);
        // Shut both ways by us: what came after is not ours to read (note_late_arrivals).
        const size_t room = std::min<uint64_t>(want - total, rx_room());
        const bool efault = fault && room > 0 && rd.poll() == ring::RingStatus::ok;
        cur.cap(room);
        ring::IoResult r;
        if (room == 0) {
            note_late_arrivals();
            r.status = ring::RingStatus::would_block;
        } else if (!efault) {
            r = !(flags & MSG_TRUNC) ? rd.readv(cur.v, cur.n, !peek) : peek ? peek_count(rd, room) : rd.skip(room);
        }
        rx_leave_locked();
        if (efault || (r.fault && r.bytes == 0)) {  // the application's buffer faulted: the record stays queued
            if (total > 0) return static_cast<ssize_t>(total);
            errno = EFAULT;
            return -1;
        }
        if (r.bytes > 0) {
            total += r.bytes;
            if (!peek) {
                rx_bytes_ += r.bytes;
                transport_->after_read();
                // One fence for two Dekker pairs: the bytes we consumed are
                // ordered before our looks at the writer's "wake me" flag and at a
                // poller's hidden end (connection_end_window.cpp).
                std::atomic_thread_fence(std::memory_order_seq_cst);
                show_end_if_due();
                if (rd.unpublished() == 0) {  // we just told the writer about free space
                    if (transport_->take_peer_writer_waiting()) {
                        if (transport_->wake_fd() >= 0) {
                            transport_->ring_peer();
                        } else {
                            char b = 1;
                            ops_.send(fd(), &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                        }
                    }
                }
            }
            if (r.fault || !waitall || total == want) return static_cast<ssize_t>(total);
            continue;
        }
        if (want == 0) return 0;
        if (r.status == ring::RingStatus::eof) {
            RS_LOG(debug, "fd %d: end of stream record", fd());
            return static_cast<ssize_t>(total);
        }
        if (r.status == ring::RingStatus::broken) {
            if (can_go_back() && !marker_out()) {
                // The peer resends from our place what the ring could not give.
                begin_way_back("receive ring broken: " + rd.error());
                continue;
            }
            RS_LOG(warn, "fd %d: receive ring broken: %s", fd(), rd.error().c_str());
            if (total > 0) return static_cast<ssize_t>(total);
            errno = ECONNRESET;
            return -1;
        }
        // A peer whose kernel closed its socket and whose shim never said so is
        // judged first: where it died with our bytes unread, the end we saw
        // stands for the RST it sent (no FIN: the error, then the end).
        if (peer_closed_.load() && !peer_reset_.load()) note_reader_state(false);
        // The peer's end came before the reset (its FIN, then the RST our send
        // drew: EPIPE owed, CLOSE_WAIT): TCP's recv says EOF and leaves the
        // error. A reset first (ours for bytes past our shutdown, a dead
        // peer's) is reported, whatever end record lands after it.
        const int owed = pending_err_.load();
        const bool end_first = owed == EPIPE || (owed == 0 && peer_fin_seen());
        if ((transport_failed() || peer_reset_.load()) && !end_first) {
            if (total > 0) return static_cast<ssize_t>(total);
            // TCP reports a RST's error once; after that the stream has ended.
            if (int e = take_pending_err()) return errno = e, -1;
            if (reset_reported_.load() && !transport_failed()) return 0;
            errno = ECONNRESET;
            return -1;
        }
        // The end came first, then the reset, and the ring holds nothing more:
        // TCP's recv says EOF (the error stays owed). Not a look again: the
        // wait below ends at once for a reset, and every look finds the same.
        if (transport_failed() || peer_reset_.load()) return static_cast<ssize_t>(total);
        if (peer_closed_.load()) {  // EOF after the last record
            RS_LOG(debug, "fd %d: peer gone, end of stream", fd());
            return static_cast<ssize_t>(total);
        }
        if (shut_rd_.load()) return static_cast<ssize_t>(total);  // ours, or another thread's
        if (nb && total == 0 && !peer_closed_.load()) {
            // Without a poll nobody drains the doorbell stream: look for the
            // peer's EOF now and then so a nonblocking reader is not told EAGAIN forever.
            // Bytes, the end, or a reset or socket error the look found: the loop's top reports it.
            if (look_at_socket_now_and_then() &&
                (rd.poll() != ring::RingStatus::would_block || peer_closed_.load() || peer_reset_.load()))
                continue;
        }
        if (nb || (total > 0 && !waitall)) {  // (bytes from TCP before the switch: they are the call's)
            if (total > 0) return static_cast<ssize_t>(total);
            errno = EAGAIN;
            return -1;
        }
        auto res = wait_for([&] { return rd.poll() != ring::RingStatus::would_block || peer_closed_.load() || peer_reset_.load() || transport_->failed() || shut_rd_.load() || rx_back() || downgrade_due() || ask_pending(); },
                            true, tmo.left_us());
        if (res != Wait::ready) {
            if (total > 0) return static_cast<ssize_t>(total);
            return wait_failed(res);
        }
    }
}

// recv of no bytes asks the socket like any read (tcp_recvmsg): 0 when something
// is queued or the stream has ended, EAGAIN when nothing is and the call may not
// block; a blocking one waits once (for data, its timeout or a signal) and then
// returns 0 whatever ended the wait. A program looping "recv(buf + got, want -
// got)" once past its want takes a 0 for the end of the stream. (read() of no
// bytes never asks: the interposer returns 0, as sock_read_iter does.)
ssize_t Connection::recv_nothing(bool nb) {
    auto& rd = transport_->reader();
    auto queued = [&] {
        if (shut_rd_.load() || peer_closed_.load() || peer_reset_.load() || transport_->failed() || downgrade_due()) return true;
        return rx_on_tcp() ? tcp_readable() : rd.poll() != ring::RingStatus::would_block;
    };
    if (nb && !queued()) drain_if_free();  // a FIN or a reset the doorbell stream holds
    if (queued()) {
        if (peer_reset_.load() && !peer_closed_.load() && !shut_rd_.load()) return errno = ECONNRESET, -1;
        return 0;
    }
    if (nb) return errno = EAGAIN, -1;
    const Wait res = wait_for(queued, true, timeout_for(false));
    // A pthread_cancel request ended the wait: EINTR, on which the interposer
    // acts (thread_cancel.hpp), as glibc's recv is a cancellation point for
    // no bytes too.
    if (res == Wait::interrupted && cancel::pending()) return errno = EINTR, -1;
    return 0;
}

// Both directions shut by our own calls, the socket still open: TCP drops
// what arrives after that and answers it with a RST, which resets our socket
// too (tcp_rcv_state_process: FIN_WAIT with RCV_SHUTDOWN). The peer's writer
// learns it from the reader's state (its next send goes out, the one after
// fails, as after a close); we remember where the stream stood.
void Connection::note_shut_both_ways() {
    RingControl* c = transport_ ? transport_->rx_control() : nullptr;
    // (Before the peer's switch the cut counts no TCP byte: ring bytes past it are
    // late. Back on TCP, the kernel carries the stream as before.)
    if (!c || rx_cut_.load() != kNoCut || rx_back() || !owned_by_this_process() || fork_gen_ != fork_generation())
        return;
    transport_->tell_reader_state(RingControl::closed);
    // Dekker with the peer's send (publish, fence, read our state): a record it
    // published that we do not count here, it sees our state after.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    rx_cut_.store(rx_arrived_look());
}

// Ring bytes that arrived so far: read plus unread. rx_bytes_ first: a read
// between the two loads then counts nowhere, so the sum is never too large.
uint64_t Connection::rx_arrived_look() {
    const uint64_t delivered = rx_bytes_;
    return delivered + transport_->reader().readable_bytes_look();
}

uint64_t Connection::rx_room() {
    const uint64_t cut = rx_cut_.load();
    if (cut == kNoCut) return ~uint64_t{0};
    const uint64_t delivered = rx_bytes_;
    return cut > delivered ? cut - delivered : 0;
}

// Bytes past the cut landed: the RST that TCP's answer to them draws resets us.
void Connection::note_late_arrivals() {
    const uint64_t cut = rx_cut_.load();
    if (cut == kNoCut || peer_reset_.load()) return;
    if (rx_arrived_look() <= cut) return;
    if (peer_reset_.exchange(true)) return;
    pending_err_.store(ECONNRESET);
    RS_LOG(debug, "fd %d: bytes arrived after our shutdown both ways: a reset, as TCP's", fd());
    wake_local();
}

// The resets TCP would have seen by now: bytes that came after our shutdown
// both ways, or a send to the peer's socket that is gone.
void Connection::note_resets(bool sent_now) {
    note_late_arrivals();
    note_reader_state(sent_now);
}

// The peer's socket is gone (shared memory: it says so in the ring we write):
// TCP learns that from the RST its next segment draws, or, when the peer left
// bytes unread or set SO_LINGER 0, from the RST its close sent.
void Connection::note_reader_state(bool sent_now) {
    note_late_arrivals();
    RingControl* c = transport_ ? transport_->tx_control() : nullptr;
    if (!c || peer_reset_.load(std::memory_order_relaxed)) return;
    uint32_t st = transport_->peer_reader_state();
    if (st == RingControl::reading) {
        // The peer's kernel closed its socket (our socket saw the end) and its
        // shim never said so: the process died (a kill, an exit without close),
        // it forked since the upgrade, or, over RDMA, it closed. Its kernel's
        // close was a RST where bytes of ours were left unread, else a FIN.
        // Judged once, at the first look after the end: our later sends are
        // not the peer's unread bytes. Sends going back to TCP: the kernel judges.
        if (!peer_closed_.load(std::memory_order_relaxed) || marker_out() || tx_back()) return;
        uint32_t judged = died_as_.load();
        if (judged == RingControl::reading) {
            const uint32_t now = peer_left_unread(*c) ? RingControl::aborted : RingControl::closed;
            judged = died_as_.compare_exchange_strong(judged, now) ? now : judged;
        }
        st = judged;
    }
    if (st == RingControl::closed || st == RingControl::gone) {  // the RST comes only once we send
        if (sent_now) sent_after_close_.store(true);
        if (!sent_after_close_.load()) return;
    }
    // tcp_reset: after the peer's FIN the RST is EPIPE (CLOSE_WAIT); after ours
    // too the socket is already closed and the RST changes nothing. A peer that
    // died unread sent a RST, not the FIN our kernel saw: after our own
    // shutdown(SHUT_WR) (FIN_WAIT) that RST is ECONNRESET.
    const bool peer_fin = peer_fin_seen();
    if (shut_wr_.load() && peer_fin) return;
    if (peer_reset_.exchange(true)) return;
    const bool rst = st != RingControl::closed;  // aborted (died unread), gone, or a value no shim writes
    pending_err_.store(rst && !peer_fin ? ECONNRESET : EPIPE);
    RS_LOG(debug, "fd %d: the peer's socket is gone (%s)", fd(), rst ? "reset" : "closed");
    wake_local();
}

// The peer ended its stream: its end-of-stream record landed, or its kernel's
// FIN, unless that stands for the RST of a peer that died with our bytes
// unread (note_reader_state).
bool Connection::peer_fin_seen() {
    return (peer_closed_.load() && died_as_.load() != RingControl::aborted) || transport_->reader().fin_landed();
}

// Bytes we wrote that the peer's reader never took (our end-of-stream record
// is no byte: TCP's FIN is not data). Shared memory: its exact place
// (read_pos, stored at the end of each of its reads). RDMA keeps no such
// place here: a ring at least two thirds unread by the consumed counter
// (published every eighth of the ring) is truly unread; less is taken as read.
bool Connection::peer_left_unread(RingControl& c) {
    auto& w = transport_->writer();
    if (in_band()) return !w.writable();
    const uint64_t end = std::min(w.written(), data_end_.load());
    return c.read_pos.load(std::memory_order_acquire) < end;
}

// The peer's TCP socket failed and was forgotten (RingControl::gone): its
// kernel says nothing more on the TCP socket, ever.
bool Connection::peer_socket_gone() {
    return transport_ && transport_->peer_reader_state() == RingControl::gone;
}

int Connection::take_pending_err() {
    note_resets();
    const int e = pending_err_.exchange(0);
    if (e) {
        reset_reported_.store(true);
        taken_err_.store(e);
        // The kernel's socket got the same RST (the peer's close sent it): its
        // error is this one, taken with it (else its POLLERR would stay up).
        (void)take_kernel_error();
    }
    return e;
}

int Connection::take_kernel_error() {
    int e = 0;
    socklen_t len = sizeof e;
    const int saved = errno;
    if (kernel_sockopt_get(fd(), SO_ERROR, &e, &len) != 0) e = 0;
    errno = saved;
    return e;
}

int Connection::take_socket_error() {
    if (!has_rings(phase())) {
        // The kernel carries the stream (before the switch, or plain): its
        // socket's pending error is the one.
        return take_kernel_error();
    }
    drain_socket_now();
    return take_pending_err();
}

// Before the peer's switch offset: are all its TCP bytes up to it queued in
// the kernel (how many in *left)? Then what lies in the ring behind them is
// as TCP's would be: readable, and its end-of-stream record a FIN that landed.
bool Connection::tcp_part_queued(size_t* left) {
    if (rx_back()) return false;
    const uint64_t at = rx_switch_at_.load(std::memory_order_acquire);
    const uint64_t got = tcp_rx_.load(std::memory_order_relaxed);
    if (at == RingControl::kNotSwitched || at < got) return false;
    if (at > got && kernel::inq(fd()) < at - got) return false;
    if (left) *left = static_cast<size_t>(at - got);
    return true;
}

// A read of the kernel's socket took its error (the peer's RST, a timeout):
// TCP reports it once. It is the reset the ring's reader state may say too,
// reported now, or owed to the next call when bytes came first.
void Connection::kernel_error_taken(int err, bool owed) {
    if (err != ECONNRESET && err != EPIPE && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH) return;
    peer_reset_.store(true);
    taken_err_.store(err);
    pending_err_.store(owed ? err : 0);
    reset_reported_.store(!owed);
    wake_local();
}

void Connection::owe_again(int err) {
    if (err == 0 || taken_err_.load() != err) return;
    int none = 0;
    if (pending_err_.compare_exchange_strong(none, err)) reset_reported_.store(false);
}

// FIONREAD and the EPOLLET arrival count may be asked while another thread
// reads, and a blocking reader holds read_mu_ for as long as it waits: TCP
// answers at once, so these never wait for it. Without the lock the ring is
// walked (a look) instead of scanned.
size_t Connection::readable_bytes() {
    if (phase() == Phase::rv_accepted) return kernel::inq(fd());
    if (phase() != Phase::upgraded) return 0;
    if (rx_on_tcp()) {
        // Before the peer's switch offset: the TCP bytes up to it and, once all
        // of them are queued, the ring's after them: a read takes both without
        // waiting, and TCP counts every such byte (a count of the TCP part alone
        // held a reader that waits for FIONREAD to reach what was sent).
        size_t tcp_part = 0;
        if (!tcp_part_queued(&tcp_part)) return kernel::inq(fd());
        return tcp_part + std::min<uint64_t>(ring_readable(nullptr), rx_room());
    }
    return std::min<uint64_t>(ring_readable(nullptr), rx_room());  // nothing past our shutdown both ways
}

// What the ring holds unread: counted from the scan with the readers'
// exclusion, else walked (a reader blocked in another thread holds the lock for
// as long as it waits). *delivered (the ring bytes read so far) is read first,
// before the ring's read position: a reader consuming meanwhile makes
// delivered + readable smaller, never larger, so an edge count built on it
// never counts a byte twice.
size_t Connection::ring_readable(uint64_t* delivered) {
    std::unique_lock<SideLock> lk(read_mu_, std::try_to_lock);
    if (delivered) *delivered = rx_bytes_;
    ring::RingReader& rd = transport_->reader();
    return lk.owns_lock() ? rd.readable_bytes() : rd.readable_bytes_look();
}

uint64_t Connection::arrivals() {
    const Phase ph = phase();
    if (ph != Phase::upgraded && ph != Phase::rv_accepted) return 0;
    if (ph == Phase::rv_accepted || rx_on_tcp()) {
        // Still reading the peer's TCP bytes: what landed there, and its FIN once,
        // also behind bytes not read yet (POLLRDHUP: the kernel has it), as TCP's
        // FIN is an edge when it lands, not when the reader reaches it. (A look
        // for EOF that saw only an empty queue missed a FIN behind unread bytes:
        // an edge-triggered reader waiting for it slept on, epoll_fuzz with the
        // switch deferred.)
        size_t q = kernel::inq(fd());
        int saved = errno;
        pollfd p{fd(), POLLRDHUP, 0};
        const bool fin = ops_.poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
        errno = saved;
        // And what the peer already wrote past its switch: those bytes are new data
        // (an edge) though they wait behind TCP bytes not read yet. Counted only
        // so, the read that reaches them would raise no edge, where TCP's
        // reader, whose read made room, gets the writer's next bytes as one:
        // an event loop that waits for it after a read (nginx's proxy does)
        // slept for good. tcp_read_ahead_of_ring_ is that edge.
        const size_t ahead = transport_ ? ring_readable(nullptr) : 0;
        return tcp_rx_.load() + tcp_read_ahead_of_ring_.load() + q + ahead + (fin ? 1 : 0);
    }
    ring::RingReader& rd = transport_->reader();
    // The FIN record is never consumed and peer_closed_ never clears: +1 once, for
    // good. A reset is that end too (it may be seen before the socket's EOF is).
    const bool ended = rd.fin_landed() || peer_closed_.load() || peer_reset_.load();
    uint64_t delivered = 0;
    const size_t readable = ring_readable(&delivered);
    return tcp_rx_.load() + tcp_read_ahead_of_ring_.load() + delivered + readable + (ended ? 1 : 0);
}

}  // namespace rdmasock
