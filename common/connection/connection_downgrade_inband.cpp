// The way back to TCP for transports whose peer cannot see our RingControls
// (RDMA): the steps travel as back markers on the TCP stream
// (back_marker.hpp; docs/protocol.md, "Downgrade over RDMA").
//
//   either side, at any moment (a trigger, or the peer's marker arriving):
//     send_marker: our reader stops at its place P (rx: ring -> asked); the
//                  marker carrying P goes out on TCP; our writer stops writing
//                  the ring (tx_enter: wait)
//   the peer's marker (read_marker, from the doorbell drain), carrying the
//   peer reader's place Q:
//     our marker first, if it has not gone yet; then rx: -> back (what follows
//     the peer's marker on TCP is its data from P on); tx: -> asked with Q
//   the take-back (take_back_locked, by whichever thread holds write_mu_):
//     the records of our send mirror from Q to our last one go out on TCP,
//     then tx: -> back; both back: plain (finish_downgrade)
// Each side sends exactly one marker and sends its take-back only after it, so
// the first TCP byte after a marker is always the next stream byte.
#include "sys/raw_syscall.hpp"
#include "connection/connection_detail.hpp"

#include "negotiation/back_marker.hpp"
#include "ring/downgrade.hpp"
#include "base/log.hpp"
#include "shm/peer_check.hpp"

namespace rdmasock {

using namespace detail;
using downgrade::state, downgrade::kRing, downgrade::kAsked, downgrade::kBack;

bool Connection::can_go_back() {
    // A peer whose socket ended or reset will never answer a marker. (Any
    // process may go back, a forked child included: the way back needs the
    // TCP socket, the shared state and the send mirror, never the verbs.)
    return in_band() && !peer_closed_.load() && !peer_reset_.load();
}

bool Connection::marker_out() {
    if (!in_band()) return false;
    auto* rc = transport_->rx_control();
    return rc && state(*rc) != kRing;
}

void Connection::send_marker() {
    auto* rc = transport_->rx_control();
    // The reader holds reader_busy for one copy at most: its place is final
    // once we hold it and the direction is asked (rx_enter then says wait).
    // The state is shared with forked copies: whoever moves it sends the marker.
    if (!lock_busy(rc->reader_busy)) return;
    uint32_t ring = kRing;
    if (!rc->back_state.compare_exchange_strong(ring, kAsked, std::memory_order_seq_cst)) {
        downgrade::unlock(rc->reader_busy);
        return;  // ours is out already (this process or another)
    }
    back_marker::Place p{rc->read_pos.load(std::memory_order_acquire), rc->read_partial.load(std::memory_order_acquire)};
    downgrade::unlock(rc->reader_busy);
    uint8_t m[back_marker::kBytes];
    back_marker::encode(p, m);
    const int saved = errno;
    if (!send_all_ours(ops_, fd(), m, sizeof m)) {
        RS_LOG(error, "fd %d: the back marker could not be sent (%s); resetting", fd(), strerror(errno));
        peer_reset_.store(true);
    } else {
        RS_LOG(info, "fd %d: our reader stopped at ring position %llu (+%u); marker sent", fd(),
               static_cast<unsigned long long>(p.read_pos), p.read_partial);
    }
    errno = saved;
    wake_local();
}

void Connection::begin_way_back(const std::string& why) {
    if (marker_out() || !can_go_back()) return;
    {
        std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
        if (downgrade_why_.empty()) downgrade_why_ = why;
    }
    RS_LOG(warn, "fd %d: going back to tcp (%s)", fd(), why.c_str());
    send_marker();
}

// Peeks at the marker: need_more, stray, or ok with the peer's place.
back_marker::Parse Connection::peek_marker(back_marker::Place& p) {
    uint8_t m[back_marker::kBytes];
    const int saved = errno;
    ssize_t n = peek_tcp(m, sizeof m);
    errno = saved;
    return back_marker::parse(m, n > 0 ? static_cast<size_t>(n) : 0, p);
}

void Connection::read_marker() {
    back_marker::Place p;
    auto r = peek_marker(p);
    if (r == back_marker::Parse::need_more) return;  // the rest is on its way; the socket stays readable
    if (r == back_marker::Parse::stray)
        return reset_both("bytes on the TCP stream that are no back marker (written around the shim)");
    // Ours goes first: every byte we put on TCP after it is stream data.
    send_marker();
    // A forked copy of this connection may look at the socket too: the one
    // holding the reader's busy word takes the marker and turns the direction
    // back, so nobody reads the marker as data or data as a marker.
    auto* rc = transport_->rx_control();
    if (!lock_busy(rc->reader_busy)) return;
    if (state(*rc) == kBack || peek_marker(p) != back_marker::Parse::ok) {
        downgrade::unlock(rc->reader_busy);
        return;  // another process took it
    }
    uint8_t m[back_marker::kBytes];
    const int saved = errno;
    (void)ops_.recv(fd(), m, sizeof m, MSG_DONTWAIT);  // exactly the marker: what follows is data
    errno = saved;
    RS_LOG(info, "fd %d: the peer stopped reading its ring at position %llu (+%u); going back to tcp", fd(),
           static_cast<unsigned long long>(p.read_pos), p.read_partial);
    auto* tc = transport_->tx_control();
    tc->read_pos.store(p.read_pos, std::memory_order_release);
    tc->read_partial.store(p.read_partial, std::memory_order_release);
    uint32_t ring = kRing;
    tc->back_state.compare_exchange_strong(ring, kAsked, std::memory_order_seq_cst);
    rc->back_state.store(kBack, std::memory_order_seq_cst);
    downgrade::unlock(rc->reader_busy);
    wake_local();  // a writer asleep on a full ring takes back; readers read TCP
}

// A hand-over whose peer died with `left` bytes of its in our ring, unread:
// nobody can send them again. Whoever reads the socket next (an exec'd
// program) must not take the stream for complete, so it is reset
// (docs/protocol.md, "A writer that died before it took back").
void Connection::reset_for_unread(size_t left, const char* when) {
    char why[160];
    snprintf(why, sizeof why, "the peer's socket closed %s; %zu unread ring bytes are lost with it", when, left);
    reset_both(why);
}

void Connection::reset_both(const char* why) {
    RS_LOG(error, "fd %d: %s; resetting the connection at both ends", fd(), why);
    // connect(AF_UNSPEC) disconnects an established TCP socket with a RST:
    // the peer's shim (or kernel) reports ECONNRESET, as ours does from now
    // on. No byte of ours can say it: after a marker, TCP bytes are data.
    const int saved = errno;
    sockaddr sa{};
    sa.sa_family = AF_UNSPEC;
    raw_syscall(SYS_connect, fd(), &sa, sizeof sa);  // a raw call: connect() is interposed
    errno = saved;
    peer_reset_.store(true);
    wake_local();
}

// The peer's socket ended before its marker: nobody will send what its ring
// still holds for us again. We keep it for the socket's next reader, before
// the kernel's end (its EOF, or the RST our marker drew), as TCP would still
// deliver it: when its end-of-stream record says nothing is missing (its close
// flushed every write); else the connection resets.
// A forked copy reads the ring the fork copied (Transport::ring_here): the
// records that had landed by then, the end-of-stream record among them when
// the peer had closed before the fork (a server that forks a reader, or execs
// one from a child, after its client left). Without that record the rest may
// be in the live ring of the process that owns the queue pair, whose reads
// move the shared place: the copy waits while another process holds the
// socket, and resets once none does (the bytes went with the owner), or
// after `waited_us` reached 2 s (an owner that keeps its copy open and never
// reads: a wait for it would be for good, and an exec must go on).
// True when done (kept, or reset); false to wait and look again.
bool Connection::keep_after_gone_in_band(int64_t waited_us) {
    const char* when = "before it answered the way back";
    constexpr int64_t kOwnerGraceUs = 2'000'000;
    const bool sole = owned_by_this_process() || waited_us >= kOwnerGraceUs || peer_check::held_only_here(socket_inode());
    if (transport_->ring_here()) return keep_what_the_gone_peer_left(when, true, sole);
    if (!sole) return false;
    reset_both("the peer's socket closed before it answered the way back, and its ring was in the memory of the process "
               "this one was forked from (MADV_DONTFORK): whatever it held for us is lost");
    return true;
}

bool Connection::hand_over_in_band(const char* why) {
    {
        std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
        if (downgrade_why_.empty()) downgrade_why_ = why;
    }
    RS_LOG(info, "fd %d: handing the stream back to tcp (%s)", fd(), why);
    handing_over_.store(true, std::memory_order_seq_cst);
    // An in-band peer's kernel FIN comes with its close (drain_locked): with
    // nothing before it, the peer sent no marker and will answer none, ours
    // would only draw its kernel's RST, and what it wrote is in our ring.
    if (!marker_out() && !peer_reset_.load() && kernel::inq(fd()) == 0 && (tcp_events(POLLRDHUP) & (POLLRDHUP | POLLHUP)))
        peer_closed_.store(true);
    if (can_go_back()) send_marker();
    auto* rc = transport_->rx_control();
    auto* tc = transport_->tx_control();
    const int64_t start = now_us();
    int64_t next_note = start + 5000000;
    for (;;) {
        if (state(*tc) == kAsked) {
            // A thread holding write_mu_ (asleep on a full ring) wakes on the
            // same marker and takes back itself.
            std::unique_lock<SideLock> wl(write_mu_, std::try_to_lock);
            if (wl.owns_lock() && lock_busy(tc->writer_busy)) {
                take_back_locked();
                downgrade::unlock(tc->writer_busy);
            }
        }
        finish_downgrade();
        if (phase() != Phase::upgraded) return phase() == Phase::plain;
        if (peer_reset_.load()) return false;
        if (state(*rc) != kBack && (peer_closed_.load() || !marker_out())) {
            if (keep_after_gone_in_band(now_us() - start)) {
                if (phase() != Phase::upgraded || peer_reset_.load()) return false;
                // Our sends: nobody reads them any more; the kernel answers the next one.
                if (lock_busy(tc->writer_busy)) {
                    tc->back_state.store(kBack, std::memory_order_seq_cst);
                    downgrade::unlock(tc->writer_busy);
                }
                finish_downgrade();
                return phase() == Phase::plain;
            }
            if (owned_by_this_process()) return false;  // the readers' busy word stayed taken
            nap_for_peer([] { usleep(100000); });  // a forked copy: the ring's owner still holds the socket
        } else if (state(*rc) != kBack) {
            // The peer's marker comes at its next look at the connection.
            pollfd p{fd(), POLLIN, 0};
            nap_for_peer([&] { ops_.poll(&p, 1, 100); });
            drain_if_free();
        } else {
            nap_for_peer([] { usleep(200); });  // a writer of ours is taking back
        }
        if (now_us() >= next_note) {
            RS_LOG(warn, "fd %d: still waiting for the peer's back marker (%s); it answers at its next call", fd(), why);
            next_note += 5000000;
        }
    }
}

}  // namespace rdmasock
