// Socket lifecycle interposers: which fds are TCP sockets, which connections
// may upgrade, and when a stream ends. Each one calls the real function first
// and only records what happened.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstring>
#include <string>
#include <vector>

#include "errno_keep.hpp"
#include "base/log.hpp"
#include "negotiation/offer_policy.hpp"
#include "real_calls.hpp"
#include "epoll_sets.hpp"
#include "fd_life.hpp"
#include "connection/kernel_only.hpp"
#include "shm/leftover.hpp"
#include "shm/registry.hpp"
#include "shim_state.hpp"
#include "sys/signal_seen.hpp"
#include "stat_hooks.hpp"
#include "sys/own_fd.hpp"

using namespace rdmasock;
using rdmasock::real::calls;

namespace {

bool is_tcp(int domain, int type, int protocol) {
    return (domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM &&
           (protocol == 0 || protocol == IPPROTO_TCP);
}

std::shared_ptr<Connection> new_connection(int fd, Role role, bool nonblocking) {
    return std::make_shared<Connection>(fd, role, nonblocking, shim::config(), real::socket_ops());
}

// The application asked for what only the kernel's socket does: its connection
// never leaves TCP, and one that did goes back (kernel_only.hpp).
// False when the connection stays on its rings (Connection::keep_on_tcp).
// `conn_why` (default: `why`) is the connection's own reason.
void mark_tcp_only(Socket& s, const char* why, bool inherited = false) {
    const char* none = nullptr;
    s.tcp_only_why.compare_exchange_strong(none, why);
    if (inherited) s.tcp_only_inherited = true;
    s.tcp_only = true;
}

bool keep_on_tcp(Socket& s, const char* why, bool inherited, const char* conn_why = nullptr) {
    if (shim::in_vfork_child()) return true;  // its exec hands the sockets it keeps back anyway
    mark_tcp_only(s, why, inherited);
    return !s.conn || s.conn->keep_on_tcp(conn_why ? conn_why : why);
}

// Set once, never cleared: the program does I/O the shim cannot see.
std::atomic<const char*> g_process_on_tcp{nullptr};

// Signal-driven I/O (O_ASYNC, FIOASYNC): SIGIO comes from the kernel's socket,
// which sees no byte a ring carries. A listener's SIGIO is for connections it
// queues, which the kernel still sees; its accepted sockets do not inherit it.
void keep_async_on_tcp(Socket& s) {
    if (!s.listening) keep_on_tcp(s, "O_ASYNC (signal-driven I/O)", false);
}

}  // namespace

namespace rdmasock::shim {

const char* process_on_tcp_reason() { return g_process_on_tcp.load(); }

// The flag goes up before the table is walked, and socket()/accept() put a new
// socket in the table before they read the flag: one of the two sees the other.
void keep_every_connection_on_tcp(const char* why) {
    const char* none = nullptr;
    if (!g_process_on_tcp.compare_exchange_strong(none, why)) return;  // done already
    RS_LOG(info, "%s: every connection stays on (or goes back to) TCP", why);
    if (!fd_table_built() || in_vfork_child()) return;  // no socket yet (no allocation where none is wanted); a vfork child changes no table
    std::vector<std::shared_ptr<Connection>> back;
    for (int fd : fd_table().present_in(0, INT_MAX)) {
        auto s = fd_table().get(fd);
        if (!s) continue;
        mark_tcp_only(*s, why);
        if (s->conn && s->conn->mark_tcp_only(why)) back.push_back(s->conn);
    }
    Connection::hand_over_all(back, why);  // both ends of a connection may be ours
}

bool give_back_fds() {
    if (!fd_table_built() || in_vfork_child() || own_fd_count() == 0) return false;
    const int saved = errno;
    int given = 0;
    for (int fd : fd_table().present_in(0, INT_MAX)) {
        auto s = fd_table().get(fd);
        if (s && s->conn && s->conn->give_back_side_channel("the file descriptor table was full")) ++given;
    }
    if (given) RS_LOG(info, "the file descriptor table was full: %d connection(s) gave their side channel back and stay on tcp", given);
    errno = saved;
    return given > 0;
}

}  // namespace rdmasock::shim

extern "C" {

int socket(int domain, int type, int protocol) {
    shim::ErrnoKept kept;
    int fd = shim::again_if_table_full([&] { return calls().socket(domain, type, protocol); });
    shim::forget_stale_fd(fd);
    if (fd >= 0 && is_tcp(domain, type, protocol)) {
        auto s = std::make_shared<Socket>();
        s->nonblocking = type & SOCK_NONBLOCK;
        s->netns.set(netns::thread_id_if_read());  // socket(2) makes it in the caller's
        fd_table().put(fd, s);
        if (const char* why = shim::process_on_tcp_reason()) keep_on_tcp(*s, why, false);
    }
    return kept(fd);
}

int connect(int fd, const sockaddr* addr, socklen_t len) {
    shim::ErrnoKept kept;
    auto s = fd_table().get(fd);
    // Decide before connecting: a listener may accept and close (unpublishing
    // itself) before connect() even returns here.
    uint32_t offers = 0;
    bool look_again = false;           // same host, no listener published yet: look after connect too
    const uint16_t port = registry::port_of(addr, len);
    const Config& cfg = shim::config();
    // In band: rdma only (same host goes over the side channel only).
    auto in_band_offers = [&](bool published_here, bool configured_peer) {
        return client_offers(cfg.transport, published_here, configured_peer) & ~handshake::kOfferShm;
    };
    std::shared_ptr<Connection> side;  // same host: the side-channel rendezvous
    if (s && !s->conn) {
        if (cfg.transport != TransportChoice::tcp && port && !s->tcp_only) {
            bool local = registry::same_host(addr, len);
            if (local && (cfg.transport == TransportChoice::automatic || cfg.transport == TransportChoice::shm)) {
                // The side-channel name must exist before the server can look for it.
                side = new_connection(fd, Role::client, s->nonblocking);
                if (!side->start_rendezvous_client(s->netns.get())) side.reset();
            } else {
                // Fault registry-miss: the first look misses (a listener that publishes just after it).
                bool here = local && cfg.fault != "registry-miss" && registry::is_published(port);
                offers = in_band_offers(here, !here && peer_matches(cfg.peers, addr, len));
                look_again = local && !here;
            }
        }
        RS_LOG(debug, "fd %d: connect to port %u, %s", fd, port,
               side ? "side channel listening" : offers ? "offering rdma" : "nothing (plain tcp)");
    }
    int r = calls().connect(fd, addr, len);
    int saved = errno;
    if (s && !s->conn && (r == 0 || errno == EINPROGRESS)) {
        if (side) {
            s->conn = std::move(side);
        } else {
            // A listener that was starting: it published (before listening) after our
            // look but before our SYN reached it. Nothing was sent yet: offer now.
            if (!offers && look_again && registry::is_published(port)) offers = in_band_offers(true, false);
            auto c = new_connection(fd, Role::client, s->nonblocking);
            if (offers) c->set_offer(offers);
            else if (look_again) c->note_not_offered("no shimmed listener published this port on this host");
            else if (s->tcp_only) c->note_not_offered((std::string(s->tcp_only_why.load()) + " was set").c_str());
            s->conn = std::move(c);
        }
        shim::stat_track(*s, fd, addr, len);
    }
    errno = saved;
    return kept(r);
}

// Publishes the same-host registry entry for a listening socket's port.
static void publish(Socket& s, int fd) {
    if (s.registry_fd >= 0 || shim::config().transport == TransportChoice::tcp) return;
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    uint16_t port = registry::port_of(reinterpret_cast<sockaddr*>(&a), len);
    if (port) s.registry_fd = registry::publish(port);
}

int listen(int fd, int backlog) {
    shim::ErrnoKept kept;
    auto s = fd_table().get(fd);
    // Publish before listening when the port is already bound, so no client can
    // connect in between and miss the entry; an unbound socket gets its port here.
    if (s) publish(*s, fd);
    int r = calls().listen(fd, backlog);
    if (r != 0 && s && s->registry_fd >= 0 && !s->listening) {
        int saved = errno;  // not listening after all: a published entry would make clients wait for us
        close_own_fd(s->registry_fd);
        s->registry_fd = -1;
        errno = saved;
    }
    if (r == 0 && s) {
        // Its connections are made in its namespace: asked once here, not at each accept.
        if (!s->netns.get().known && shim::config().transport != TransportChoice::tcp)
            s->netns.set(netns::socket_id(fd));
        s->listening = true;
        int saved = errno;
        publish(*s, fd);
        errno = saved;
    }
    return kept(r);
}

// `addr`: what accept wrote, when the caller asked for the peer's address and
// it fitted (`addr_len`), else null: then it is asked here.
static int accepted(int listen_fd, int fd, int flags, const sockaddr* addr = nullptr, socklen_t addr_len = 0) {
    if (fd < 0) return fd;
    shim::forget_stale_fd(fd);
    auto l = fd_table().get(listen_fd);
    if (l && l->listening) {
        auto s = std::make_shared<Socket>();
        s->nonblocking = flags & SOCK_NONBLOCK;
        s->netns.set(l->netns.get());  // accept(2) makes it in the listener's
        s->conn = new_connection(fd, Role::server, s->nonblocking);
        s->conn->in_band_only_with_rdma();
        const TransportChoice t = shim::config().transport;
        // A process on TCP for good (io_uring) starts no rendezvous; the socket is kept on TCP below.
        const bool process_on_tcp = shim::process_on_tcp_reason() != nullptr;
        if (l->tcp_only_inherited) {
            // The kernel copies the option to the accepted socket.
            const char* option = l->tcp_only_why.load();
            keep_on_tcp(*s, option, true, (std::string(option) + " set on the listener").c_str());
        }
        sockaddr_storage peer{};
        socklen_t plen = 0;  // asked once: for the same-host test and the statistics page
        if (!l->tcp_only_inherited && !process_on_tcp && (t == TransportChoice::automatic || t == TransportChoice::shm)) {
            int saved = errno;
            plen = sizeof peer;
            if (addr && addr_len <= sizeof peer) std::memcpy(&peer, addr, plen = addr_len);
            else if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) plen = 0;
            if (plen && registry::same_host(reinterpret_cast<sockaddr*>(&peer), plen))
                s->conn->start_rendezvous_server(l->netns.get());
            errno = saved;
        }
        shim::stat_track(*s, fd, plen ? reinterpret_cast<sockaddr*>(&peer) : nullptr, plen);
        fd_table().put(fd, s);
        // Read once it is in the table: a flag raised meanwhile is seen here, or its walk saw the socket.
        if (const char* why = shim::process_on_tcp_reason()) keep_on_tcp(*s, why, false);
    }
    return fd;
}

// The peer's address accept wrote, if whole (the kernel reports the full length even when it cut).
static const sockaddr* whole_address(const sockaddr* addr, socklen_t given, const socklen_t* len) {
    if (!addr || !len || *len > given || *len < sizeof(sockaddr_in)) return nullptr;
    if (addr->sa_family == AF_INET6) return *len >= sizeof(sockaddr_in6) ? addr : nullptr;
    return addr->sa_family == AF_INET ? addr : nullptr;
}

// The kernel's accept (`call`), then the new socket tracked with the address it wrote.
extern "C++" template <class Call>
int accept_tracked(int fd, sockaddr* addr, socklen_t* len, int flags, Call call) {
    const socklen_t given = len ? *len : 0;
    int r = shim::again_if_table_full(call);
    const sockaddr* a = r >= 0 ? whole_address(addr, given, len) : nullptr;
    return accepted(fd, r, flags, a, a ? *len : 0);
}

int accept(int fd, sockaddr* addr, socklen_t* len) {
    shim::ErrnoKept kept;
    return kept(accept_tracked(fd, addr, len, 0, [&] { return calls().accept(fd, addr, len); }));
}

int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
    shim::ErrnoKept kept;
    return kept(accept_tracked(fd, addr, len, flags, [&] { return calls().accept4(fd, addr, len, flags); }));
}

int shutdown(int fd, int how) {
    signals::HandlersAtReturn at_return;  // held back by the FIN's lock: they run once shutdown is done
    shim::ErrnoKept kept;
    auto s = fd_table().get(fd);
    // A `how` the kernel refuses (EINVAL) goes to it: the connection is untouched.
    const bool valid_how = how == SHUT_RD || how == SHUT_WR || how == SHUT_RDWR;
    if (valid_how && s && s->conn && !s->conn->is_plain()) {
        // Upgraded: the FIN travels in the ring; the kernel socket stays open for
        // doorbells. Before the switch the connection records it and the kernel
        // carries it below. (The connection says which: the switch may come
        // from another thread's send meanwhile.)
        bool kernel_carries = false;
        const int r = s->conn->shutdown(how, &kernel_carries);
        if (!kernel_carries) return kept(r);
    }
    return kept(calls().shutdown(fd, how));
}

int fcntl(int fd, int cmd, ...) {
    shim::ErrnoKept kept;
    va_list ap;
    va_start(ap, cmd);
    void* arg = va_arg(ap, void*);  // every fcntl argument fits a pointer-sized slot
    va_end(ap);
    // A number the program never opened (the shim's own, common/own_fd.hpp): what
    // the kernel says of it without the shim. (A loop that probes every number with
    // F_GETFD before it closes it sees none of them.)
    if (is_own_fd(fd) && !shim::in_vfork_child()) {
        errno = EBADF;
        return -1;
    }
    int r = cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC ? shim::again_if_table_full([&] { return calls().fcntl(fd, cmd, arg); })
                                                      : calls().fcntl(fd, cmd, arg);
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) return kept(shim::track_dup(fd, r));  // (a socket's, an epoll set's)
    if (r < 0 || !fd_table().contains(fd)) return kept(r);
    if (cmd == F_SETFL) {
        if (auto s = fd_table().get(fd)) {
            bool nb = reinterpret_cast<intptr_t>(arg) & O_NONBLOCK;
            s->nonblocking = nb;
            if (s->conn) s->conn->set_nonblocking(nb);
            if (reinterpret_cast<intptr_t>(arg) & O_ASYNC) keep_async_on_tcp(*s);
        }
    }
    return kept(r);
}

int fcntl64(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    return fcntl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long request, ...) {
    shim::ErrnoKept kept;
    va_list ap;
    va_start(ap, request);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    if (fd_table().contains(fd)) {
        auto s = fd_table().get(fd);
        if (s && request == FIONBIO && arg) {
            s->nonblocking = *static_cast<int*>(arg) != 0;
            if (s->conn) s->conn->set_nonblocking(s->nonblocking);
        }
        if (s && s->conn && request == FIONREAD && arg) {
            // A query steps the connection as poll does: a client whose server
            // switched to the rings since its last call reads them from now on.
            if (s->conn->phase() == Phase::rv_accepted) s->conn->step();
            if (s->conn->phase() == Phase::upgraded || s->conn->phase() == Phase::rv_accepted) {
                *static_cast<int*>(arg) = static_cast<int>(s->conn->readable_bytes());
                return kept(0);
            }
        }
        if (s && request == FIOASYNC && arg) {
            int r = calls().ioctl(fd, request, arg);
            if (r == 0 && *static_cast<int*>(arg) != 0) keep_async_on_tcp(*s);
            return kept(r);
        }
    }
    const int r = calls().ioctl(fd, request, arg);
    // Bytes a hand-over kept for this socket (leftover.hpp) are in its stream
    // as TCP's receive queue holds them: counted.
    if (r == 0 && request == FIONREAD && arg && leftover::any()) {
        auto s = fd_table().get(fd);
        const size_t more = leftover::unread_bytes(s && s->conn ? s->conn->socket_inode() : leftover::inode_of(fd));
        int& n = *static_cast<int*>(arg);
        n = static_cast<int>(std::min<size_t>(static_cast<size_t>(n) + more, INT_MAX));
    }
    return kept(r);
}

// A stream that ended both ways, or was reset, is TCP_CLOSE: no peer name
// (inet_getname). The kernel's socket, which carried neither FIN, still has one.
int getpeername(int fd, sockaddr* addr, socklen_t* len) {
    shim::ErrnoKept kept;
    int r = calls().getpeername(fd, addr, len);
    if (r == 0) {
        if (auto s = fd_table().get(fd); s && s->conn && s->conn->stream_closed()) {
            errno = ENOTCONN;
            return -1;
        }
    }
    return kept(r);
}

// SO_ERROR takes the socket's pending error, as the kernel's does: also the
// one a ring owes after the peer's reset (Connection::take_pending_err).
int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
    shim::ErrnoKept kept;
    std::shared_ptr<Socket> s;
    if (level == SOL_SOCKET && name == SO_ERROR && fd_table().contains(fd))
        if (s = fd_table().get(fd); s && !s->conn) s.reset();
    // What arrived on the TCP socket first (a dead peer's FIN or RST): the
    // error it makes. (The look leaves the kernel's own error to the call below.)
    if (s) s->conn->drain_socket_now();
    int r = calls().getsockopt(fd, level, name, value, len);
    if (r == 0 && level == IPPROTO_TCP && name == TCP_NODELAY && value && len)
        if (auto t = fd_table().get(fd); t && t->conn)
            if (int v; t->conn->program_nodelay(v)) std::memcpy(value, &v, std::min<size_t>(*len, sizeof v));
    if (r == 0 && s && value && len && *len >= sizeof(int)) {
        // The same RST: the ring's view of the stream (whose FIN came
        // first) names its error, which the kernel's socket cannot know.
        const int owed = s->conn->take_pending_err();
        if (owed) *static_cast<int*>(value) = owed;
    }
    return kept(r);
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
    shim::ErrnoKept kept;
    // What only the kernel's socket does (a low-water mark, kernel TLS, ...): the
    // connection goes back to TCP, before the option takes effect where it must.
    const auto ko = fd_table().contains(fd) ? kernel_only_option(level, name, value, len) : std::nullopt;
    if (ko && ko->before_the_call)
        if (auto s = fd_table().get(fd); s && !keep_on_tcp(*s, ko->option, true)) {
            // Kernel TLS on bytes that travel by RDMA would never be applied: the
            // answer of a kernel without the module, so TLS stays in user space.
            errno = ENOENT;
            return -1;
        }
    int r = calls().setsockopt(fd, level, name, value, len);
    if (r == 0 && level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO) && len >= sizeof(timeval)) {
        if (auto s = fd_table().get(fd); s && s->conn) {
            auto* tv = static_cast<const timeval*>(value);
            int64_t us = static_cast<int64_t>(tv->tv_sec) * 1000000 + tv->tv_usec;
            s->conn->set_timeouts(name == SO_RCVTIMEO ? us : -1, name == SO_SNDTIMEO ? us : -1);
        }
    }
    if (r == 0 && level == IPPROTO_TCP && name == TCP_NODELAY && value && len >= sizeof(int))
        if (auto s = fd_table().get(fd); s && s->conn) s->conn->set_program_nodelay(*static_cast<const int*>(value));
    if (r == 0 && ko && !ko->before_the_call)
        if (auto s = fd_table().get(fd)) keep_on_tcp(*s, ko->option, true);
    return kept(r);
}

}  // extern "C"
