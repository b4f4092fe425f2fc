// The ring data path, doorbells, waiting and readiness of an upgraded connection
// (docs/protocol.md, docs/waiting.md).
#include "connection_detail.hpp"

#include <cstring>

#include "iov_check.hpp"
#include "log.hpp"
#include "rdma_setup.hpp"
#include "shm_transport.hpp"

namespace rdmasock {

using namespace detail;

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
    if (!user_iov_ok(iov, iovcnt)) {
        errno = EFAULT;  // TCP copies first and fails; the ring would crash in memcpy
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
        if (!w.has_space() && reader_gone()) {
            peer_reset_.store(true);  // a full ring nobody will ever read: EPIPE, as TCP's RST would
            continue;
        }
        if (nb) {
            if (total > 0) return static_cast<ssize_t>(total);
            errno = EAGAIN;
            return -1;
        }
        auto res = wait_for([&] { return w.has_space() || peer_reset_.load() || reader_gone() || transport_->failed(); }, false,
                            timeout_for(true));
        if (res == Wait::timeout) {
            if (total > 0) return static_cast<ssize_t>(total);
            errno = EAGAIN;
            return -1;
        }
        if (!w.has_space() && reader_gone()) peer_reset_.store(true);  // nobody will ever read
    }
}

namespace {
// MSG_PEEK|MSG_TRUNC: how many bytes a read would take, nothing copied.
ring::IoResult peek_count(ring::RingReader& rd, size_t len) {
    ring::IoResult r;
    r.bytes = std::min(len, rd.readable_bytes());
    r.status = r.bytes > 0 ? ring::RingStatus::ok : rd.poll();
    return r;
}
}  // namespace

ssize_t Connection::ring_recv(const iovec* iov, int iovcnt, int flags) {
    std::lock_guard<std::mutex> lk(read_mu_);
    if (!owned_by_this_process()) {
        errno = EIO;
        return -1;
    }
    if (shut_rd_) return 0;
    const bool peek = flags & MSG_PEEK;
    const bool fault = !(flags & MSG_TRUNC) && !user_iov_ok(iov, iovcnt);
    if ((flags & MSG_OOB) && !rx_on_tcp()) {
        errno = EINVAL;  // TCP with no urgent mark pending; the ring never carries one
        return -1;
    }
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
        // TCP fails a copy into a bad buffer only when there is something to copy,
        // and leaves the bytes queued; MSG_TRUNC discards without copying.
        if (fault && rd.poll() == ring::RingStatus::ok) {
            if (total > 0) return static_cast<ssize_t>(total);
            errno = EFAULT;
            return -1;
        }
        IovCursor cur(iov, iovcnt, total);
        auto r = !(flags & MSG_TRUNC) ? rd.readv(cur.v, cur.n, !peek) : peek ? peek_count(rd, want - total) : rd.skip(want - total);
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
        if (p[1].fd >= 0) {
            if (peer_closed_.load() || (!reader && peer_fin_.load())) {
                p[0].fd = -1;  // its EOF stays readable: no busy loop
                // After a FIN only sock_diag tells whether the reader went away.
                if (!reader && peer_fin_.load()) ms = ms < 0 ? 100 : std::min(ms, 100);
            }
            // A writer while the peer's bytes still come over TCP: only its FIN matters
            // (unread data there would wake us for nothing, again and again).
            else if (!reader && rx_on_tcp()) p[0].events = POLLRDHUP;
        }
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
            // Only what the app waits for: a FIN kept readable would wake a writer for nothing.
            *kernel_events = in ? POLLIN : (peer_fin_.load() ? 0 : POLLRDHUP);
            // The peer's bytes before its switch are still on TCP.
            pollfd p{fd_, static_cast<short>(in | (wanted & POLLRDHUP)), 0};
            ops_.poll(&p, 1, 0);
            r |= p.revents;
            if (out && (transport_->writer().writable() || peer_reset_.load() || fin_peer_gone())) r |= out;
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
    if (out && (transport_->writer().writable() || closed || reset || fin_peer_gone())) r |= out;
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


bool Connection::try_begin_sleep() { return !has_rings(phase()) || drain_mu_.try_lock(); }

void Connection::end_sleep(bool owned) {
    if (!has_rings(phase())) return;
    if (owned) {
        drain_locked();
        drain_mu_.unlock();
    }
}

}  // namespace rdmasock
