#include "epoll_sets.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "poll_engine.hpp"
#include "real_calls.hpp"
#include "shim_state.hpp"

namespace rdmasock::shim {

namespace {

constexpr uint64_t kTag = 0xfeed5ec000000000ull;  // kernel-half addresses: never an app pointer
constexpr uint64_t kWakeTag = 0xfeed5ed000000000ull;  // a transport's eventfd doorbell
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
    int wake_fd = -1;                    // the transport's eventfd, registered in the kernel set
};

struct EpollSet {
    std::mutex mu;
    std::unordered_map<int, Interest> fds;
};

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
    (*g_sets)[epfd] = s;
    g_any = true;
    return s;
}

bool ring_driven(const Interest& in) { return in.sock->conn && !in.sock->conn->kernel_driven(); }

// The transport's eventfd sits in the kernel set from when the connection turns
// ring-driven until it leaves the set: registered once, not at every wait.
void sync_wake(int epfd, int fd, Interest& in, bool rd) {
    int want = rd ? in.sock->conn->wake_fd() : -1;
    if (want == in.wake_fd) return;
    if (in.wake_fd >= 0) real::calls().epoll_ctl(epfd, EPOLL_CTL_DEL, in.wake_fd, nullptr);
    in.wake_fd = -1;
    if (want < 0) return;
    epoll_event ev{EPOLLIN, {}};
    ev.data.u64 = kWakeTag | static_cast<uint64_t>(fd);
    if (real::calls().epoll_ctl(epfd, EPOLL_CTL_ADD, want, &ev) == 0) in.wake_fd = want;
}

void drop_wake(int epfd, Interest& in) {
    if (in.wake_fd >= 0) real::calls().epoll_ctl(epfd, EPOLL_CTL_DEL, in.wake_fd, nullptr);
    in.wake_fd = -1;
}

// Brings the kernel registration in line with the connection's phase.
void sync_kernel(int epfd, int fd, Interest& in, short kernel_poll_events) {
    bool rd = ring_driven(in);
    sync_wake(epfd, fd, in, rd);
    uint32_t want = rd ? static_cast<uint32_t>(static_cast<uint16_t>(kernel_poll_events)) : in.events;
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
    uint32_t r = static_cast<uint16_t>(c.ready_events(want, kernel_events));
    uint32_t ev = r & (in.events | EPOLLERR | EPOLLHUP);
    if (in.disabled) return 0;
    if (!(ev & EPOLLOUT)) in.out_reported = false;
    if (!ev) return 0;
    if (in.events & EPOLLET) {
        // An edge is new data since the last report (a monotonic count), or
        // writability regained: unseen since the report, or a send found the
        // ring full since (as TCP's SOCK_NOSPACE makes freed space a wake-up).
        uint64_t landed = c.arrivals();
        uint64_t full = c.send_full_count();
        bool in_edge = (ev & EPOLLIN) && landed != in.landed_at_report;
        bool out_edge = (ev & EPOLLOUT) && (!in.out_reported || full != in.full_at_report);
        if (!in_edge && !out_edge && !(ev & (EPOLLERR | EPOLLHUP))) return 0;
        // Like Linux, an edge reports the full current mask (new data on a writable
        // socket is EPOLLIN|EPOLLOUT); what it reported is what the next edge is
        // measured against.
        if (commit) {
            if (ev & EPOLLIN) in.landed_at_report = landed;
            if (ev & EPOLLOUT) in.out_reported = true, in.full_at_report = full;
        }
    }
    if (commit && (in.events & EPOLLONESHOT)) in.disabled = true;
    return ev;
}

// Collects ring readiness into out[0..max); returns the count. With learn_since
// >= 0 (a wait that began then), each connection reported learns how long it took.
int collect(int epfd, EpollSet& set, epoll_event* out, int max, bool commit, int64_t learn_since = -1) {
    int n = 0;
    for (auto& [fd, in] : set.fds) {
        if (!ring_driven(in)) {
            sync_kernel(epfd, fd, in, 0);
            continue;
        }
        short kev = 0;
        uint32_t ev = ring_events(in, &kev, commit && n < max);
        sync_kernel(epfd, fd, in, kev);
        if (ev && n < max) {
            if (commit && learn_since >= 0) in.sock->conn->spin_policy().record(now_us() - learn_since);
            out[n].events = ev;
            out[n].data = in.data;
            ++n;
        } else if (ev && !commit) {
            return n + 1;
        }
    }
    return n;
}

// The longest learned spin among the set's ring-driven connections.
int64_t spin_budget_us(EpollSet& set) {
    uint32_t b = 0;
    for (auto& [fd, in] : set.fds)
        if (ring_driven(in)) b = std::max(b, in.sock->conn->spin_policy().budget_us());
    return b;
}

// Kernel events: tagged ones belong to tracked sockets (pass through those on
// plain TCP with the app's data; ring-driven ones were doorbells), others are
// the app's own.
int translate(EpollSet& set, epoll_event* k, int nk, epoll_event* out, int n, int max) {
    for (int i = 0; i < nk && n < max; ++i) {
        if ((k[i].data.u64 & kTagMask) == kWakeTag) continue;  // a doorbell: the rings answer
        if ((k[i].data.u64 & kTagMask) != kTag) {
            out[n++] = k[i];
            continue;
        }
        int fd = static_cast<int>(k[i].data.u64 & ~kTagMask);
        auto it = set.fds.find(fd);
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

}  // namespace

int epoll_ctl_impl(int epfd, int op, int fd, epoll_event* ev) {
    auto sock = fd_table().contains(fd) ? fd_table().get(fd) : nullptr;
    if (!sock || sock->listening) {
        if (op == EPOLL_CTL_DEL)
            if (auto set = find_set(epfd, false)) {
                std::lock_guard<std::mutex> lk(set->mu);
                if (auto it = set->fds.find(fd); it != set->fds.end()) drop_wake(epfd, it->second), set->fds.erase(it);
            }
        return real::calls().epoll_ctl(epfd, op, fd, ev);
    }
    auto set = find_set(epfd, op != EPOLL_CTL_DEL);
    if (op == EPOLL_CTL_DEL) {
        if (set) {
            std::lock_guard<std::mutex> lk(set->mu);
            if (auto it = set->fds.find(fd); it != set->fds.end()) drop_wake(epfd, it->second), set->fds.erase(it);
        }
        return real::calls().epoll_ctl(epfd, op, fd, ev);
    }
    if (!ev) {
        errno = EFAULT;
        return -1;
    }
    std::lock_guard<std::mutex> lk(set->mu);
    Interest in;
    in.sock = sock;
    in.events = ev->events;
    in.data = ev->data;
    in.ring_driven = false;
    in.kernel_events = ev->events;
    epoll_event kev{ev->events, {}};
    kev.data.u64 = kTag | static_cast<uint64_t>(fd);
    int r = real::calls().epoll_ctl(epfd, op, fd, &kev);
    if (r != 0) return r;
    if (auto it = set->fds.find(fd); it != set->fds.end()) in.wake_fd = it->second.wake_fd;  // MOD keeps it
    set->fds[fd] = in;
    if (ring_driven(in)) {
        short k = 0;
        sock->conn->step();
        sock->conn->ready_events(static_cast<short>(in.events & kReadiness), &k);
        sync_kernel(epfd, fd, set->fds[fd], k);
    }
    return 0;
}

bool epoll_emulated(int epfd) { return find_set(epfd, false) != nullptr; }

int epoll_wait_impl(int epfd, epoll_event* out, int max, int timeout_ms, const sigset_t* mask) {
    auto set = find_set(epfd, false);
    auto kernel_wait = [&](epoll_event* k, int nk, int ms) {
        return mask ? real::calls().epoll_pwait(epfd, k, nk, ms, mask) : real::calls().epoll_wait(epfd, k, nk, ms);
    };
    if (!set || max <= 0) return kernel_wait(out, max, timeout_ms);
    std::vector<epoll_event> k(static_cast<size_t>(max));
    const int64_t start = now_us();
    const int64_t learn_since = timeout_ms != 0 ? start : -1;
    int64_t spin_end = -1;  // set at the first look, from the learned spins (spin_policy.hpp)
    for (;;) {
        std::unique_lock<std::mutex> lk(set->mu);
        bool any_ring = false;
        for (auto& [fd, in] : set->fds) any_ring |= ring_driven(in);
        if (!any_ring) {
            // Nothing ring-driven: the kernel answers, we only restore data words.
            for (auto& [fd, in] : set->fds) sync_kernel(epfd, fd, in, 0);
            lk.unlock();
            int nk = kernel_wait(k.data(), max, timeout_ms);
            if (nk <= 0) return nk;
            lk.lock();
            int n = translate(*set, k.data(), nk, out, 0, max);
            if (n > 0 || timeout_ms == 0) return n;
            continue;  // only doorbells of sockets that just turned ring-driven: look again
        }
        if (spin_end < 0) spin_end = start + spin_budget_us(*set);
        int n = collect(epfd, *set, out, max, true, learn_since);
        if (n < max) {
            int nk = real::calls().epoll_wait(epfd, k.data(), max - n, 0);
            if (nk > 0) n = translate(*set, k.data(), nk, out, n, max);
        }
        if (n > 0 || timeout_ms == 0) return n;
        int64_t left = timeout_ms < 0 ? -1 : static_cast<int64_t>(timeout_ms) * 1000 - (now_us() - start);
        if (timeout_ms > 0 && left <= 0) {
            for (auto& [fd, in] : set->fds)
                if (ring_driven(in)) in.sock->conn->spin_policy().record(now_us() - start);
            return 0;
        }
        // Spin on the rings while the budget lasts.
        bool ready = false;
        for (int i = 1; !ready && now_us() < spin_end; ++i) {
            ready = collect(epfd, *set, out, max, false) > 0;
            if (!ready && i % 16 == 0) sched_yield();  // the peer may be queued on our CPU (docs/waiting.md)
        }
        if (ready) continue;
        // Sleep: arm, re-check, block in the kernel, drain doorbells.
        std::vector<std::pair<Connection*, int>> armed;
        bool all_owned = true;
        std::vector<std::pair<Connection*, Connection::Drain>> owned;
        std::vector<std::shared_ptr<Socket>> hold;
        bool may_sleep = true;
        std::vector<Phase> phases;
        for (auto& [fd, in] : set->fds) {
            if (!ring_driven(in)) continue;
            Connection* c = in.sock->conn.get();
            hold.push_back(in.sock);
            phases.push_back(c->phase());
            armed.emplace_back(c, c->arm(static_cast<short>(in.events & kReadiness), &may_sleep));
        }
        std::atomic_thread_fence(std::memory_order_seq_cst);
        for (auto& [c, token] : armed) {
            auto o = c->try_begin_sleep();
            owned.emplace_back(c, o);
            all_owned &= o != Connection::Drain::busy;
        }
        ready = !may_sleep || collect(epfd, *set, out, max, false) > 0;
        // A handshake that completed during the re-check: that connection was never armed.
        for (size_t i = 0; i < armed.size() && !ready; ++i) ready = armed[i].first->phase() != phases[i];
        lk.unlock();
        int nk = 0;
        if (!ready) {
            int ms = left < 0 ? -1 : static_cast<int>((left + 999) / 1000);
            if (!all_owned) ms = ms < 0 ? 1 : std::min(ms, 1);
            nk = kernel_wait(k.data(), max, ms);
        }
        int saved = errno;
        for (auto& [c, o] : owned) c->end_sleep(o);
        for (auto& [c, token] : armed) c->disarm(token);
        if (nk < 0 && saved == EINTR) {
            errno = EINTR;
            return -1;
        }
        if (nk > 0) {
            lk.lock();
            n = translate(*set, k.data(), nk, out, 0, max);
            if (n < max) n += collect(epfd, *set, out + n, max - n, true, learn_since);
            if (n > 0) return n;
        }
    }
}

void epoll_forget(int fd, bool tracked_socket) {
    if (!g_any.load(std::memory_order_relaxed)) return;
    std::vector<std::pair<int, std::shared_ptr<EpollSet>>> sets;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        g_sets->erase(fd);
        if (!tracked_socket) return;  // shim-internal fds (shm, registry) are in no set
        for (auto& [epfd, set] : *g_sets) sets.emplace_back(epfd, set);
    }
    // Set locks are taken without g_mu held: a thread inside collect() may hold a
    // set lock and need g_mu.
    for (auto& [epfd, set] : sets) {
        std::lock_guard<std::mutex> lk(set->mu);
        if (auto it = set->fds.find(fd); it != set->fds.end()) drop_wake(epfd, it->second), set->fds.erase(it);
    }
}

}  // namespace rdmasock::shim
