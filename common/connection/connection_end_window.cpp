// When poll reports the peer's end (POLLRDHUP, and POLLHUP once we shut our
// side too). TCP's FIN is processed only in sequence, and the sender may put
// no more than the receive window in flight ahead of it: whatever a program
// sees with a FIN is at most one receive buffer of unread bytes. A ring holds
// far more (the whole ring behind an end-of-stream record), and programs
// draw conclusions from HUP-without-IN (haproxy takes it for "nothing left"
// once its reads are paused and the event carries only EPOLLOUT|EPOLLHUP):
// a peer's end behind more unread bytes than the kernel socket would have
// buffered is shown later, when reads have brought it within that much, as a
// TCP sender's FIN would land once the window opened. Reads, EOF and errors
// are not affected: only the readiness of poll, select and epoll.
#include "connection/connection.hpp"

#include "connection/connection_detail.hpp"

#include <atomic>

namespace rdmasock {

namespace {
constexpr uint32_t kDefaultWindow = 131072;  // net.ipv4.tcp_rmem's default, where SO_RCVBUF cannot be asked
}

// The kernel socket's SO_RCVBUF: what the program set, the default, or what
// autotuning reached while the peer's bytes came over TCP before the switch
// (TCP's own window would have grown as much). Asked once.
size_t Connection::fin_window() {
    uint32_t w = fin_window_.load(std::memory_order_relaxed);
    if (w == 0) {
        int v = 0;
        socklen_t len = sizeof v;
        const int saved = errno;
        w = detail::kernel_sockopt_get(fd(), SO_RCVBUF, &v, &len) == 0 && v > 0 ? static_cast<uint32_t>(v) : kDefaultWindow;
        errno = saved;
        fin_window_.store(w, std::memory_order_relaxed);
    }
    return w;
}

// The peer's bytes we have not read yet: the ring's, and while its bytes before
// the switch still come over TCP, the kernel's too. (A looker: ring_readable
// never waits for a reader blocked in another thread.)
size_t Connection::unread_ahead() {
    size_t n = ring_readable(nullptr);
    if (rx_on_tcp()) n += kernel::inq(fd());
    return n;
}

// Would TCP's FIN have landed behind what is unread? The flag goes up before
// the count (Dekker with show_end_if_due): a read that takes bytes after our
// count sees the flag and wakes the waiter this look lets sleep.
bool Connection::end_fits() {
    end_hidden_.store(true, std::memory_order_seq_cst);
    return unread_ahead() < fin_window();
}

bool Connection::peer_end_shown() { return peer_fin_seen() && end_fits(); }

// After a read took ring bytes, with read_mu_ held (the count is the reader's),
// and after a seq_cst fence that orders the take before the flag's load.
void Connection::show_end_if_due() {
    if (!end_hidden_.load(std::memory_order_relaxed) || !peer_fin_seen()) return;
    if (transport_->reader().readable_bytes() >= fin_window()) return;
    if (end_hidden_.exchange(false)) wake_local();
}

}  // namespace rdmasock
