#include "poll_engine.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <vector>

#include "real_calls.hpp"
#include "shim_state.hpp"

namespace rdmasock::shim {

int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

namespace {

struct Tracked {
    nfds_t idx;
    std::shared_ptr<Socket> sock;
    short kernel_events = 0;
    short ready = 0;
    int token = 0;
    bool owned = false;
    Phase phase = Phase::undecided;
};

int sleep_in_kernel(pollfd* k, nfds_t n, int64_t timeout_us, const sigset_t* mask) {
    if (!mask) return real::calls().poll(k, n, timeout_us < 0 ? -1 : static_cast<int>((timeout_us + 999) / 1000));
    timespec ts{timeout_us / 1000000, (timeout_us % 1000000) * 1000};
    return real::calls().ppoll(k, n, timeout_us < 0 ? nullptr : &ts, mask);
}

// Ring readiness of every tracked fd; returns how many are ready.
int evaluate_rings(std::vector<Tracked>& t, const pollfd* fds) {
    int ready = 0;
    for (auto& e : t) {
        e.ready = e.sock->conn->ready_events(fds[e.idx].events, &e.kernel_events);
        ready += e.ready != 0;
    }
    return ready;
}

// Rings plus the kernel's answer; writes revents and returns the count. The
// kernel's answer is a zero-timeout poll, or (kernel_fresh) the revents in k of
// the sleep that just returned: its answer is current, and a wake-up then costs
// one poll less.
int full_check(std::vector<Tracked>& t, pollfd* fds, std::vector<pollfd>& k, nfds_t n, bool kernel_fresh) {
    evaluate_rings(t, fds);
    if (!kernel_fresh) {
        for (nfds_t i = 0; i < n; ++i) k[i] = {fds[i].fd, fds[i].events, 0};
        for (auto& e : t) k[e.idx].events = e.kernel_events;
        int rc = real::calls().poll(k.data(), n, 0);
        if (rc < 0) return rc;
    }
    for (nfds_t i = 0; i < n; ++i) fds[i].revents = k[i].revents;
    for (auto& e : t) {
        if (e.sock->conn->kernel_driven()) continue;  // the kernel's answer is the answer
        fds[e.idx].revents = static_cast<short>(e.ready | (k[e.idx].revents & (POLLERR | POLLHUP | POLLNVAL)));
    }
    int count = 0;
    for (nfds_t i = 0; i < n; ++i) count += fds[i].revents != 0;
    return count;
}

// The longest learned spin among the connections polled (spin_policy.hpp).
int64_t spin_budget_us(const std::vector<Tracked>& t) {
    uint32_t b = 0;
    for (auto& e : t) b = std::max(b, e.sock->conn->spin_policy().budget_us());
    return b;
}

// A wait ended: the connections it found ready (or, timed out, all of them)
// learn how long it took.
void learn(std::vector<Tracked>& t, int64_t waited_us, bool timed_out) {
    for (auto& e : t)
        if (timed_out || e.ready) e.sock->conn->spin_policy().record(waited_us);
}

}  // namespace

bool any_shimmed(const pollfd* fds, nfds_t n) {
    for (nfds_t i = 0; i < n; ++i) {
        if (!fd_table().contains(fds[i].fd)) continue;
        auto s = fd_table().get(fds[i].fd);
        if (s && s->conn && !s->conn->kernel_driven()) return true;
    }
    return false;
}

int poll_engine(pollfd* fds, nfds_t n, int64_t timeout_us, const sigset_t* mask) {
    std::vector<Tracked> t;
    for (nfds_t i = 0; i < n; ++i) {
        if (fds[i].fd < 0 || !fd_table().contains(fds[i].fd)) continue;
        auto s = fd_table().get(fds[i].fd);
        if (s && s->conn && !s->conn->kernel_driven()) t.push_back({i, std::move(s)});
    }
    if (t.empty()) return sleep_in_kernel(fds, n, timeout_us, mask);
    std::vector<pollfd> k(n);
    const int64_t start = now_us();
    const int64_t spin_end = start + spin_budget_us(t);
    bool kernel_fresh = false;
    for (;;) {
        int count = full_check(t, fds, k, n, kernel_fresh);
        kernel_fresh = false;
        if (count != 0 || timeout_us == 0) {
            if (timeout_us != 0) learn(t, now_us() - start, false);
            return count;
        }
        int64_t left = timeout_us < 0 ? -1 : timeout_us - (now_us() - start);
        if (timeout_us > 0 && left <= 0) {
            learn(t, now_us() - start, true);
            return 0;
        }
        // Spin on the rings (no syscalls) while the spin budget lasts.
        bool spun_ready = false;
        while (now_us() < spin_end && !spun_ready) {
            for (int i = 0; i < 32 && !spun_ready; ++i) spun_ready = evaluate_rings(t, fds) > 0;
            if (!spun_ready) sched_yield();  // the peer may be queued on our CPU (docs/waiting.md)
        }
        if (spun_ready) continue;
        // Sleep: ask for doorbells, re-check, then block in the kernel.
        bool may_sleep = true;
        for (auto& e : t) {
            e.phase = e.sock->conn->phase();
            e.token = e.sock->conn->arm(fds[e.idx].events, &may_sleep);
        }
        std::atomic_thread_fence(std::memory_order_seq_cst);
        bool ready = !may_sleep;
        bool all_owned = true;
        for (auto& e : t) {
            e.owned = e.sock->conn->try_begin_sleep();
            all_owned &= e.owned;
        }
        ready = ready || evaluate_rings(t, fds) > 0;
        // A handshake that finished during the re-check upgraded a connection we
        // could not arm: its doorbells were never requested, so look again.
        for (auto& e : t) ready = ready || e.sock->conn->phase() != e.phase;
        int rc = 0;
        if (!ready) {
            for (nfds_t i = 0; i < n; ++i) k[i] = {fds[i].fd, fds[i].events, 0};
            for (auto& e : t) k[e.idx].events = e.kernel_events;
            // Transports with their own doorbell (an eventfd) are woken through it.
            k.resize(n);
            for (auto& e : t)
                if (int w = e.sock->conn->wake_fd(); w >= 0) k.push_back({w, POLLIN, 0});
            // Another thread owns a doorbell stream: it may swallow our doorbell, so nap briefly.
            int64_t nap = all_owned ? left : (left < 0 || left > 1000 ? 1000 : left);
            rc = sleep_in_kernel(k.data(), static_cast<nfds_t>(k.size()), nap, mask);
            if (rc > 0)
                for (size_t i = n; i < k.size(); ++i) rc -= k[i].revents != 0;  // doorbells are not the app's events
            k.resize(n);
        }
        int saved = errno;
        for (auto& e : t) {
            e.sock->conn->end_sleep(e.owned);
            e.sock->conn->disarm(e.token);
        }
        if (rc < 0 && saved == EINTR) {
            errno = EINTR;
            return -1;
        }
        // The sleep's revents answer for the kernel, unless a connection left the
        // ring path meanwhile: its fd was polled for our events, not the app's.
        kernel_fresh = rc >= 0 && !ready;
        for (auto& e : t) kernel_fresh = kernel_fresh && e.sock->conn->phase() == e.phase && !e.sock->conn->kernel_driven();
    }
}

}  // namespace rdmasock::shim
