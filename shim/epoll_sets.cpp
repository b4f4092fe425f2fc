#include "epoll_sets.hpp"
#include "epoll_kept.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <cerrno>
#include <mutex>
#include <new>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/log.hpp"
#include "sys/fork_lock.hpp"
#include "sys/interruptible_sleep.hpp"
#include "wait/phase_bell.hpp"
#include "poll_engine.hpp"
#include "real_calls.hpp"
#include "shim_state.hpp"
#include "sys/thread_cancel.hpp"
#include "wait/wait_engine.hpp"
#include "sys/own_fd.hpp"
#include "shm/leftover.hpp"
#include "base/scratch.hpp"

namespace rdmasock::shim {

namespace {

constexpr uint64_t kTag = 0xfeed5ec000000000ull;  // kernel-half addresses: never an app pointer
constexpr uint64_t kWakeTag = 0xfeed5ed000000000ull;  // a transport's eventfd doorbell
constexpr uint64_t kReadyTag = 0xfeed5ee000000000ull;  // the set's own eventfd (expose)
constexpr uint64_t kNestTag = 0xfeed5ef000000000ull;   // a set registered in this one (confirm_nested)
constexpr uint64_t kBellTag = 0xfeed5eb000000000ull;   // the set's phase bell (phase_bell.hpp)
constexpr uint64_t kTagMask = 0xfffffff000000000ull;
constexpr uint32_t kReadiness = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI;

struct Interest {
    std::shared_ptr<Socket> sock;
    uint32_t events = 0;          // the app's
    epoll_data_t data{};          // the app's
    uint32_t kernel_events = 0;   // what the kernel has for us now
    bool ring_driven = false;     // readiness from the rings (not the kernel)
    bool disabled = false;        // EPOLLONESHOT fired
    uint64_t landed_at_report = ~0ull;  // EPOLLET: data that had arrived when we last reported EPOLLIN
    bool out_reported = false;           // EPOLLET: EPOLLOUT reported since it was last false
    uint64_t full_at_report = 0;         // EPOLLET: send_full_count() when EPOLLOUT was reported
    uint32_t ended_reported = 0;         // EPOLLET: EPOLLHUP/EPOLLERR reported (each one edge, not one per wait)
    uint32_t state_at_report = ~0u;      // EPOLLET: Connection::state_changes() at the last look (~0u: none yet)
    int wake_fd = -1;                    // the transport's doorbell (sleep end), registered in the kernel set
    unsigned wake_gen = 0;               // its Transport::wake_generation when registered
    bool bell_watched = false;           // the set's bell is registered with the connection (phase_bell.hpp)
    // Hot and cold (epoll_sets.hpp).
    int fd = -1;
    uint64_t id = 0;              // tells this interest from a later one on the same fd number
    bool listed = false;          // in EpollSet::watch
    bool cold = false;            // armed, drain owned by the set, not in watch
    int cold_token = 0;           // what the arm armed
    Connection::Drain cold_drain = Connection::Drain::none;
    uint8_t idle = 0;             // consecutive looks that found it not ready
    // Made before this process forked: its arm (in the rings the parent
    // shares) and its eventfd's place in the kernel set (one set, shared with
    // the parent) are the parent's, which may be asleep on them. The child
    // forgets it without undoing them, as closing a copy of an fd leaves the
    // kernel's registration alone.
    bool inherited = false;
    // The call (EpollSet::calls) whose answer lists it, and at which entry: Linux
    // lists a registered fd at most once per call, so a second report in the same
    // call (its TCP socket's kernel event from before the switch to the rings, and
    // the rings' readiness) merges into that entry and takes no other fd's slot.
    uint64_t listed_in = 0;
    int entry = -1;
};

struct EpollSet;

// A set registered in another (its fd in the outer set's kernel half, under
// kNestTag | fd; the app's events and data word are kept here).
struct Nested {
    int fd = -1;
    std::shared_ptr<EpollSet> set;
    uint32_t events = 0;
    epoll_data_t data{};
};

struct EpollSet {
    std::mutex mu;
    int epfd = -1;
    std::atomic<bool> retired{false};  // its fd was closed (read by the sets that hold it without its lock)
    std::unordered_map<int, Interest> fds;
    // What every wait looks at: hot ring-driven interests, and those whose
    // socket may still change phase with no bell to say so (needs_watch).
    std::vector<std::pair<int, uint64_t>> watch;
    size_t cold = 0;
    uint64_t next_id = 1;
    uint64_t calls = 0;  // answers built (EpollWait::check), for Interest::listed_in
    uint64_t local_epoch = 0;  // Connection::local_epoch() when cold ones were last all looked at
    // Nesting (expose, below): the sets registered in this one, which a wait on
    // this one exposes first; and this set's eventfd in its own kernel half,
    // raised while a ring-driven member is ready.
    std::vector<Nested> nested;
    int ready_fd = -1;
    bool ready_raised = false;
    uint64_t raised_sig = 0;    // what was ready when it was last raised (a change is a new edge)
    bool edge_watched = false;  // registered with EPOLLET in another set
    // Fairness when more is ready than an answer holds (as the kernel's ready
    // list takes turns): the watch entry a full answer left out first, where
    // the next scan starts; and whether the rings go before the kernel's
    // answer next time (a full answer left one side out).
    size_t scan_from = 0;
    bool rings_lead = false;
    // Rung when a member that may still change phase (a rendezvous) does: its
    // wait set changes (the rings' doorbell). In the kernel half from first use;
    // closed with the set object, after every registration was taken back.
    int bell_fd = -1;
    // Threads asleep in the kernel's wait on this set (counted under mu before
    // they let it go). The kernel wakes them when epoll_ctl adds or changes a
    // member that is ready, and a later event of the member wakes them; neither
    // happens by itself for a ring-driven member whose readiness the rings hold
    // (nobody armed its doorbell): epoll_ctl rings the set's bell for them
    // (wake_sleepers), and they look again, arming it.
    std::atomic<int> sleepers{0};
    // Made by an epoll_ctl: a thread may have begun its kernel wait on the fd
    // before (uncounted); the first wake_sleepers rings for it (so a set that
    // ever held a ring-driven member has its bell: one more fd of ours).
    bool uncounted = true;
    ~EpollSet() {
        if (bell_fd >= 0) close_own_fd(bell_fd);
    }
};

// One thread in the kernel's wait on a set, counted in set.sleepers from
// before it lets set.mu go (so an epoll_ctl under mu sees it) until it is back.
class CountedSleeper {
public:
    explicit CountedSleeper(EpollSet& set) : n_(set.sleepers) { n_.fetch_add(1, std::memory_order_acq_rel); }
    ~CountedSleeper() { n_.fetch_sub(1, std::memory_order_acq_rel); }
    CountedSleeper(const CountedSleeper&) = delete;
    CountedSleeper& operator=(const CountedSleeper&) = delete;

private:
    std::atomic<int>& n_;
};

// Sets inside sets: the kernel nests at most this deep (EP_MAX_NESTS).
constexpr int kMaxNesting = 5;

// A hot interest that this many looks in a row found idle goes cold even if the
// set never sleeps: a busy server would otherwise scan every connection it served.
constexpr uint8_t kIdleLooks = 32;

std::mutex g_mu;
std::unordered_map<int, std::shared_ptr<EpollSet>>* g_sets = new std::unordered_map<int, std::shared_ptr<EpollSet>>();
std::atomic<bool> g_any{false};

std::shared_ptr<EpollSet> find_set(int epfd, bool create) {
    if (!create && !g_any.load(std::memory_order_relaxed)) return nullptr;
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_sets->find(epfd);
    if (it != g_sets->end()) return it->second;
    if (!create) return nullptr;
    auto s = std::make_shared<EpollSet>();
    s->epfd = epfd;
    (*g_sets)[epfd] = s;
    g_any = true;
    return s;
}

bool ring_driven(const Interest& in) { return in.sock->conn && !in.sock->conn->kernel_driven(); }
// Plain for good: the kernel answers, nothing of ours can change that.
bool settled_plain(const Interest& in) { return in.sock->conn && in.sock->conn->is_plain(); }

// Whether every wait must look at it (EpollSet::watch). Not a cold one (its
// doorbell or socket reports it), nor one plain for good, nor one the kernel
// answers for whose phase was read after the set's bell was in place
// (watch_phase): a move to the rings rings the bell, which relists it
// (warm_phase_watchers) before the set sleeps again. So a server whose
// connections are all still on TCP (short ones, before the switch) waits as
// the kernel's set alone, without a scan of them at every call.
bool needs_watch(const Interest& in) {
    if (in.cold) return false;
    if (in.ring_driven || !in.sock->conn) return true;  // no conn yet: connect() rings nothing
    if (settled_plain(in)) return false;
    return !in.bell_watched || ring_driven(in);
}

void list(EpollSet& set, Interest& in) {
    if (in.listed || !needs_watch(in)) return;
    in.listed = true;
    in.idle = 0;
    set.watch.emplace_back(in.fd, in.id);
}

// The set's bell, made and put in its kernel half at first use; -1 if it cannot be.
int set_bell(EpollSet& set) {
    if (set.bell_fd >= 0) return set.bell_fd;
    const int b = bell::make_bell();
    if (b < 0) return -1;
    epoll_event ev{EPOLLIN, {}};
    ev.data.u64 = kBellTag;
    if (real::calls().epoll_ctl(set.epfd, EPOLL_CTL_ADD, b, &ev) != 0) {
        close_own_fd(b);
        return -1;
    }
    return set.bell_fd = b;
}

// A member that may still change phase rings the set's bell when it does, from
// its registration until it leaves the set or settles: whichever thread of the
// set wakes drains it and rescans (take_kernel), so the new phase's wait set
// (its doorbell) is in the kernel half before anyone sleeps on it again.
// none: nothing to do; added: registered now (a change since the caller's last
// look rang nobody: look again before sleeping); failed: it needs the bell and
// has none (the wait then naps).
enum class Watch { none, added, failed };
Watch watch_phase(EpollSet& set, Interest& in) {
    if (in.bell_watched || !in.sock->conn || in.inherited) return Watch::none;
    if (!Connection::phase_may_change(in.sock->conn->phase())) return Watch::none;
    const int b = set_bell(set);
    if (b < 0) return Watch::failed;
    in.sock->conn->watch_phase(b);
    in.bell_watched = true;
    return Watch::added;
}

// epoll_ctl put a ring-driven member in the set, or changed one: a thread
// asleep in the kernel's wait on the set (set.sleepers) looks again. The set's
// bell wakes it (take_kernel drains it, and the scan reports or arms the
// member); not the member's doorbell, which another thread's call on the
// connection may drain first (a sender's look at its socket did, and the
// waiter slept on). Called with set.mu held.
void wake_sleepers(EpollSet& set) {
    if (set.sleepers.load(std::memory_order_acquire) == 0 && !std::exchange(set.uncounted, false)) return;
    if (const int b = set_bell(set); b >= 0) bell::ring(b);
}

void unwatch_phase(EpollSet& set, Interest& in) {
    if (!in.bell_watched) return;
    in.sock->conn->unwatch_phase(set.bell_fd);
    in.bell_watched = false;
}

// The transport's doorbell sits in the kernel set from when the connection turns
// ring-driven until it leaves the set: registered once, not at every wait.
void sync_wake(int epfd, int fd, Interest& in, bool rd) {
    int want = rd ? in.sock->conn->wake_fd() : -1;
    const unsigned gen = want >= 0 ? in.sock->conn->wake_generation() : 0;
    if (want == in.wake_fd && gen == in.wake_gen) return;
    if (in.wake_fd >= 0) real::calls().epoll_ctl(epfd, EPOLL_CTL_DEL, in.wake_fd, nullptr);
    in.wake_fd = -1;
    if (want < 0) return;
    epoll_event ev{EPOLLIN, {}};
    ev.data.u64 = kWakeTag | static_cast<uint64_t>(fd);
    if (real::calls().epoll_ctl(epfd, EPOLL_CTL_ADD, want, &ev) == 0) in.wake_fd = want, in.wake_gen = gen;
}

void drop_wake(int epfd, Interest& in) {
    if (in.wake_fd >= 0 && !in.inherited) real::calls().epoll_ctl(epfd, EPOLL_CTL_DEL, in.wake_fd, nullptr);
    in.wake_fd = -1;
}

// The kernel half of a ring-driven interest: what the connection asks the
// kernel for (Connection::ready_events). While a rendezvous keeps both
// directions on TCP (rv_accepted) that is the program's own mask, and an
// edge-triggered interest keeps its EPOLLET there: level-triggered, a socket
// that stays writable (or bytes left unread, as ET allows) made every wait
// return at once with no edge to report, an event loop at 100% CPU (tokio).
uint32_t kernel_half(const Connection& c, uint32_t program_events, short kernel_poll_events) {
    const uint32_t k = static_cast<uint16_t>(kernel_poll_events);
    const bool programs_own = c.phase() == Phase::rv_accepted;
    return k && programs_own ? k | (program_events & EPOLLET) : k;
}

// Brings the kernel registration in line with the connection's phase.
void sync_kernel(int epfd, int fd, Interest& in, short kernel_poll_events) {
    bool rd = ring_driven(in);
    sync_wake(epfd, fd, in, rd);
    uint32_t want = rd ? kernel_half(*in.sock->conn, in.events, kernel_poll_events) : in.events;
    if (in.disabled && !rd) return;  // the kernel disabled its own oneshot
    if (want == in.kernel_events && rd == in.ring_driven) return;
    epoll_event ev{want, {}};
    ev.data.u64 = kTag | static_cast<uint64_t>(fd);
    if (real::calls().epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) == 0) {
        in.kernel_events = want;
        in.ring_driven = rd;
    }
}

// Ring readiness of one ring-driven interest, with LT/ET/ONESHOT applied.
uint32_t ring_events(Interest& in, short* kernel_events, bool commit) {
    Connection& c = *in.sock->conn;
    short want = static_cast<short>(in.events & kReadiness);
    c.step();
    // The state and ring-full counts are read before the readiness they are
    // reported with: a change in between then makes one more edge, never one
    // spent on a mask taken before it (a send that filled the ring after the
    // look would leave the freed space no edge). So is the data count (below).
    const uint32_t state = c.state_changes();
    const uint64_t full = c.send_full_count();
    // The data count too, for an edge-triggered interest: counted before the
    // readiness, a FIN (or byte) that lands in between is in the readiness or
    // makes the next look's edge. Counted after it, a FIN could be spent with
    // an EPOLLIN report that had no EPOLLRDHUP: tokio takes a short read for
    // "drained" and waited for good for the RDHUP edge (its server spinning
    // beside the readable EOF of a client that never switched).
    const bool et = in.events & EPOLLET;
    const uint64_t landed = et && (want & (POLLIN | POLLRDNORM | POLLRDHUP)) ? c.arrivals() : 0;  // (may cost a system call before the switch)
    std::atomic_thread_fence(std::memory_order_acquire);  // the counts before the readiness loads
    uint32_t r = static_cast<uint16_t>(c.ready_events(want, kernel_events));
    uint32_t ev = r & (in.events | EPOLLERR | EPOLLHUP);
    if (in.disabled) return 0;
    if (!(ev & EPOLLOUT)) in.out_reported = false;
    // A state change (our shutdown, the peer's end, a reset) wakes every
    // waiter of a TCP socket: an edge-triggered interest reports its whole
    // mask again, whatever it waits for. One the look finds nothing for is spent.
    //
    // The peer's end (Connection::state_changes, 4) is spent only by a look
    // whose readiness shows it too: RDHUP where the program asked for it, else
    // IN. The count and the readiness are separate unlocked looks, and a look
    // beside a read in another thread (the ring's records already released,
    // its read position not yet moved) finds the ring empty: no IN, no RDHUP,
    // yet "unread < SO_RCVBUF", so the end counts as shown. Spent there (an
    // EPOLLOUT report), it never made the edge that carries EPOLLRDHUP: a tokio
    // reader, its last read short, waited for good for its end of stream.
    // (The worst this costs is one edge more, never one less.)
    const uint32_t shows_end = ((want & POLLRDHUP) ? POLLRDHUP : POLLIN) | POLLHUP | POLLERR;
    uint32_t seen = state;
    if ((state & 4u) && (want & (POLLIN | POLLRDHUP)) && !(r & shows_end)) seen &= ~4u;
    if (in.state_at_report == ~0u) in.state_at_report = seen;
    const bool state_edge = state != in.state_at_report;
    if (commit && !ev) in.state_at_report = seen;
    if (!ev) return 0;
    if (et) {
        // An edge is new data since the last report (a monotonic count), or
        // writability regained: unseen since the report, or a send found the
        // ring full since (as TCP's SOCK_NOSPACE makes freed space a wake-up).
        // Data read before the look makes no edge here (Linux reports the
        // rest of the mask, EPOLLOUT alone): the count is spent only with an
        // EPOLLIN report, so no state where the count and the readiness
        // disagree can spend an edge the reader still waits for.
        bool in_edge = (ev & EPOLLIN) && landed != in.landed_at_report;
        bool out_edge = (ev & EPOLLOUT) && (!in.out_reported || full != in.full_at_report);
        bool end_edge = (ev & (EPOLLHUP | EPOLLERR) & ~in.ended_reported) != 0;
        if (!in_edge && !out_edge && !end_edge && !state_edge) return 0;
        // Like Linux, an edge reports the full current mask (new data on a writable
        // socket is EPOLLIN|EPOLLOUT); what it reported is what the next edge is
        // measured against.
        if (commit) {
            if (ev & EPOLLIN) in.landed_at_report = landed;
            if (ev & EPOLLOUT) in.out_reported = true, in.full_at_report = full;
            in.ended_reported |= ev & (EPOLLHUP | EPOLLERR);
            in.state_at_report = seen;
        }
    }
    if (commit && (in.events & EPOLLONESHOT)) in.disabled = true;
    return ev;
}

// Cold -> hot: drain the doorbell we own, disarm, and (relist) look at it again.
// `news`: what the kernel's answer said of its TCP socket (unknown: the drain looks).
void warm(EpollSet& set, Interest& in, bool relist, Connection::News news = Connection::News::unknown) {
    if (!in.cold) return;
    Connection& c = *in.sock->conn;
    if (!in.inherited) {
        c.end_sleep(in.cold_drain, news);
        c.disarm(in.cold_token);
    }
    in.cold = false;
    in.cold_drain = Connection::Drain::none;
    in.cold_token = 0;
    --set.cold;
    if (relist) list(set, in);
}

// The set's bell rang: a member changed phase. A cold one sleeps on what its
// old phase reports (in band: TCP's readiness, no doorbell), so the new phase
// would reach it never; warmed, the scan looks at it under the new phase and
// registers its doorbell before the set sleeps again.
void warm_phase_watchers(EpollSet& set) {
    for (auto& [fd, in] : set.fds) {
        if (!in.bell_watched) continue;
        if (in.cold) warm(set, in, true);
        else list(set, in);  // one the kernel answered for (needs_watch): on the rings now?
    }
}

// moved: its phase changed while it was being armed (a switch finishing): not
// readiness, but what it waits on changed: look again before any sleep.
enum class Cool { cold, ready, moved, armed, in_flight };

// An arm held for one sleep only (the interest stays hot).
struct SleepArm {
    std::shared_ptr<Socket> sock;
    int token = 0;
    Connection::Drain drain = Connection::Drain::none;
    Phase phase = Phase::undecided;
};

// Hot -> cold, if nothing is ready after the arm (Dekker: arm, fence, re-check).
// armed: it stays hot but armed for the sleep about to begin (*held; the caller
// settles it afterwards), because another thread owns its doorbell drain or
// something no doorbell reports must be looked at within *cap_us.
// A cold member whose phase may still move watches the set's bell first (every
// way to cold passes here: a wait's arm, an idle retire, an expose), so a move
// after the phase read below rings it; one that cannot have the bell is looked
// at again after a nap.
Cool cool(EpollSet& set, int epfd, int fd, Interest& in, SleepArm* held, int64_t* cap_us) {
    Connection& c = *in.sock->conn;
    const bool no_bell = watch_phase(set, in) == Watch::failed;
    const Phase ph = c.phase();
    const short want = static_cast<short>(in.events & kReadiness);
    bool may_sleep = true;
    int token = c.arm(want, &may_sleep);
    Connection::Drain d = c.try_begin_sleep();
    auto undo = [&] {
        c.end_sleep(d);
        c.disarm(token);
    };
    if (!may_sleep) return undo(), Cool::in_flight;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    short kev = 0;
    if (ring_events(in, &kev, false)) return undo(), Cool::ready;
    if (c.phase() != ph || !ring_driven(in)) return undo(), Cool::moved;
    sync_kernel(epfd, fd, in, kev);
    *cap_us = c.max_sleep_us(want);
    if (no_bell) *cap_us = wait::capped(*cap_us, wait::kNapUs);
    if (d == Connection::Drain::busy || *cap_us >= 0) {
        *held = {in.sock, token, d, ph};
        return Cool::armed;
    }
    in.cold = true;
    in.cold_token = token;
    in.cold_drain = d;
    in.listed = false;  // its watch entry goes at the next prune
    ++set.cold;
    return Cool::cold;
}

void settle_arm(SleepArm& a) {
    a.sock->conn->end_sleep(a.drain);
    a.sock->conn->disarm(a.token);
}

// Drops watch entries of interests gone or that no wait must look at (needs_watch).
void prune(EpollSet& set) {
    std::erase_if(set.watch, [&](const std::pair<int, uint64_t>& w) {
        auto it = set.fds.find(w.first);
        if (it == set.fds.end() || it->second.id != w.second) return true;
        Interest& in = it->second;
        // Settled: its sleepers wait on doorbells, which the way back rings.
        if (in.bell_watched && !Connection::phase_may_change(in.sock->conn->phase())) unwatch_phase(set, in);
        if (!in.listed) return true;
        if (!needs_watch(in)) return in.listed = false, true;
        return false;
    });
}

// Removes an interest (EPOLL_CTL_DEL, close): a cold one gives its arm and drain back.
void forget_interest(EpollSet& set, int epfd, std::unordered_map<int, Interest>::iterator it) {
    warm(set, it->second, false);
    drop_wake(epfd, it->second);
    unwatch_phase(set, it->second);
    set.fds.erase(it);
}

// A set whose fd was closed: its cold interests give their arms and drains back.
void retire_set(EpollSet& set) {
    std::lock_guard<std::mutex> lk(set.mu);
    for (auto& [fd, in] : set.fds) warm(set, in, false), unwatch_phase(set, in);
    set.retired = true;
    set.nested.clear();
    if (set.ready_fd >= 0) close_own_fd(set.ready_fd);
    set.ready_fd = -1;
}

// ---------------------------------------------------------------- exposing a set
//
// The kernel's answer for a set's fd (poll or select on it, or a set that holds
// it) covers only its kernel half: a ring-driven connection that is hot (not
// armed) gets no doorbell, so its bytes would never make the set readable there.
// A wait that looks at the set's fd through the kernel exposes the set first:
// every ring-driven member is armed and goes cold (the next byte rings a doorbell
// that sits in the kernel set), and the set's own eventfd is raised while one is
// ready now and lowered while none is. Cold members are warmed first, so a
// doorbell whose bytes were read meanwhile does not leave the set readable.

Exposed expose_nested(EpollSet& inner, int depth);

// The sets registered in `set` (under its lock), each exposed at `depth`;
// those whose fd was closed are let go.
Exposed expose_sets_inside(EpollSet& set, int depth) {
    Exposed r;
    std::erase_if(set.nested, [](const Nested& n) { return n.set->retired.load(); });
    for (auto& n : set.nested) r.merge(expose_nested(*n.set, depth));
    return r;
}

// The set's eventfd, registered in its kernel half on first use. Written again
// when what is ready changed: a set holding this one edge-triggered sees a new
// edge, as new data on a member wakes the kernel's nested sets.
bool raise_ready(EpollSet& set, uint64_t sig) {
    if (set.ready_raised && sig == set.raised_sig) return true;
    if (set.ready_fd < 0) {
        int e = adopt_own_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
        if (e < 0) return false;
        epoll_event ev{EPOLLIN, {}};
        ev.data.u64 = kReadyTag;
        if (real::calls().epoll_ctl(set.epfd, EPOLL_CTL_ADD, e, &ev) != 0) {
            close_own_fd(e);
            return false;
        }
        set.ready_fd = e;  // an own fd (common/own_fd.hpp): the program cannot close or replace it
    }
    uint64_t one = 1;
    if (real::calls().write(set.ready_fd, &one, sizeof one) != sizeof one) return false;
    set.ready_raised = true;
    set.raised_sig = sig;
    return true;
}

void lower_ready(EpollSet& set) {
    if (!set.ready_raised) return;
    uint64_t v;
    if (real::calls().read(set.ready_fd, &v, sizeof v) == sizeof v) set.ready_raised = false;
}

Exposed expose_locked(EpollSet& set, int depth) {
    Exposed r;
    if (set.retired) return r;
    uint64_t sig = 0;
    for (auto& [fd, in] : set.fds) {
        if (!in.sock->conn) continue;
        warm(set, in, true);
        if (!ring_driven(in)) {
            if (in.listed) sync_kernel(set.epfd, fd, in, 0);
            continue;
        }
        list(set, in);  // moved to the rings unwatched (needs_watch): one left hot is the waits' to look at
        SleepArm held;
        int64_t cap = -1;
        switch (cool(set, set.epfd, fd, in, &held, &cap)) {
            case Cool::cold: break;
            case Cool::ready:
                r.ready = true;
                sig += (in.sock->conn->arrivals() * 0x9e3779b97f4a7c15ull) ^ (in.sock->conn->send_full_count() << 20) ^
                       static_cast<uint64_t>(fd);
                break;
            // A phase move is no readiness: reported as one, a poll of the set's fd
            // said readable and the set's epoll_wait then had nothing (switch_wakes,
            // epoll-polled). Exposed again at once instead.
            case Cool::moved: r.cap(0); break;
            case Cool::in_flight: r.cap(wait::kInFlightSpinUs); break;
            case Cool::armed:  // another thread drains it, or no doorbell reports something: look again soon
                settle_arm(held);
                r.cap(cap >= 0 ? cap : wait::kNapUs);
                break;
        }
    }
    prune(set);
    if (!r.ready) lower_ready(set);
    else if (!raise_ready(set, sig)) r.cap(wait::kNapUs);
    // A ready member stays hot (unarmed): more bytes ring no doorbell. An
    // edge-triggered watcher waits for exactly those, so it looks again soon.
    else if (set.edge_watched) r.cap(wait::kNapUs);
    r.merge(expose_sets_inside(set, depth + 1));
    return r;
}

// A set inside another is taken without waiting: a thread inside its own
// wait holds it only between kernel sleeps, and no order of set locks is
// promised if the application re-registers sets under dup'd fd numbers.
Exposed expose_nested(EpollSet& inner, int depth) {
    Exposed r;
    if (depth > kMaxNesting) return r;
    std::unique_lock<std::mutex> lk(inner.mu, std::try_to_lock);
    if (!lk.owns_lock()) {
        r.cap(wait::kNapUs);
        return r;
    }
    return expose_locked(inner, depth);
}

// ---------------------------------------------------------------- confirming a set's readiness
//
// The kernel reads an exposed set's fd as ready when any fd of its kernel half
// is, a member's doorbell included. A doorbell may ring for nothing the program
// waits for: over RDMA every arrival is a completion, raised for bytes a re-check
// already saw (and the program since read) or for the peer's word that it
// consumed what we sent. So before the kernel's "ready" for a set's fd reaches
// the program, the doorbells that rang are drained, their members looked at
// again, and the kernel asked again; what still reads ready is real.

bool kernel_reads(int fd) {
    pollfd p{fd, POLLIN, 0};
    return real::calls().poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

bool confirm_locked(EpollSet& set, int depth);

// Drains the doorbells of `set` (and of the sets inside it) that rang; whether
// any had.
bool drain_rung(EpollSet& set, int depth) {
    std::vector<pollfd> p;
    std::vector<Interest*> who;
    for (auto& [fd, in] : set.fds)
        if (in.wake_fd >= 0 && in.sock->conn && !in.inherited) p.push_back({in.wake_fd, POLLIN, 0}), who.push_back(&in);
    bool rung = false;
    if (set.bell_fd >= 0 && kernel_reads(set.bell_fd)) {
        bell::drain(set.bell_fd);  // a member changed phase: the expose that follows looks at it
        rung = true;
    }
    if (!p.empty() && real::calls().poll(p.data(), static_cast<nfds_t>(p.size()), 0) > 0)
        for (size_t i = 0; i < p.size(); ++i) {
            if (!(p[i].revents & POLLIN)) continue;
            rung = true;
            Interest& in = *who[i];
            if (in.cold) {
                warm(set, in, true);  // its drain is the set's: end_sleep drains
            } else {
                Connection& c = *in.sock->conn;
                c.end_sleep(c.try_begin_sleep());  // busy: its owner drains it
            }
        }
    for (auto& n : set.nested) {
        if (depth >= kMaxNesting || n.set->retired || !kernel_reads(n.set->epfd)) continue;
        std::unique_lock<std::mutex> lk(n.set->mu, std::try_to_lock);
        if (lk.owns_lock() && !confirm_locked(*n.set, depth + 1)) rung = true;
    }
    return rung;
}

// Nothing of ours in the set's kernel half can read ready (only the program's fds).
bool nothing_of_ours(const EpollSet& set) {
    if (set.ready_raised || !set.nested.empty() || set.bell_fd >= 0) return false;
    for (const auto& [fd, in] : set.fds)
        if (in.wake_fd >= 0 || ring_driven(in)) return false;
    return true;
}

// Whether the set's fd reads ready for something the program would get.
bool confirm_locked(EpollSet& set, int depth) {
    if (nothing_of_ours(set)) return true;  // a set of plain fds costs no look
    for (int round = 0; round < 4; ++round) {
        if (set.retired) return true;
        if (expose_locked(set, depth).ready) return true;  // also re-cools what drain_rung warmed
        if (!kernel_reads(set.epfd)) return false;
        if (!drain_rung(set, depth)) return kernel_reads(set.epfd);  // an fd of the program's
    }
    return true;
}

// The kernel reported a nested set's fd: confirm it (a set another thread is in
// is taken as the kernel says).
bool confirm_nested(EpollSet& inner, int depth) {
    if (depth > kMaxNesting) return true;
    std::unique_lock<std::mutex> lk(inner.mu, std::try_to_lock);
    return !lk.owns_lock() || confirm_locked(inner, depth);
}

// A nested set's event in an outer set's kernel answer: the app's data word, or
// nothing if the set is gone or its readiness was only doorbells.
bool take_nested(EpollSet& outer, int depth, epoll_event& ev) {
    const int fd = static_cast<int>(ev.data.u64 & ~kTagMask);
    auto it = std::find_if(outer.nested.begin(), outer.nested.end(), [fd](const Nested& n) { return n.fd == fd; });
    if (it == outer.nested.end()) return false;
    if ((ev.events & EPOLLIN) && !confirm_nested(*it->set, depth)) {
        ev.events &= ~(EPOLLIN | EPOLLRDNORM);
        if (!(ev.events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
            // The kernel disabled a oneshot registration for what was no event.
            if (it->events & EPOLLONESHOT) {
                epoll_event kev{it->events, {}};
                kev.data.u64 = kNestTag | static_cast<uint64_t>(fd);
                real::calls().epoll_ctl(outer.epfd, EPOLL_CTL_MOD, fd, &kev);
            }
            return false;
        }
    }
    ev.data = it->data;
    return true;
}

// wait_engine hooks for epoll_wait on a set that holds ring-driven interests.
struct EpollWait {
    int epfd;
    EpollSet& set;
    epoll_event* out;
    int max;
    int64_t timeout_us;
    const sigset_t* mask;
    std::unique_lock<std::mutex> lk;  // released only while asleep in the kernel
    std::vector<epoll_event>& k;
    std::vector<SleepArm>& sleep_arms;  // hot interests armed for the coming sleep
    int fresh = -1;        // events the sleep returned, not yet taken
    bool ready_seen = false;  // the kernel reported this set's own eventfd (expose)
    bool first = true;
    bool readied = false;  // the arm found an interest ready
    int64_t start;
    uint64_t call = 0;  // this answer's number (EpollSet::calls)

    // An interest's events into the answer: its own entry, or merged into the one
    // this answer already has for it. False when the answer is full.
    bool put(Interest& in, uint32_t ev, int& n) {
        if (in.listed_in == call) {
            out[in.entry].events |= ev;
            return true;
        }
        if (n >= max) return false;
        in.listed_in = call;
        in.entry = n;
        out[n].events = ev;
        out[n].data = in.data;
        ++n;
        return true;
    }
    bool listed(const Interest& in) const { return in.listed_in == call; }

    int kernel_wait(epoll_event* ev, int n, int ms) {
        return mask ? real::calls().epoll_pwait(epfd, ev, n, ms, mask) : real::calls().epoll_wait(epfd, ev, n, ms);
    }

    // A ring-driven member still cold after the kernel's answer's other events
    // (take_kernel) rang its doorbell alone: its TCP socket, registered for
    // EPOLLIN, was not listed, so the drain takes the doorbell without a look
    // (as poll's, note_news in poll_engine.cpp). A full answer may have left
    // the socket out though it had news (a FIN, a reset): it stays registered
    // and level-triggered, so the next kernel look lists it (the next call's
    // first look, or its sleep, which then ends at once), as if it had come a
    // little later.
    static Connection::News doorbell_news(const Interest& in) {
        return in.kernel_events & EPOLLIN ? Connection::News::doorbell : Connection::News::unknown;
    }

    // Kernel events: a doorbell or TCP event of a cold interest warms it (the
    // rings answer); plain tracked sockets pass with the app's data; other
    // fds are the app's own. Doorbells go last: a member whose socket the
    // answer lists is warmed by that event, with the socket's news.
    int take_kernel(int nk, int n) {
        const int before = n;
        int got = 0;
        for (int i = 0; i < nk && n < max; ++i, ++got) {
            const uint64_t tag = k[i].data.u64 & kTagMask;
            if (tag == kReadyTag) {
                ready_seen = true;  // the scan finds what raised it; check() lowers it once nothing is ready
                continue;
            }
            if (tag == kBellTag) {
                // A member changed phase: the scan below (under the lock we hold)
                // brings its kernel registration in line.
                bell::drain(set.bell_fd);
                warm_phase_watchers(set);
                continue;
            }
            if (tag == kNestTag) {
                if (take_nested(set, 1, k[i])) out[n++] = k[i];
                continue;
            }
            if (tag != kTag && tag != kWakeTag) {
                // A second look in one call (check()'s refill) meets level-
                // triggered fds it already listed again: the kernel re-queues
                // them. One entry per registration, as the kernel's one answer.
                if (refilling && already_out(k[i].data.u64, n)) continue;
                out[n++] = k[i];
                continue;
            }
            if (tag == kWakeTag) continue;  // below, after the sockets
            auto it = set.fds.find(static_cast<int>(k[i].data.u64 & ~kTagMask));
            if (it == set.fds.end()) continue;
            Interest& in = it->second;
            if (in.cold) warm(set, in, true, Connection::News::some);
            // Registered while the kernel answered for the stream, switched to the
            // rings since this set last looked (a set looked at seldom): the
            // event speaks of the TCP socket, which carries no data now (a
            // writable socket's EPOLLOUT, without the ring's bytes, and a
            // one-shot spent on it). The rings answer, as for any ring member.
            const bool rd = ring_driven(in);
            if (rd && !in.ring_driven) list(set, in);
            if (rd || in.ring_driven) {
                // The TCP socket under the ring has news (the peer's end, a reset, a
                // marker): take it now, and report the member in this slot, as TCP's
                // would be (an ended socket stays in the kernel's ready list, and
                // takes its turns there as the member itself would).
                if ((k[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && in.sock->conn) in.sock->conn->drain_socket_now();
                stand_in(in, it->first, n);
                continue;
            }
            if (in.events & EPOLLONESHOT) in.disabled = true;
            put(in, k[i].events, n);
        }
        for (int i = 0; i < got; ++i) {
            if ((k[i].data.u64 & kTagMask) != kWakeTag) continue;
            auto it = set.fds.find(static_cast<int>(k[i].data.u64 & ~kTagMask));
            if (it == set.fds.end()) continue;
            Interest& in = it->second;
            // A cold member's doorbell is its only place in the kernel's ready
            // list: warmed (and listed at the end of the rings' turns), it is
            // reported in this slot, the turn TCP would have given it. A hot
            // member's doorbell that rang after its last disarm is drained so it
            // leaves the kernel's ready list, and is an event of ours, not a turn:
            // the member has its turns on the rings (and its ended socket's), and
            // the kernel is asked again for the slot (check()). Standing in for a
            // hot member too, it gave that member a third turn: with one slot a
            // pipe went unseen for twice the kernel's number of calls (epoll_fuzz,
            // late pass with pokes, seed 117).
            const bool was_cold = in.cold;
            if (in.cold) warm(set, in, true, doorbell_news(in));
            else if (in.ring_driven && in.sock->conn) in.sock->conn->drain_now(doorbell_news(in));
            if (was_cold && in.ring_driven) stand_in(in, it->first, n);
        }
        // Events of ours (doorbells, the bell, the ready flag, ring-driven
        // members' sockets) took slots of the kernel's answer that the
        // program's fds may need: the caller asks again for what is left.
        internal_taken = got - (n - before);
        return n;
    }
    int internal_taken = 0;
    bool refilling = false;

    // A ring-driven member in the slot its socket's or doorbell's kernel event
    // had: the kernel's ready list takes turns among those as among the
    // program's fds, so the member gets the turn TCP would have given it.
    void stand_in(Interest& in, int fd, int& n) {
        if (!in.listed || !in.sock->conn || !ring_driven(in) || (n >= max && !listed(in))) return;
        short kev = 0;
        const uint32_t ev = ring_events(in, &kev, true);
        sync_kernel(epfd, fd, in, kev);
        if (!ev) return;
        in.idle = 0;
        put(in, ev, n);
    }
    // An untracked fd's entry (its data word) among out[0..n) of this call.
    bool already_out(uint64_t data, int n) const {
        for (int j = 0; j < n; ++j)
            if (out[j].data.u64 == data) return true;
        return false;
    }

    // Looks at every watched interest; with commit, reports into out[n..max).
    // Without, only says whether one is ready. Starts where the last full
    // answer left a ready one out (EpollSet::scan_from). `again`: a second
    // scan of one answer (members warmed since merge in), which counts no idle look.
    int scan(int n, bool commit, bool again = false) {
        const size_t count = set.watch.size();
        const size_t from = count ? set.scan_from % count : 0;
        bool left_out = false;
        for (size_t j = 0; j < count; ++j) {
            const size_t i = (from + j) % count;
            auto it = set.fds.find(set.watch[i].first);
            if (it == set.fds.end() || it->second.id != set.watch[i].second) continue;
            Interest& in = it->second;
            if (!in.listed || !in.sock->conn) continue;
            if (!ring_driven(in)) {
                sync_kernel(epfd, it->first, in, 0);
                continue;
            }
            short kev = 0;
            // One already in this answer (its kernel event) takes its ring events too.
            uint32_t ev = ring_events(in, &kev, commit && (n < max || listed(in)));
            sync_kernel(epfd, it->first, in, kev);
            if (!ev) {
                if (commit && !again && in.idle < 255) ++in.idle;
                continue;
            }
            if (!commit) return 1;
            in.idle = 0;
            const bool fresh_entry = !listed(in);
            if (!put(in, ev, n)) {
                if (!left_out) set.scan_from = i, left_out = true;
                continue;
            }
            if (fresh_entry && timeout_us != 0 && in.sock->conn->spin_policy().learns())
                in.sock->conn->spin_policy().record(wait::now_us() - start);
        }
        return n;
    }

    // A local act (shutdown) may have made a cold interest ready: look at all.
    void rescue_cold() {
        uint64_t e = Connection::local_epoch();
        if (e == set.local_epoch) return;
        set.local_epoch = e;
        for (auto& [fd, in] : set.fds) warm(set, in, true);
    }

    // Idle hot interests go cold while the set is busy elsewhere.
    void retire_idle() {
        for (auto& [fd, id] : set.watch) {
            auto it = set.fds.find(fd);
            if (it == set.fds.end() || it->second.id != id) continue;
            Interest& in = it->second;
            if (!in.listed || in.idle < kIdleLooks || !ring_driven(in)) continue;
            SleepArm held;
            int64_t cap = -1;
            if (cool(set, epfd, fd, in, &held, &cap) == Cool::armed) settle_arm(held);
            in.idle = 0;
        }
    }

    // Sets registered in this one: their fds must read true in our kernel half.
    Exposed expose_inner() { return expose_sets_inside(set, 1); }

    int check(wait::Look look) {
        int nk = fresh;
        fresh = -1;
        bool ask = false;
        if (nk < 0) {
            // An all-cold set, or (Look::rings_first) no hot member ready: the
            // sleep that follows asks the kernel anyway. Right after a spin found
            // a member ready, the rings answer alone (wait_engine.hpp). Sets
            // inside this one are exposed before the kernel is asked.
            const bool sleep_asks = first && set.nested.empty() && timeout_us != 0 &&
                                    (set.watch.empty() || (look == wait::Look::rings_first && scan(0, false) == 0));
            if (sleep_asks || look == wait::Look::rings) nk = 0;
            else ask = true;
        }
        first = false;
        call = ++set.calls;  // a new answer: nothing listed in it yet
        rescue_cold();
        int n = 0;
        // Who goes first when both cannot fit: a full answer hands the lead to
        // the side it left out (EpollSet::rings_lead), as the kernel's ready
        // list takes turns. The kernel's events, once taken, are always
        // reported (an edge taken and dropped would be lost for good), so it
        // is asked for at most the slots the rings left.
        const bool rings_lead = ask && set.rings_lead;
        if (rings_lead) n = scan(0, true);
        if (ask && n < max) {
            expose_inner();
            nk = kernel_wait(k.data(), max - n, 0);
            if (nk < 0) return -1;
        }
        if (nk > 0) n = take_kernel(nk, n);
        // Events of ours (the bell, the ready flag, a drained doorbell) took
        // slots of the kernel's answer that the program's fds may need: ask
        // again for at most the slots left, before the rings take them. The
        // kernel's turn is the kernel's: an event of ours that reports nothing
        // must not hand it to the rings (a pipe behind the bell, one slot, went
        // unseen for twice the kernel's number of calls: epoll_fuzz, seed 579).
        for (int again = 0; again < 4 && nk > 0 && internal_taken > 0 && n < max; ++again) {
            const int more = kernel_wait(k.data(), max - n, 0);
            if (more <= 0) break;
            refilling = true;
            n = take_kernel(more, n);
            refilling = false;
        }
        // After rings_lead, again only for what the kernel's answer warmed (listed ones merge).
        if (!rings_lead || nk > 0) n = scan(n, true, rings_lead);
        set.rings_lead = n >= max && !rings_lead;
        if (n > 0) retire_idle();
        prune(set);
        if (ready_seen && scan(0, false) == 0) lower_ready(set);  // else it stays true (level-triggered members)
        ready_seen = false;
        return n;
    }
    bool peek() { return scan(0, false) > 0; }
    // Ready interests learn as scan() reports them; only a timeout is learned here.
    bool learns() { return false; }
    // The longest learned spin among the hot interests.
    uint32_t spin_budget_us() {
        uint32_t b = 0;
        for (auto& [fd, id] : set.watch) {
            auto it = set.fds.find(fd);
            if (it != set.fds.end() && it->second.id == id && ring_driven(it->second))
                b = std::max(b, it->second.sock->conn->spin_policy().budget_us());
        }
        return b;
    }
    wait::Armed arm() {
        wait::Armed a;
        const Exposed e = expose_inner();
        readied = e.ready;
        a.max_sleep_us = e.max_sleep_us;
        for (auto& [fd, id] : set.watch) {
            auto it = set.fds.find(fd);
            if (it == set.fds.end() || it->second.id != id) continue;
            Interest& in = it->second;
            if (in.listed) switch (watch_phase(set, in)) {
                case Watch::none: break;
                case Watch::added: readied = true; break;  // its phase may have moved since the scan
                case Watch::failed: a.cap(wait::kNapUs); break;
            }
            if (!in.listed || !ring_driven(in)) continue;
            SleepArm held;
            int64_t cap = -1;
            switch (cool(set, epfd, fd, in, &held, &cap)) {
                case Cool::cold: break;
                case Cool::ready:
                case Cool::moved: readied = true; break;
                case Cool::in_flight: a.may_sleep = false; break;
                case Cool::armed:
                    a.all_owned &= held.drain != Connection::Drain::busy;
                    if (cap >= 0) a.cap(cap);
                    sleep_arms.push_back(std::move(held));
                    break;
            }
        }
        prune(set);
        return a;
    }
    bool changed() {
        if (readied) return true;
        for (auto& s : sleep_arms)
            if (s.sock->conn->phase() != s.phase) return true;
        return scan(0, false) > 0;
    }
    int sleep(int64_t us, const signals::Seen& since) {
        int ms = us < 0 ? -1 : static_cast<int>((us + 999) / 1000);
        CountedSleeper counted(set);
        lk.unlock();
        int nk = sleep::epoll_wait(epfd, k.data(), max, ms, mask, since);
        int saved = errno;
        lk.lock();
        errno = saved;
        return nk;
    }
    void settle(int rc, bool slept) {
        for (auto& a : sleep_arms) settle_arm(a);
        sleep_arms.clear();
        if (slept && rc > 0) fresh = rc;
    }
    void learn(int64_t waited_us, bool timed_out) {
        if (!timed_out) return;  // the ready ones learned as they were reported
        for (auto& [fd, id] : set.watch) {
            auto it = set.fds.find(fd);
            if (it != set.fds.end() && it->second.id == id && ring_driven(it->second))
                it->second.sock->conn->spin_policy().record(waited_us);
        }
    }
};

// An event of ours in the kernel's answer (the set's phase bell, a doorbell, the
// ready flag): it takes a slot that the program's fds may need.
bool has_ours(const epoll_event* k, int nk) {
    for (int i = 0; i < nk; ++i) {
        const uint64_t tag = k[i].data.u64 & kTagMask;
        if (tag == kBellTag || tag == kWakeTag || tag == kReadyTag) return true;
    }
    return false;
}

// A member in the kernel's answer that moved to the rings since the set last
// looked (needs_watch let it go): its socket's event speaks of TCP, which no
// longer carries its bytes, and its bell may not have fit in the answer. The
// engine's take_kernel reports it from the rings instead. Only a member that
// watches the set's bell leaves the watch that way (needs_watch): a set without
// a bell (plain connections only) pays no lookup here.
bool has_moved(EpollSet& set, const epoll_event* k, int nk) {
    if (set.bell_fd < 0) return false;
    for (int i = 0; i < nk; ++i) {
        if ((k[i].data.u64 & kTagMask) != kTag) continue;
        auto it = set.fds.find(static_cast<int>(k[i].data.u64 & ~kTagMask));
        if (it != set.fds.end() && ring_driven(it->second) != it->second.ring_driven) return true;
    }
    return false;
}

// Kernel events of a set with nothing ring-driven, hot or cold, and no event of
// ours among them (has_ours): the kernel answers; we restore data words.
int translate(EpollSet& set, epoll_event* k, int nk, epoll_event* out, int max) {
    int n = 0;
    for (int i = 0; i < nk && n < max; ++i) {
        if ((k[i].data.u64 & kTagMask) == kNestTag) {
            if (take_nested(set, 1, k[i])) out[n++] = k[i];
            continue;
        }
        if ((k[i].data.u64 & kTagMask) != kTag) {
            out[n++] = k[i];
            continue;
        }
        auto it = set.fds.find(static_cast<int>(k[i].data.u64 & ~kTagMask));
        if (it == set.fds.end()) continue;
        Interest& in = it->second;
        if (in.ring_driven) continue;
        if (in.events & EPOLLONESHOT) in.disabled = true;
        out[n].events = k[i].events;
        out[n].data = in.data;
        ++n;
    }
    return n;
}

// The engine's run over a set with ring-driven interests. `pending` events
// came from a kernel wait already made.
int epoll_wait_ring(int epfd, EpollSet& set, epoll_event* out, int max, int timeout_ms, const sigset_t* mask,
                    std::vector<epoll_event>& k, int pending) {
    const int64_t timeout_us = timeout_ms < 0 ? -1 : static_cast<int64_t>(timeout_ms) * 1000;
    struct ArmsUse;
    Scratch<SleepArm, ArmsUse> arms;
    EpollWait w{epfd, set, out, max, timeout_us, mask, std::unique_lock<std::mutex>(set.mu), k, *arms};
    w.start = wait::now_us();
    if (pending > 0) w.fresh = pending;
    // A cancellation point (thread_cancel.hpp); a set the kernel answers alone
    // is libc's, and events a kernel wait already took are not dropped for one.
    cancel::Span span(pending == 0);
    signals::MaskDuring app_mask(mask);
    return span.leave(wait::run(w, timeout_us, signals::seen()));
}

// The epoll fds this process made (epoll_create*), until they are closed: a set
// may get its first shimmed socket after it was nested, and its dups are the
// same set (epoll_dup). (One inherited is not known until it holds a shimmed socket.)
std::unordered_set<int>* g_made = new std::unordered_set<int>();

std::atomic<bool> g_any_made{false};

void forget_made(unsigned first, unsigned last) {
    if (!g_any_made.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lk(g_mu);
    std::erase_if(*g_made, [&](int fd) { return static_cast<unsigned>(fd) >= first && static_cast<unsigned>(fd) <= last; });
}

bool made_here(int fd) {
    std::lock_guard<std::mutex> lk(g_mu);
    return g_made->count(fd) != 0;
}

// A number of `set` was closed (its g_sets entry erased, g_mu held): another
// number of the same instance, if one is left (a dup), or -1.
int other_number_locked(const std::shared_ptr<EpollSet>& set) {
    for (auto& [fd, s] : *g_sets)
        if (s == set) return fd;
    return -1;
}

// After a number of `set` closed: retired if it was the instance's last here,
// else its kernel calls go through a number still open.
void closed_number(const std::shared_ptr<EpollSet>& set, int closed, int other) {
    if (other < 0) return retire_set(*set);
    std::lock_guard<std::mutex> lk(set->mu);
    if (set->epfd == closed) set->epfd = other;
}

// A set registered in another (EPOLL_CTL_ADD/MOD of `fd` in epfd): a wait on the
// outer one exposes it and confirms what the kernel reports of it. Recorded for
// any epoll fd this process made, as a set may get its first shimmed socket
// after it was nested; any other fd is registered as the app asked.
int nest_ctl(int epfd, int op, int fd, const epoll_event& ev) {
    auto inner = find_set(fd, false);
    if (!inner && op == EPOLL_CTL_ADD && made_here(fd)) inner = find_set(fd, true);
    if (!inner || fd == epfd) return real::calls().epoll_ctl(epfd, op, fd, const_cast<epoll_event*>(&ev));
    if (ev.events & EPOLLET) {
        std::lock_guard<std::mutex> lk(inner->mu);
        inner->edge_watched = true;
    }
    auto outer = find_set(epfd, true);
    // Recorded before the kernel has it, so that no wait sees its tag unknown.
    std::lock_guard<std::mutex> lk(outer->mu);
    auto it = std::find_if(outer->nested.begin(), outer->nested.end(), [fd](const Nested& n) { return n.fd == fd; });
    const bool had = it != outer->nested.end();
    const Nested before = had ? *it : Nested{};
    if (!had) it = outer->nested.insert(outer->nested.end(), Nested{});
    *it = Nested{fd, inner, ev.events, ev.data};
    epoll_event kev{ev.events, {}};
    kev.data.u64 = kNestTag | static_cast<uint64_t>(fd);
    int r = real::calls().epoll_ctl(epfd, op, fd, &kev);
    if (r != 0) {
        const int saved = errno;
        if (had) *it = before;
        else outer->nested.erase(it);
        errno = saved;
    }
    return r;
}

}  // namespace

void epoll_created(int fd) {
    if (in_vfork_child()) return;
    std::lock_guard<std::mutex> lk(g_mu);
    g_made->insert(fd);
    g_any_made = true;
}

void epoll_dup(int oldfd, int newfd) {
    if (newfd < 0 || oldfd == newfd || in_vfork_child()) return;
    if (!g_any_made.load(std::memory_order_relaxed) && !g_any.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_sets->find(oldfd);
    const bool made = g_made->count(oldfd) != 0;
    if (it == g_sets->end() && !made) return;  // not an epoll fd we know
    if (made) g_made->insert(newfd);
    std::shared_ptr<EpollSet> set;
    if (it != g_sets->end()) {
        set = it->second;
    } else {
        // Made now, while the instance has one number: the first socket added
        // through either number then finds the set the other one waits on.
        set = std::make_shared<EpollSet>();
        set->epfd = oldfd;
        (*g_sets)[oldfd] = set;
        g_any = true;
    }
    (*g_sets)[newfd] = set;
}

Exposed expose_set(int epfd) {
    auto set = find_set(epfd, false);
    if (!set) return {};
    std::lock_guard<std::mutex> lk(set->mu);
    return expose_locked(*set, 1);
}

bool confirm_set_ready(int epfd) {
    auto set = find_set(epfd, false);
    return !set || confirm_nested(*set, 1);
}

int epoll_ctl_impl(int epfd, int op, int fd, epoll_event* ev) {
    auto sock = fd_table().contains(fd) ? fd_table().get(fd) : nullptr;
    if (!sock || sock->listening || op == EPOLL_CTL_DEL) {
        if (op == EPOLL_CTL_DEL)
            if (auto set = find_set(epfd, false)) {
                std::lock_guard<std::mutex> lk(set->mu);
                if (auto it = set->fds.find(fd); it != set->fds.end()) forget_interest(*set, epfd, it);
                std::erase_if(set->nested, [fd](const Nested& n) { return n.fd == fd; });
            }
        int r;
        if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && !sock && ev) r = nest_ctl(epfd, op, fd, *ev);
        else r = real::calls().epoll_ctl(epfd, op, fd, ev);
        if (r == 0 && (!sock || op == EPOLL_CTL_DEL) && (epoll_kept_any() || leftover::any_first())) epoll_kept_ctl(epfd, op, fd, ev);
        return r;
    }
    auto set = find_set(epfd, true);
    if (!ev) {
        errno = EFAULT;
        return -1;
    }
    std::lock_guard<std::mutex> lk(set->mu);
    auto old = set->fds.find(fd);
    // A ring-driven connection's kernel registration holds our events (its FIN,
    // sync_kernel), not the program's: an ADD registers those at once, and a
    // MOD of one the kernel already holds so is the program's to keep, with no
    // system call unless what we want from the kernel changes (sync_kernel
    // below). Event loops that move a socket between read and write interest
    // at every request (redis's ae) paid two calls of ours per change.
    // EPOLLEXCLUSIVE goes to the kernel as given: it judges those (EINVAL).
    const bool exclusive = (ev->events & EPOLLEXCLUSIVE) || (old != set->fds.end() && (old->second.events & EPOLLEXCLUSIVE));
    const bool ours_kept = op == EPOLL_CTL_MOD && !exclusive && old != set->fds.end() && old->second.ring_driven &&
                           !old->second.inherited && ring_driven(old->second);
    uint32_t kernel_events = ev->events;
    bool rd = false;
    if (op == EPOLL_CTL_ADD && !exclusive && sock->conn && !sock->conn->kernel_driven()) {
        short k = 0;
        sock->conn->ready_events(static_cast<short>(ev->events & kReadiness), &k);
        kernel_events = kernel_half(*sock->conn, ev->events, k);
        rd = true;
    }
    if (!ours_kept) {
        epoll_event kev{kernel_events, {}};
        kev.data.u64 = kTag | static_cast<uint64_t>(fd);
        if (int r = real::calls().epoll_ctl(epfd, op, fd, &kev); r != 0) return r;
    }
    Interest in;
    in.sock = sock;
    in.events = ev->events;
    in.data = ev->data;
    in.kernel_events = kernel_events;
    in.ring_driven = rd;
    in.fd = fd;
    in.id = set->next_id++;
    if (old != set->fds.end()) {  // MOD: a fresh look, same eventfd registration
        warm(*set, old->second, false);
        unwatch_phase(*set, old->second);
        in.wake_fd = old->second.wake_fd;
        in.wake_gen = old->second.wake_gen;
        if (ours_kept) in.kernel_events = old->second.kernel_events, in.ring_driven = true;
    }
    Interest& stored = set->fds[fd] = in;
    list(*set, stored);
    watch_phase(*set, stored);  // before the phase is looked at below
    if (ring_driven(stored)) {
        short k = 0;
        sock->conn->step();
        sock->conn->ready_events(static_cast<short>(stored.events & kReadiness), &k);
        sync_kernel(epfd, fd, stored, k);
        wake_sleepers(*set);
    } else if (stored.ring_driven) {
        sync_kernel(epfd, fd, stored, 0);  // it left the rings since: the kernel gets the program's events
    }
    if (leftover::any_first()) epoll_kept_ctl(epfd, op, fd, ev);  // a forked child's claim (epoll_note_claimed)
    return 0;
}

void epoll_note_claimed(const Connection* conn) {
    std::vector<std::shared_ptr<EpollSet>> sets;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        for (auto& [epfd, set] : *g_sets) sets.push_back(set);
    }
    for (auto& set : sets) {
        std::vector<std::pair<int, epoll_event>> held;  // its interests in the socket (fd, the program's)
        {
            std::lock_guard<std::mutex> lk(set->mu);
            for (auto& [fd, in] : set->fds)
                if (in.sock && in.sock->conn.get() == conn && !in.disabled) held.push_back({fd, epoll_event{in.events, in.data}});
        }
        for (auto& [fd, ev] : held) epoll_kept_ctl(set->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
}

bool epoll_emulated(int epfd) { return find_set(epfd, false) != nullptr; }

bool epoll_any() { return g_any.load(std::memory_order_relaxed) || epoll_kept_any(); }

namespace {
int epoll_wait_sets(int epfd, epoll_event* out, int max, int timeout_ms, const sigset_t* mask);
}  // namespace

int epoll_wait_impl(int epfd, epoll_event* out, int max, int timeout_ms, const sigset_t* mask) {
    if (epoll_kept_any() && max > 0) {
        // Sockets that owe kept bytes are ready now: the rest are looked at
        // without a wait, and theirs added (epoll_kept.hpp).
        std::vector<epoll_event> kept(static_cast<size_t>(max));
        if (const int nk = epoll_kept_ready(epfd, kept.data(), max); nk > 0) {
            int n = epoll_wait_sets(epfd, out, max, 0, mask);
            if (n < 0) n = 0;  // a signal: these are ready all the same
            for (int i = 0; i < nk; ++i) {
                int j = 0;
                while (j < n && out[j].data.u64 != kept[static_cast<size_t>(i)].data.u64) ++j;
                if (j < n) out[j].events |= kept[static_cast<size_t>(i)].events;
                else if (n < max) out[n++] = kept[static_cast<size_t>(i)];
            }
            return n;
        }
    }
    return epoll_wait_sets(epfd, out, max, timeout_ms, mask);
}

namespace {
int epoll_wait_sets(int epfd, epoll_event* out, int max, int timeout_ms, const sigset_t* mask) {
    // Handlers run on the way out, as the kernel runs them after its wait
    // (never restarted): one that closed a socket of this set while the wait
    // held set->mu waited for it for good (signal_seen.hpp). First, so that
    // they run once everything below has let go.
    signals::DeferHandlers held;
    auto set = find_set(epfd, false);
    auto kernel_wait = [&](epoll_event* k, int nk, int ms) {
        return mask ? real::calls().epoll_pwait(epfd, k, nk, ms, mask) : real::calls().epoll_wait(epfd, k, nk, ms);
    };
    if (max <= 0) return kernel_wait(out, max, timeout_ms);
    struct KernelUse;
    Scratch<epoll_event, KernelUse> scratch;
    std::vector<epoll_event>& k = scratch.room(static_cast<size_t>(max));
    int nk = 0;  // events of a kernel wait already made, in k
    if (!set) {
        // No shimmed member yet: the kernel answers. Another thread may add one
        // meanwhile (its epoll_ctl makes the set and wakes waits that began
        // before, EpollSet::uncounted): then the answer holds our
        // registrations' events, with our tags for data words, and goes through
        // the set below. (Returned as they were, a program's data.ptr was our tag.)
        nk = kernel_wait(out, max, timeout_ms);
        if (nk <= 0 || !(set = find_set(epfd, false))) return nk;
        std::copy_n(out, nk, k.begin());
    }
    for (;;) {
        std::unique_lock<std::mutex> lk(set->mu);
        prune(*set);
        if (nk == 0) {
            if (!set->watch.empty() || set->cold != 0 || !set->nested.empty()) {
                lk.unlock();
                return epoll_wait_ring(epfd, *set, out, max, timeout_ms, mask, k, 0);
            }
            // Nothing ring-driven: the kernel answers, we only restore data words.
            {
                CountedSleeper counted(*set);
                lk.unlock();
                nk = kernel_wait(k.data(), max, timeout_ms);
            }
            if (nk <= 0) return nk;
            lk.lock();
        }
        // A socket turned ring-driven meanwhile, or events of ours took slots
        // of the answer: the engine takes the events, and asks the kernel again
        // for the slots ours took (EpollWait::check). Taken here, they left an
        // answer short of min(maxevents, ready) (epoll_fuzz, late pass, seed 225).
        if (!set->watch.empty() || set->cold != 0 || !set->nested.empty() || has_ours(k.data(), nk) ||
            has_moved(*set, k.data(), nk)) {
            lk.unlock();
            return epoll_wait_ring(epfd, *set, out, max, timeout_ms, mask, k, nk);
        }
        int n = translate(*set, k.data(), nk, out, max);
        if (n > 0 || timeout_ms == 0) return n;
        nk = 0;  // nothing to report (an fd gone from the set, a nested set with nothing): look again
    }
}
}  // namespace

void epoll_forget(int fd, bool tracked_socket) {
    forget_made(fd, fd);
    epoll_kept_forget(fd);
    if (!g_any.load(std::memory_order_relaxed)) return;
    std::vector<std::pair<int, std::shared_ptr<EpollSet>>> sets;
    std::shared_ptr<EpollSet> closed;
    int other = -1;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (auto it = g_sets->find(fd); it != g_sets->end()) {
            closed = it->second;
            g_sets->erase(it);
            other = other_number_locked(closed);
        }
        if (tracked_socket)  // shim-internal fds (shm, registry) are in no set
            for (auto& [epfd, set] : *g_sets) sets.emplace_back(epfd, set);
    }
    // Set locks are taken without g_mu held: a thread inside a wait may hold a
    // set lock and need g_mu.
    if (closed) closed_number(closed, fd, other);
    for (auto& [epfd, set] : sets) {
        std::lock_guard<std::mutex> lk(set->mu);
        if (auto it = set->fds.find(fd); it != set->fds.end()) forget_interest(*set, epfd, it);
    }
}

namespace {
// What this thread's fork holds (two threads may fork at once: each holds what it got).
struct ForkHeld {
    std::vector<std::shared_ptr<EpollSet>> sets;
    bool registry = false;
};
thread_local ForkHeld t_fork_held;
}  // namespace

// A lock is held by another thread only for a map change or a scan, never across
// a sleep (fork_lock.hpp).
void epoll_before_fork() {
    ForkHeld& h = t_fork_held;
    if (!g_any.load(std::memory_order_relaxed) && !g_any_made.load(std::memory_order_relaxed)) return;
    // Set locks before g_mu, the order of every other path (epoll_forget).
    std::vector<std::shared_ptr<EpollSet>> sets;
    if (!fork_lock::take(g_mu)) {
        RS_LOG(debug, "fork: the epoll registry lock stayed taken; the child walks it as it is");
        return;
    }
    for (auto& [epfd, set] : *g_sets) sets.push_back(set);
    g_mu.unlock();
    for (auto& set : sets)
        if (fork_lock::take(set->mu)) h.sets.push_back(set);
    // (A set made since the snapshot is not held: its interests are new, few, and
    // its first changes are under g_mu, held from here.)
    h.registry = fork_lock::take(g_mu);
}

void epoll_after_fork_parent() {
    ForkHeld& h = t_fork_held;
    fork_lock::after_parent(g_mu, h.registry);
    for (auto& set : h.sets) fork_lock::after_parent(set->mu, true);
    h = ForkHeld{};
}

void epoll_after_fork_child() {
    ForkHeld h = std::move(t_fork_held);
    t_fork_held = ForkHeld{};
    fork_lock::after_child(g_mu, h.registry);
    for (auto& set : h.sets) fork_lock::after_child(set->mu, true);  // held, listed or not
    for (auto& [epfd, set] : *g_sets) {
        if (std::find(h.sets.begin(), h.sets.end(), set) == h.sets.end()) fork_lock::after_child(set->mu, false);
        for (auto& [fd, in] : set->fds) in.inherited = true;
    }
}

void epoll_forget_socket(const Socket* sock) {
    if (!g_any.load(std::memory_order_relaxed)) return;
    std::vector<std::pair<int, std::shared_ptr<EpollSet>>> sets;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        for (auto& [epfd, set] : *g_sets) sets.emplace_back(epfd, set);
    }
    for (auto& [epfd, set] : sets) {
        std::lock_guard<std::mutex> lk(set->mu);
        for (auto it = set->fds.begin(); it != set->fds.end();) {
            auto next = std::next(it);
            if (it->second.sock.get() == sock) forget_interest(*set, epfd, it);
            it = next;
        }
    }
}

void epoll_forget_sets_in(unsigned first, unsigned last) {
    forget_made(first, last);
    if (!g_any.load(std::memory_order_relaxed)) return;
    std::vector<std::tuple<std::shared_ptr<EpollSet>, int, int>> closed;  // set, number closed, one left
    {
        std::lock_guard<std::mutex> lk(g_mu);
        for (auto it = g_sets->begin(); it != g_sets->end();) {
            const auto fd = static_cast<unsigned>(it->first);
            if (fd >= first && fd <= last) closed.emplace_back(it->second, it->first, -1), it = g_sets->erase(it);
            else ++it;
        }
        for (auto& [set, fd, other] : closed) other = other_number_locked(set);
    }
    for (auto& [set, fd, other] : closed) closed_number(set, fd, other);
}

}  // namespace rdmasock::shim
