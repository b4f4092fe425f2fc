// The way back from the rings to the TCP socket, as the Connection drives it
// (the protocol itself: downgrade.hpp; docs/protocol.md, "Downgrade").
//
// Who does what: the side whose socket is about to leave the shim's hands
// calls hand_over(): it takes back its own sends at once and asks the peer to
// take back the peer's. The peer does its part at its next look at the
// connection (a call, or poll/epoll woken by the doorbell): serve_downgrade().
// Each side turns plain once both of its directions are back.
#include "connection/connection_detail.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ring/downgrade.hpp"
#include "shm/leftover.hpp"
#include "shm/peer_check.hpp"
#include "base/log.hpp"
#include "sys/thread_cancel.hpp"

namespace rdmasock {

using namespace detail;
using downgrade::state, downgrade::kRing, downgrade::kAsked, downgrade::kBack;

namespace {

// Who holds a busy word of our rings (busy_lock.hpp): dead or alive by the
// kernel, then one of our end when it holds our very TCP socket (a fork, an fd
// passed by SCM_RIGHTS); anyone else is the peer or a stranger.
struct EndJudge final : busy_lock::Judge {
    int32_t self;
    uint64_t inode;
    EndJudge(int32_t s, uint64_t i) : self(s), inode(i) {}
    busy_lock::Who who(int32_t pid) override {
        auto w = busy_lock::by_kill(pid, self, busy_lock::Who::foreign);
        if (w == busy_lock::Who::foreign && peer_check::holds_socket(pid, inode)) w = busy_lock::Who::relative;
        return w;
    }
};

// An honest holder keeps a word for one copy; one that is not of our end gets
// this long (asleep) before we call it abuse: a preempted peer in its
// take-back (it holds our reader_busy) or reader (the one we take back from).
constexpr int64_t kForeignGraceUs = 100'000;

}  // namespace

// What the peer left in our receive ring, taken by this side (the caller holds
// reader_busy): its `left` unread bytes into kept bytes beside the socket
// (leftover.hpp), in `order`, and the reader's place moved past them. Used for
// a peer gone before its take-back (at_kernel_end: the kernel's end follows)
// and for one that does not answer (before_kernel: claim_receives, which also
// keeps the peer's end-of-stream record; a ring that fails validation there
// keeps nothing). `only_ended`: kept only when the writer's end-of-stream
// record follows the bytes (a gone RDMA writer's last posted writes may never
// have landed: without its record the stream may be cut, and bytes then EOF
// would look complete). False, with nothing kept and the place as it was
// published, on a short read or no memory.
static bool keep_ring_rest(ring::RingReader& rd, RingControl& rc, uint64_t inode, size_t left, leftover::Order order,
                           bool* fin = nullptr, bool only_ended = false) {
    const bool first = order == leftover::Order::before_kernel;
    const bool look_past = first || only_ended;
    std::vector<uint8_t> bytes(left);
    size_t got = 0;
    ring::RingStatus end = ring::RingStatus::would_block;
    for (;;) {
        if (got == left) {
            // Gone: the `left` bytes are all (the kernel's end follows). Claimed,
            // or only_ended: one look past them too, for the peer's end-of-stream
            // record. A peek: a read of 0 bytes looks at no record, and a read of
            // more would take bytes the buffer has no room for.
            if (look_past) {
                uint8_t b;
                auto r = rd.peek(&b, 1);
                end = r.bytes == 0 ? r.status : ring::RingStatus::ok;
            }
            break;
        }
        auto r = rd.read(bytes.data() + got, left - got);
        got += r.bytes;
        if (r.fault) break;
        if (r.bytes == 0) {
            end = r.status;
            break;
        }
    }
    const bool ended = look_past && end == ring::RingStatus::eof;
    if (fin) *fin = ended;
    if (got != left || (look_past && end == ring::RingStatus::broken) || (only_ended && !ended) ||
        ((left > 0 || (first && ended)) && !leftover::keep(inode, bytes.data(), left, order, first && ended)))
        return false;
    rc.read_pos.store(rd.consumed(), std::memory_order_release);
    rc.read_partial.store(rd.partial(), std::memory_order_release);
    return true;
}

bool Connection::tx_back() {
    auto* c = transport_->tx_control();
    return c && state(*c) == kBack;
}

bool Connection::rx_back() {
    auto* c = transport_->rx_control();
    return c && state(*c) == kBack;
}

bool Connection::rx_waiting_back() {
    auto* c = transport_->rx_control();
    return c && state(*c) == kAsked;
}

bool Connection::downgrade_due() {
    if (!has_rings(phase())) return false;
    auto* t = transport_->tx_control();
    if (!t) return false;
    const auto ts = state(*t), rs = state(*transport_->rx_control());
    // The peer asked for our sends, or took its own back (the whole connection
    // goes), or both are back and only the phase is left to change.
    return ts == kAsked || (ts == kRing && rs == kBack) || (ts == kBack && rs == kBack);
}

void Connection::serve_downgrade() {
    if (!downgrade_due()) return;
    if (!owned_by_this_process()) {
        hand_over("a forked child used the connection");
        return;
    }
    {
        // A thread holding write_mu_ is a writer; its wait wakes on the same
        // doorbell and serves the take-back itself.
        std::unique_lock<SideLock> wl(write_mu_, std::try_to_lock);
        if (!wl.owns_lock()) return;
        if (!tx_back()) {
            auto* c = transport_->tx_control();
            if (!lock_busy(c->writer_busy)) return;
            take_back_locked();
            downgrade::unlock(c->writer_busy);
        }
    }
    finish_downgrade();
}

void Connection::take_back_locked() {
    auto* c = transport_->tx_control();
    if (state(*c) == kBack) return;
    // In band, the peer's place comes with its marker (asked); until then there
    // is no take-back to make.
    if (in_band() && state(*c) == kRing) return;
    struct Out final : downgrade::Resend {
        Connection& conn;
        explicit Out(Connection& c) : conn(c) {}
        bool send_all(const void* data, size_t len) override {
            signals::HandlersNow now;  // blocks while the peer does not read (tcp_send_locked)
            return send_all_ours(conn.ops_, conn.fd_, data, len);
        }
        void end_of_stream() override {}
    } out(*this);
    const int saved = errno;
    auto& w = transport_->writer();
    auto t = in_band() ? downgrade::take_back_until(*c, transport_->tx_ring(), w.capacity(), transport_->tx_end(), out)
                       : [&] {
                             EndJudge judge(current_pid(), socket_inode());
                             return downgrade::take_back(*c, transport_->tx_ring(), w.capacity(), current_pid(), out, &judge,
                                                         busy_policy(c->reader_busy));
                         }();
    if (!t.ok) {
        // A ring that fails validation or a socket gone mid-resend: the stream
        // cannot continue in order. Loudly, as TCP reports a broken connection.
        RS_LOG(error, "fd %d: taking the ring back to tcp failed (%s); resetting", fd(), t.err.c_str());
        if (t.abused) busy_abused_.store(true);  // no second wait on that word
        if (in_band() || t.abused) {
            reset_both("the take-back failed");  // a RST: after our marker, TCP bytes are data
        } else {
            peer_reset_.store(true);
            kernel_shutdown(fd(), SHUT_RDWR);
        }
    } else {
        RS_LOG(info, "fd %d: sends back on tcp, %llu unread ring bytes sent again there%s", fd(),
               static_cast<unsigned long long>(t.resent), t.fin ? ", then the end of stream" : "");
        // The FIN we had put in the ring (or meant to) becomes the kernel's.
        if (t.fin || shut_wr_.load()) kernel_shutdown(fd(), SHUT_WR);
    }
    errno = saved;
    transport_->ring_peer();  // its reader looks at the state, its writer takes back its own
}

Connection::Way Connection::tx_enter_locked() {
    auto* c = transport_->tx_control();
    if (!c) return Way::ring;
    if (!lock_busy(c->writer_busy)) return Way::tcp;  // reset: the kernel answers EPIPE
    if (in_band() && state(*c) == kRing) {
        if (!marker_out()) return Way::ring;
        // Our marker is out: the peer's says where our take-back starts.
        downgrade::unlock(c->writer_busy);
        return Way::wait;
    }
    // Forked while the rendezvous was under way and our sends are still on TCP:
    // the child's copy may have gone on over TCP, and our switch offset would
    // not count its bytes. Every path to the ring comes here (send, the FIN
    // record of shutdown and close): none switches, the direction goes back.
    const bool forked_on_tcp = forked_before_tx_switch();
    if (state(*c) == kRing && state(*transport_->rx_control()) != kBack && !handing_over_.load(std::memory_order_relaxed) &&
        !forked_on_tcp)
        return Way::ring;
    take_back_locked();
    downgrade::unlock(c->writer_busy);
    return Way::tcp;
}

void Connection::tx_leave_locked() {
    auto* c = transport_->tx_control();
    if (!c) return;
    downgrade::unlock(c->writer_busy);
    // A reader that asked while we wrote (it saw us busy and waits): serve it now
    // if we see it; if this load runs ahead of the unlock and misses it, our next
    // look at the connection does (the reader rang our doorbell).
    if (state(*c) != kRing || state(*transport_->rx_control()) == kBack) {
        if (!lock_busy(c->writer_busy)) return;
        take_back_locked();
        downgrade::unlock(c->writer_busy);
    }
}

busy_lock::Policy Connection::busy_policy(const std::atomic<int32_t>&) const {
    // Our own pid gets the grace too, not the patience: a thread of ours holds
    // a word for one copy (and our writers hold write_mu_ first), as does a
    // peer in this very process (a loopback pair in one program) in its
    // take-back. Held longer, it is a stale value or the peer's doing.
    return busy_lock::Policy{downgrade::kLockPatienceUs, kForeignGraceUs, true};
}

bool Connection::lock_busy(std::atomic<int32_t>& word) {
    if (busy_abused_.load(std::memory_order_relaxed)) return false;  // reset already: no second wait
    EndJudge judge(current_pid(), socket_inode());
    const auto got = busy_lock::lock(word, current_pid(), judge, busy_policy(word));
    if (got == busy_lock::Got::locked) return true;
    if (got == busy_lock::Got::abused) {
        // The peer (or a stranger) wrote our control page: this connection
        // alone ends, as TCP ends one: a RST, ECONNRESET for our application.
        RS_LOG(error, "fd %d: a busy word of the shared rings is held by pid %d, no process of this end", fd(), word.load());
        busy_abused_.store(true);
        reset_both("the peer abused the rings' busy word");
        return false;
    }
    RS_LOG(error, "fd %d: a busy word of the shared rings stayed taken by pid %d for 5 s (a stopped process of this end); resetting",
           fd(), word.load());
    peer_reset_.store(true);
    kernel_shutdown(fd(), SHUT_RDWR);
    wake_local();
    return false;
}

bool Connection::ask_pending() {
    // In band, hand_over() sends the marker itself (no read_mu_ needed).
    if (!handing_over_.load(std::memory_order_relaxed) || in_band()) return false;
    auto* c = transport_->rx_control();
    return c && state(*c) == kRing;
}

void Connection::ask_locked() {
    auto* rc = transport_->rx_control();
    if (!lock_busy(rc->reader_busy)) return;
    auto& rd = transport_->reader();
    rd.seek(rc->read_pos.load(std::memory_order_acquire), rc->read_partial.load(std::memory_order_acquire));
    auto s = downgrade::ask(*rc);
    if (s == kAsked && downgrade::writer_idle(*rc) && rd.poll() == ring::RingStatus::would_block)
        s = downgrade::complete_alone(*rc);
    downgrade::unlock(rc->reader_busy);
    if (s != kBack) transport_->ring_peer();  // its writer takes back at its next look
}

Connection::Way Connection::rx_enter_locked() {
    auto* c = transport_->rx_control();
    if (!c) return Way::ring;
    if (ask_pending()) ask_locked();
    if (!lock_busy(c->reader_busy)) return Way::tcp;  // reset: the kernel answers
    const auto s = state(*c);
    if (s == kRing) {
        // Another process sharing the ring (a forked copy) may have read since.
        auto& rd = transport_->reader();
        const uint64_t pos = c->read_pos.load(std::memory_order_acquire);
        const uint32_t part = c->read_partial.load(std::memory_order_acquire);
        if (rd.consumed() != pos || rd.partial() != part) rd.seek(pos, part);
        return Way::ring;
    }
    downgrade::unlock(c->reader_busy);
    return s == kBack ? Way::tcp : Way::wait;
}

void Connection::rx_leave_locked() {
    auto* c = transport_->rx_control();
    if (!c) return;
    auto& rd = transport_->reader();
    c->read_pos.store(rd.consumed(), std::memory_order_release);
    c->read_partial.store(rd.partial(), std::memory_order_release);
    downgrade::unlock(c->reader_busy);
}

void Connection::finish_downgrade() {
    const Phase ph = phase();
    if (ph != Phase::upgraded && ph != Phase::rv_accepted) return;
    if (!tx_back() || !rx_back()) return;
    // Plain, our sends go straight to the kernel. A take-back may still be
    // resending our unread ring bytes there: a forked copy of ours marks the
    // direction back, then resends holding the writers' busy word. Once that
    // word is free every resent byte is queued, and ours go after them (they
    // overtook the resend: mt_fuzz's "out of order" with a fork burst).
    if (auto* tc = transport_->tx_control()) {
        if (!lock_busy(tc->writer_busy)) return;  // held on: our sends keep waiting on it (tx_enter_locked)
        downgrade::unlock(tc->writer_busy);
    }
    std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
    if (phase() != ph) return;
    fallback_reason_ = downgrade_why_.empty() ? "the peer handed the stream back to tcp" : "handed back to tcp: " + downgrade_why_;
    // Our end of stream went into the ring and the peer claimed it (claim_receives)
    // without our take-back: the kernel's stream ends here (again is harmless).
    if (shut_wr_.load()) kernel_shutdown(fd(), SHUT_WR);
    if (rv_) rv_->close();
    enter(Phase::plain);
    RS_LOG(info, "fd %d: back on tcp (%s)", fd(), fallback_reason_.c_str());
    wake_local();  // sleepers of this side look again: the kernel answers now
}

bool Connection::keep_on_tcp(const char* why) {
    if (!mark_tcp_only(why)) return false;
    hand_over(why);
    return true;
}

bool Connection::mark_tcp_only(const char* why) {
    if (!tcp_only_.load()) tcp_only_why_ = why;
    tcp_only_.store(true);
    // In band (RDMA) the way back waits in this call for the peer's marker, which
    // it sends at its next call: a peer waiting for our next message never would.
    if (in_band() && has_rings(phase())) {
        RS_LOG(warn, "fd %d: %s is not honoured on an rdma connection (the way back would wait for the peer)", fd(), why);
        return false;
    }
    return true;
}

bool Connection::hand_over(const char* why, Unread unread) {
    bool result = true;
    if (begin_hand_over(why, &result) == HandOver::done) return result;
    return finish_hand_over(why, unread);
}

// Every first step before any wait: the peer whose part one of them waits for
// may be another of them (both ends of a connection in this process), and its
// first step is what serves that part.
void Connection::hand_over_all(const std::vector<std::shared_ptr<Connection>>& cs, const char* why, Unread unread) {
    std::vector<Connection*> seen, waiting;
    for (auto& c : cs) {
        if (!c || std::find(seen.begin(), seen.end(), c.get()) != seen.end()) continue;  // dup'd fds share one
        seen.push_back(c.get());
        bool result = true;
        if (c->begin_hand_over(why, &result) == HandOver::waiting) waiting.push_back(c.get());
    }
    for (Connection* c : waiting) c->finish_hand_over(why, unread);
}

Connection::HandOver Connection::begin_hand_over(const char* why, bool* result) {
    cancel::Shield shield;  // its waits are not cancellation points (thread_cancel.hpp)
    auto done = [result](bool r) {
        *result = r;
        return HandOver::done;
    };
    while (progress()) {}  // a rendezvous the server has switched becomes `upgraded`
    switch (phase()) {
        case Phase::rv_listen:
        case Phase::rv_pending:
        case Phase::rv_offered: {
            // No ring yet: every byte is on TCP; make sure none ever moves.
            signals::DeferHandlers held;  // a handler on this thread must not wait for handshake_mu_
            std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
            if (rendezvous_on_tcp(phase())) become_plain(why);
            return done(true);
        }
        case Phase::upgraded:
        case Phase::rv_accepted: break;
        default: return done(true);  // plain or failed: the kernel has it all
    }
    if (in_band()) return done(hand_over_in_band(why));
    if (!transport_->tx_control()) {
        RS_LOG(warn, "fd %d: a %s connection cannot go back to tcp (%s): its bytes stay with this process", fd(),
               transport_->name(), why);
        return done(false);
    }
    {
        std::lock_guard<HandlerSafeMutex> lk(handshake_mu_);
        if (downgrade_why_.empty()) downgrade_why_ = why;
    }
    RS_LOG(info, "fd %d: handing the stream back to tcp (%s)", fd(), why);
    auto* rc = transport_->rx_control();
    handing_over_.store(true, std::memory_order_seq_cst);
    // Our sends go back at once, with what the peer had not read; our receives
    // are asked for. A thread holding write_mu_ or read_mu_ (asleep on a full
    // or empty ring) does its side itself (tx_enter / rx_enter): wake it.
    for (;;) {
        if (!tx_back()) {
            std::unique_lock<SideLock> wl(write_mu_, std::try_to_lock);
            if (wl.owns_lock()) {
                auto* c = transport_->tx_control();
                if (!lock_busy(c->writer_busy)) return done(false);
                take_back_locked();
                downgrade::unlock(c->writer_busy);
            }
        }
        if (state(*rc) == kRing) {
            std::unique_lock<SideLock> rl(read_mu_, std::try_to_lock);
            if (rl.owns_lock()) ask_locked();
        }
        if (tx_back() && state(*rc) != kRing) break;
        if (peer_reset_.load()) return done(false);  // a busy word stayed taken: reset
        wake_local();
        nap_for_peer([] { usleep(200); });
    }
    return HandOver::waiting;
}

bool Connection::claim_receives() {
    auto* rc = transport_->rx_control();
    // Bytes the peer sent over TCP before its switch and we have not read come
    // before the ring's: kept bytes served first would overtake them. (A
    // forked copy's count can only be behind: then we wait, as before.)
    auto* sw = transport_->rx_switch();
    const uint64_t at = sw ? sw->load(std::memory_order_acquire) : RingControl::kNotSwitched;
    if (at == RingControl::kNotSwitched || tcp_rx_.load(std::memory_order_relaxed) < at) return false;
    // (Not read_mu_: a reader of ours may sleep holding it, waiting for this.)
    if (!lock_busy(rc->reader_busy)) return false;
    if (state(*rc) == kBack) {  // the writer took back meanwhile: its bytes are on TCP
        downgrade::unlock(rc->reader_busy);
        return true;
    }
    // `asked` is in the control page (begin_hand_over): a writer that takes
    // its lock after this look sees it and takes back from our place, which
    // we move past everything below before it can take reader_busy.
    if (downgrade::ask(*rc) == kRing || !downgrade::writer_idle(*rc)) {
        downgrade::unlock(rc->reader_busy);
        return false;
    }
    ring::RingReader& rd = transport_->reader();
    rd.seek(rc->read_pos.load(std::memory_order_acquire), rc->read_partial.load(std::memory_order_acquire));
    const size_t left = rd.readable_bytes();
    bool fin = false;
    if (!keep_ring_rest(rd, *rc, socket_inode(), left, leftover::Order::before_kernel, &fin)) {
        // A ring that fails validation, or no memory for the kept bytes: wait
        // for the writer's take-back, as without the claim.
        rd.seek(rc->read_pos.load(std::memory_order_acquire), rc->read_partial.load(std::memory_order_acquire));
        downgrade::unlock(rc->reader_busy);
        RS_LOG(warn, "fd %d: could not keep the %zu bytes the peer left in the ring; waiting for it to send them again", fd(), left);
        return false;
    }
    rc->back_state.store(kBack, std::memory_order_seq_cst);
    downgrade::unlock(rc->reader_busy);
    RS_LOG(info, "fd %d: the peer did not answer the hand-over; its %zu unread ring bytes%s are kept for the socket's next reader", fd(),
           left, fin ? " and its end of stream" : "");
    transport_->ring_peer();  // its writer, when it runs, sees its sends back
    return true;
}

bool Connection::keep_what_the_gone_peer_left(const char* when, bool only_ended, bool cut_resets) {
    auto* rc = transport_->rx_control();
    // (Not read_mu_: a reader of ours may sleep holding it, waiting for this.)
    if (!lock_busy(rc->reader_busy)) return false;
    ring::RingReader& rd = transport_->reader();
    rd.seek(rc->read_pos.load(std::memory_order_acquire), rc->read_partial.load(std::memory_order_acquire));
    const size_t left = rd.readable_bytes();
    // Nobody can put them on the TCP socket again: we take them ourselves,
    // for whoever reads the socket next (leftover.hpp).
    // A forked copy's ring is the fork's copy (Transport::ring_here): an empty
    // one says nothing of what landed since, so it too needs the end record.
    const bool must_end = only_ended && !owned_by_this_process();
    const bool kept = (left == 0 && !must_end) || keep_ring_rest(rd, *rc, socket_inode(), left, leftover::Order::at_kernel_end, nullptr, only_ended);
    if (!kept && !cut_resets) {
        rd.seek(rc->read_pos.load(std::memory_order_acquire), rc->read_partial.load(std::memory_order_acquire));
        downgrade::unlock(rc->reader_busy);
        return false;
    }
    if (kept && left > 0)
        RS_LOG(info, "fd %d: the peer's socket ended %s; its %zu unread ring bytes are kept for the socket's next reader", fd(),
               when, left);
    rc->back_state.store(kBack, std::memory_order_seq_cst);
    downgrade::unlock(rc->reader_busy);
    if (!kept) reset_for_unread(left, when);
    return true;
}

void Connection::take_back_for_local_peer() {
    if (phase() != Phase::upgraded || in_band()) return;
    auto* c = transport_->tx_control();
    if (!c || state(*c) == kBack) return;
    std::unique_lock<SideLock> wl(write_mu_, std::try_to_lock);
    if (!wl.owns_lock() || !lock_busy(c->writer_busy)) return;
    take_back_locked();
    downgrade::unlock(c->writer_busy);
}

// The peer's part, then the switch.
bool Connection::finish_hand_over(const char* why, Unread unread) {
    cancel::Shield shield;
    auto* rc = transport_->rx_control();
    // Both ends here: the peer's part is ours to give (set_local_end_lookup).
    if (state(*rc) != kBack && peer_inode_ != 0 && peer_inode_ != socket_inode())
        if (LocalEnd find = local_end_.load(std::memory_order_acquire))
            if (auto peer = find(peer_inode_); peer && peer.get() != this) peer->take_back_for_local_peer();
    if (state(*rc) != kBack) {
        // The peer's part: it takes back at its next look at the connection,
        // or (may_claim) we take it ourselves once its writer is idle.
        const int64_t start = now_us();
        int64_t next_note = start + 5000000;
        // claim_when_sole: a live peer answers within microseconds; the scan of
        // every process for other holders waits 2 ms first, then runs every
        // 100 ms (a parent closes its copy soon after the fork), or less often
        // where a scan is slow (many processes): at most a twentieth of the time.
        int64_t next_sole_look = start + 2000;
        while (state(*rc) != kBack) {
            if (unread == Unread::may_claim && claim_receives()) break;
            if (unread == Unread::claim_when_sole && now_us() >= next_sole_look) {
                const int64_t scan_start = now_us();
                if (peer_check::held_only_here(socket_inode()) && claim_receives()) break;
                const int64_t scanned = now_us();
                next_sole_look = scanned + std::max<int64_t>(100000, 20 * (scanned - scan_start));
            }
            pollfd p[2] = {{transport_->wake_fd(), POLLIN, 0}, {fd(), POLLRDHUP, 0}};
            // (may_claim: the writer was mid-write; it is done within a copy.)
            int nap_ms = unread == Unread::may_claim ? 1 : 100;
            if (unread == Unread::claim_when_sole)
                nap_ms = static_cast<int>(std::clamp<int64_t>((next_sole_look - now_us()) / 1000, 1, 100));
            nap_for_peer([&] { ops_.poll(p, 2, nap_ms); });
            if (p[0].revents & POLLIN) transport_->drain_wake();
            if (state(*rc) == kBack) break;
            if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
                // The peer's socket ended without its part: a peer that closes
                // serves the take-back first, so it died.
                if (!keep_what_the_gone_peer_left("before it took back its unread bytes")) return false;
                break;
            }
            if (now_us() >= next_note) {
                RS_LOG(warn, "fd %d: still waiting for the peer to take back the bytes it wrote (%s); it does at its next call",
                       fd(), why);
                next_note += 5000000;
            }
        }
    }
    finish_downgrade();
    return phase() == Phase::plain;
}

}  // namespace rdmasock
