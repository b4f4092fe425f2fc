// poll, ppoll, select, pselect: sets without shimmed connections go straight to
// the kernel; others go through the poll engine.
#include <sys/select.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include "base/scratch.hpp"
#include "errno_keep.hpp"
#include "poll_engine.hpp"
#include "real_calls.hpp"

using namespace rdmasock;
using rdmasock::real::calls;

namespace {

int64_t to_us(const timespec* ts) {
    return ts ? static_cast<int64_t>(ts->tv_sec) * 1000000 + ts->tv_nsec / 1000 : -1;
}

// select's fd_sets as a pollfd array, run through the engine, and back.
struct SelectUse;
struct SelectLookUse;

int select_via_poll(int nfds, fd_set* r, fd_set* w, fd_set* x, int64_t timeout_us, const sigset_t* mask) {
    Scratch<pollfd, SelectUse> scratch;
    std::vector<pollfd>& p = *scratch;
    for (int fd = 0; fd < nfds; ++fd) {
        short ev = 0;
        if (r && FD_ISSET(fd, r)) ev |= POLLIN;
        if (w && FD_ISSET(fd, w)) ev |= POLLOUT;
        if (x && FD_ISSET(fd, x)) ev |= POLLPRI;
        if (ev) p.push_back({fd, ev, 0});
    }
    // The kernel's select refuses a number that is not open when the call
    // begins (EBADF), but one closed while it waits is ready in every set it
    // was asked in, at its next look (fs/select.c: POLLIN_SET, POLLOUT_SET and
    // POLLEX_SET hold EPOLLNVAL). A first look that does not wait tells the two
    // apart; a call that finds something ready there makes only that look.
    const int64_t start = shim::now_us();
    int rc = shim::poll_engine(p.data(), p.size(), 0, mask);
    if (rc < 0) return rc;
    for (auto& e : p)
        if (e.revents & POLLNVAL) {
            errno = EBADF;
            return -1;
        }
    if (rc == 0 && timeout_us != 0) {
        const int64_t left = timeout_us < 0 ? -1 : std::max<int64_t>(0, timeout_us - (shim::now_us() - start));
        rc = shim::poll_engine(p.data(), p.size(), left, mask);
        if (rc < 0) return rc;
    }
    if (r) FD_ZERO(r);
    if (w) FD_ZERO(w);
    if (x) FD_ZERO(x);
    int count = 0;
    for (auto& e : p) {
        const short closed = (e.revents & POLLNVAL) ? e.events : 0;
        if (r && (e.events & POLLIN) && ((e.revents & (POLLIN | POLLHUP | POLLERR)) || closed)) FD_SET(e.fd, r), ++count;
        if (w && (e.events & POLLOUT) && ((e.revents & (POLLOUT | POLLERR)) || closed)) FD_SET(e.fd, w), ++count;
        if (x && (e.events & POLLPRI) && ((e.revents & POLLPRI) || closed)) FD_SET(e.fd, x), ++count;
    }
    return count;
}

bool select_has_shimmed(int nfds, fd_set* r, fd_set* w) {
    Scratch<pollfd, SelectLookUse> scratch;
    std::vector<pollfd>& p = *scratch;
    for (int fd = 0; fd < nfds && fd < FD_SETSIZE; ++fd)
        if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w))) p.push_back({fd, 0, 0});
    return shim::any_shimmed(p.data(), p.size());
}

}  // namespace

extern "C" {

// glibc's fortified headers declare poll's and ppoll's array write-only
// (attribute access); the kernel reads `events` from it, and so do we.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

int poll(pollfd* fds, nfds_t n, int timeout) {
    if (!shim::any_shimmed(fds, n)) return calls().poll(fds, n, timeout);
    shim::ErrnoKept kept;
    return kept(shim::poll_engine(fds, n, timeout < 0 ? -1 : static_cast<int64_t>(timeout) * 1000, nullptr));
}

int __poll_chk(pollfd* fds, nfds_t n, int timeout, size_t fdslen) {
    if (fdslen / sizeof(*fds) < n) abort();
    return poll(fds, n, timeout);
}

int ppoll(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask) {
    if (!shim::any_shimmed(fds, n)) return calls().ppoll(fds, n, ts, mask);
    shim::ErrnoKept kept;
    return kept(shim::poll_engine(fds, n, to_us(ts), mask));
}

int __ppoll_chk(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask, size_t fdslen) {
    if (fdslen / sizeof(*fds) < n) abort();
    return ppoll(fds, n, ts, mask);
}

#pragma GCC diagnostic pop

int select(int nfds, fd_set* r, fd_set* w, fd_set* x, timeval* tv) {
    if (!select_has_shimmed(nfds, r, w)) return calls().select(nfds, r, w, x, tv);
    shim::ErrnoKept kept;
    int64_t us = tv ? static_cast<int64_t>(tv->tv_sec) * 1000000 + tv->tv_usec : -1;
    int64_t start = shim::now_us();
    int rc = select_via_poll(nfds, r, w, x, us, nullptr);
    if (tv && us >= 0) {  // Linux reports the time left
        int64_t left = std::max<int64_t>(0, us - (shim::now_us() - start));
        tv->tv_sec = left / 1000000;
        tv->tv_usec = left % 1000000;
    }
    return kept(rc);
}

int pselect(int nfds, fd_set* r, fd_set* w, fd_set* x, const timespec* ts, const sigset_t* mask) {
    if (!select_has_shimmed(nfds, r, w)) return calls().pselect(nfds, r, w, x, ts, mask);
    shim::ErrnoKept kept;
    return kept(select_via_poll(nfds, r, w, x, to_us(ts), mask));
}

}  // extern "C"
