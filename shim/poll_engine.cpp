#include "poll_engine.hpp"

#include <algorithm>
#include <cerrno>
#include <vector>

#include "base/scratch.hpp"
#include "epoll_sets.hpp"
#include "shm/leftover.hpp"
#include "sys/interruptible_sleep.hpp"
#include "wait/phase_bell.hpp"
#include "real_calls.hpp"
#include "shim_state.hpp"
#include "sys/thread_cancel.hpp"
#include "wait/wait_engine.hpp"

namespace rdmasock::shim {

int64_t now_us() { return wait::now_us(); }

namespace {

struct Tracked {
    nfds_t idx;
    std::shared_ptr<Socket> sock;
    short kernel_events = 0;
    short ready = 0;
    int token = 0;
    Connection::Drain drain = Connection::Drain::none;
    Connection::News news = Connection::News::unknown;  // what the sleep said of its fds (end_sleep)
    int wake_at = -1;  // its doorbell's slot in the sleep's pollfds
    Phase phase = Phase::undecided;
    bool watching = false;  // this thread's bell is registered with it (phase_bell.hpp)
};

int sleep_in_kernel(pollfd* k, nfds_t n, int64_t timeout_us, const sigset_t* mask) {
    if (!mask) return real::calls().poll(k, n, timeout_us < 0 ? -1 : static_cast<int>((timeout_us + 999) / 1000));
    timespec ts{timeout_us / 1000000, (timeout_us % 1000000) * 1000};
    return real::calls().ppoll(k, n, timeout_us < 0 ? nullptr : &ts, mask);
}

// wait_engine hooks for poll/select: ring readiness for the shimmed fds that
// hold rings, the kernel's for every other fd.
struct PollWait {
    pollfd* fds;
    nfds_t n;
    const sigset_t* mask;
    std::vector<Tracked>& t;
    std::vector<int>& sets;  // emulated epoll sets among the fds: exposed before the kernel looks
    std::vector<pollfd>& k;
    bool sets_ready = false;
    // The revents in k are those of the sleep that just returned: the kernel's
    // answer is current, and a wake-up then costs one poll less.
    bool kernel_fresh = false;
    // This thread's bell, in the sleep while a tracked connection may change
    // phase (a rendezvous): another thread's switch then wakes us to look again.
    int bell = -1;
    bool bell_rang = false;
    // The table as the tracked sockets were looked up: a number closed or
    // reused since is looked up again (closed_meanwhile), only then.
    uint64_t table_gen = fd_table().generation();

    // Ring readiness of every tracked fd; returns how many are ready. Steps
    // each handshake first: a rendezvous that completed (the peer switched to
    // the ring) is readiness too, and the Dekker re-check must see it.
    int evaluate_rings() {
        int ready = 0;
        for (auto& e : t) {
            e.sock->conn->step();
            e.ready = e.sock->conn->ready_events(fds[e.idx].events, &e.kernel_events);
            ready += e.ready != 0;
        }
        return ready;
    }
    void kernel_request() {
        for (nfds_t i = 0; i < n; ++i) k[i] = {fds[i].fd, fds[i].events, 0};
        for (auto& e : t) k[e.idx].events = e.kernel_events;
    }

    // Rings plus the kernel's answer (what Look asks, wait_engine.hpp); writes
    // revents and returns the count.
    int check(wait::Look look) {
        const int rings = evaluate_rings();
        const bool kernel_too = look == wait::Look::full || (look == wait::Look::rings_first && rings > 0);
        if (!kernel_fresh && kernel_too) {
            for (int fd : sets) expose_set(fd);
            kernel_request();
            int rc = real::calls().poll(k.data(), n, 0);
            if (rc < 0) return rc;
        } else if (!kernel_fresh) {
            for (nfds_t i = 0; i < n; ++i) k[i].revents = 0;
        }
        kernel_fresh = false;
        for (nfds_t i = 0; i < n; ++i) fds[i].revents = k[i].revents;
        if (!sets.empty())
            for (nfds_t i = 0; i < n; ++i)
                if ((fds[i].revents & POLLIN) && std::find(sets.begin(), sets.end(), fds[i].fd) != sets.end() &&
                    !confirm_set_ready(fds[i].fd))
                    fds[i].revents &= static_cast<short>(~(POLLIN | POLLRDNORM));
        const bool table_moved = fd_table().generation() != table_gen;
        for (auto& e : t) {
            if (e.sock->conn->kernel_driven()) continue;  // the kernel's answer is the answer
            if (table_moved && closed_meanwhile(e)) {
                // Its number was closed (or names another file now): the kernel's
                // answer for the number, POLLNVAL for a closed one, as TCP's poll
                // looks the number up again at each pass.
                fds[e.idx].revents = static_cast<short>(k[e.idx].revents & (fds[e.idx].events | POLLERR | POLLHUP | POLLNVAL));
                continue;
            }
            // The TCP socket under a ring has something (the peer's end, a reset, a
            // way-back marker): TCP's poll would report it now, not at the next wait.
            if ((k[e.idx].revents & (POLLIN | POLLERR | POLLHUP)) && e.sock->conn->drain_socket_now())
                e.ready = e.sock->conn->ready_events(fds[e.idx].events, &e.kernel_events);
            fds[e.idx].revents = static_cast<short>(e.ready | (k[e.idx].revents & (POLLERR | POLLHUP | POLLNVAL)));
        }
        int count = 0;
        for (nfds_t i = 0; i < n; ++i) count += fds[i].revents != 0;
        return count;
    }
    bool peek() { return evaluate_rings() > 0; }
    bool closed_meanwhile(const Tracked& e) const {
        return !fd_table().contains(fds[e.idx].fd) || fd_table().get(fds[e.idx].fd) != e.sock;
    }
    // The longest learned spin among the connections polled (spin_policy.hpp);
    // one the kernel still answers for (a rendezvous) has no ring to spin on.
    uint32_t spin_budget_us() {
        uint32_t b = 0;
        for (auto& e : t)
            if (!e.sock->conn->kernel_driven()) b = std::max(b, e.sock->conn->spin_policy().budget_us());
        return b;
    }
    bool learns() {
        for (auto& e : t)
            if (e.sock->conn->spin_policy().learns()) return true;
        return false;
    }
    wait::Armed arm() {
        wait::Armed a;
        Exposed x;
        for (int fd : sets) x.merge(expose_set(fd));
        sets_ready = x.ready;
        a.max_sleep_us = x.max_sleep_us;
        for (auto& e : t) {
            e.phase = e.sock->conn->phase();
            if (Connection::phase_may_change(e.phase)) {
                // Registered before changed() looks at the phase again (phase_bell.hpp).
                if (bell < 0) bell = bell::thread_bell();
                if (bell >= 0) e.sock->conn->watch_phase(bell), e.watching = true;
                else a.cap(wait::kNapUs);
            }
            e.token = e.sock->conn->arm(fds[e.idx].events, &a.may_sleep);
            e.drain = e.sock->conn->try_begin_sleep();
            a.all_owned &= e.drain != Connection::Drain::busy;
            if (int64_t cap = e.sock->conn->max_sleep_us(fds[e.idx].events); cap >= 0)
                a.cap(cap);
        }
        return a;
    }
    // A handshake that finished during the re-check upgraded a connection we
    // could not arm: its doorbells were never requested, so look again.
    bool changed() {
        if (sets_ready || evaluate_rings() > 0) return true;
        for (auto& e : t)
            if (e.sock->conn->phase() != e.phase) return true;
        return false;
    }
    int sleep(int64_t timeout_us, const signals::Seen& since) {
        kernel_request();
        // Transports with their own doorbell (shm: a socket pair) are woken through it.
        for (auto& e : t) {
            e.wake_at = -1;
            if (int w = e.sock->conn->wake_fd(); w >= 0) e.wake_at = static_cast<int>(k.size()), k.push_back({w, POLLIN, 0});
        }
        if (bell >= 0) k.push_back({bell, POLLIN, 0});
        int rc = sleep::poll(k.data(), static_cast<nfds_t>(k.size()), timeout_us, mask, since);
        bell_rang = rc > 0 && bell >= 0 && k.back().revents != 0;
        note_news(rc);
        if (rc > 0)
            for (size_t i = n; i < k.size(); ++i) rc -= k[i].revents != 0;  // doorbells (and the bell) are not the app's events
        k.resize(n);
        return rc;
    }
    // Which tracked connections the sleep reported (their socket or doorbell):
    // only those have anything to drain. An interrupted sleep
    // (rc < 0) says nothing: their drains look first.
    // A socket not watched for POLLIN (a phase whose kernel events are the
    // program's) could hold a FIN the sleep did not report: its drain looks.
    void note_news(int rc) {
        using News = Connection::News;
        for (auto& e : t) {
            const bool watched = (k[e.idx].events & POLLIN) != 0;
            bool bell = false;
            if (e.wake_at >= 0) bell |= k[e.wake_at].revents != 0;
            if (rc < 0) e.news = News::unknown;
            else if (k[e.idx].revents != 0) e.news = News::some;
            else if (bell) e.news = watched ? News::doorbell : News::some;
            else e.news = watched ? News::none : News::unknown;
        }
    }
    void settle(int rc, bool slept) {
        for (auto& e : t) {
            e.sock->conn->end_sleep(e.drain, slept ? e.news : Connection::News::unknown);
            e.news = Connection::News::unknown;
            e.sock->conn->disarm(e.token);
            if (e.watching) e.sock->conn->unwatch_phase(bell), e.watching = false;
        }
        if (bell_rang) bell::drain(bell);
        bell_rang = false;
        // The sleep's revents answer for the kernel, unless a connection left the
        // ring path meanwhile: its fd was polled for our events, not the app's.
        kernel_fresh = slept && rc >= 0;
        for (auto& e : t) kernel_fresh = kernel_fresh && e.sock->conn->phase() == e.phase && !e.sock->conn->kernel_driven();
    }
    // A wait ended: the connections it found ready (or, timed out, all of them)
    // learn how long it took.
    void learn(int64_t waited_us, bool timed_out) {
        for (auto& e : t)
            if (timed_out || e.ready) e.sock->conn->spin_policy().record(waited_us);
    }
};

}  // namespace

bool any_shimmed(const pollfd* fds, nfds_t n) {
    if (leftover::any_first()) return true;  // kept bytes may make a plain socket readable
    for (nfds_t i = 0; i < n; ++i) {
        if (!fd_table().contains(fds[i].fd)) {
            if (fds[i].fd >= 0 && epoll_emulated(fds[i].fd)) return true;
            continue;
        }
        auto s = fd_table().get(fds[i].fd);
        // Not plain: rings, or a phase that may still bring them (phase_bell.hpp).
        if (s && s->conn && !s->conn->is_plain()) return true;
    }
    return false;
}

namespace {
int poll_engine_rings(pollfd* fds, nfds_t n, int64_t timeout_us, const sigset_t* mask);

// Sockets whose next bytes were claimed from a writer that did not answer
// (leftover.hpp, before_kernel) are readable though the kernel has nothing:
// the others are looked at without a wait, and those added. False: none such.
bool poll_kept_first(pollfd* fds, nfds_t n, const sigset_t* mask, int& r) {
    std::vector<nfds_t> kept;
    for (nfds_t i = 0; i < n; ++i)
        if (fds[i].fd >= 0 && (fds[i].events & (POLLIN | POLLRDNORM)) && leftover::first_pending(leftover::inode_of(fds[i].fd)))
            kept.push_back(i);
    if (kept.empty()) return false;
    r = poll_engine_rings(fds, n, 0, mask);
    if (r < 0) return true;  // a signal's EINTR, as the kernel's poll reports it
    for (nfds_t i : kept) fds[i].revents = static_cast<short>(fds[i].revents | (fds[i].events & (POLLIN | POLLRDNORM)));
    r = 0;
    for (nfds_t i = 0; i < n; ++i) r += fds[i].revents != 0;
    return true;
}
}  // namespace

int poll_engine(pollfd* fds, nfds_t n, int64_t timeout_us, const sigset_t* mask) {
    if (int r = 0; leftover::any_first() && poll_kept_first(fds, n, mask, r)) return r;
    return poll_engine_rings(fds, n, timeout_us, mask);
}

namespace {
int poll_engine_rings(pollfd* fds, nfds_t n, int64_t timeout_us, const sigset_t* mask) {
    // Handlers run on the way out, as the kernel runs them after its poll (never
    // restarted): one that ran during the spin and shut a socket down made poll
    // report it ready where TCP's says EINTR (signal_seen.hpp). First, so that
    // they run once everything below has let go.
    signals::DeferHandlers held;
    struct TrackedUse;
    struct SetsUse;
    struct KernelUse;
    Scratch<Tracked, TrackedUse> t;
    Scratch<int, SetsUse> sets;
    Scratch<pollfd, KernelUse> k;
    PollWait w{fds, n, mask, *t, *sets, *k};
    for (nfds_t i = 0; i < n; ++i) {
        if (fds[i].fd < 0) continue;
        if (!fd_table().contains(fds[i].fd)) {
            if (epoll_emulated(fds[i].fd)) w.sets.push_back(fds[i].fd);
            continue;
        }
        auto s = fd_table().get(fds[i].fd);
        // Held for the call, as the kernel's poll holds each file it waits on: a
        // close in another thread meanwhile ends nothing before the poll returns
        // (Socket::calls). One whose last close began already: the kernel's answer.
        if (s && s->conn && !s->conn->is_plain() && s->enter()) w.t.push_back({i, std::move(s)});
    }
    struct Held {
        std::vector<Tracked>& t;
        ~Held() {
            for (auto& e : t) e.sock->leave();
        }
    } held_sockets{*t};
    if (w.t.empty() && w.sets.empty()) return sleep_in_kernel(fds, n, timeout_us, mask);
    w.k.resize(n);
    cancel::Span span;  // a cancellation point (thread_cancel.hpp); the kernel's poll above is libc's
    signals::MaskDuring app_mask(mask);
    return span.leave(wait::run(w, timeout_us, signals::seen()));
}
}  // namespace

}  // namespace rdmasock::shim
