#include "sys/fd_budget.hpp"
#include "sys/raw_syscall.hpp"
#include "sys/kernel_calls.hpp"
#include "shm/shm_rendezvous.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/log.hpp"
#include "shm/memory_budget.hpp"
#include "ring/ring_format.hpp"
#include "shm/shm_doorbell.hpp"
#include "shm/shm_transport.hpp"
#include "shm/side_channel.hpp"
#include "sys/netns.hpp"
#include "sys/own_fd.hpp"
#include "sys/fork_fence.hpp"

namespace rdmasock {

namespace {

constexpr uint32_t kMagic = 0x32565352;  // "RSV2"
// 2: socket-pair doorbells (shm_doorbell.hpp): ACCEPT carries the memfd and the
// client's ring end, CONFIRM the server's (1: two eventfds in ACCEPT).
constexpr uint16_t kVersion = 2;
enum : uint8_t { kOffer = 1, kAccept = 2, kConfirm = 3 };
static_assert(kConfirm == ShmTransport::kConfirmTag);

// The only message shape on the side channel. Fixed size, validated field by field.
struct Wire {
    uint32_t magic;
    uint16_t version;
    uint8_t type;
    uint8_t reserved;
    int32_t claimed_fd;   // the sender's fd number of its TCP socket (peer_check::holds)
    uint32_t reserved2;
    uint64_t ring_bytes;  // OFFER: the most the server wants; ACCEPT: what was created
};
static_assert(sizeof(Wire) == 24);

Wire make(uint8_t type, int tcp_fd, uint64_t ring) {
    Wire w{};
    w.magic = kMagic, w.version = kVersion, w.type = type, w.claimed_fd = tcp_fd, w.ring_bytes = ring;
    return w;
}

// An upgraded connection keeps three doorbell fds open in each process (both
// ends of the pair it sleeps on, the peer's ring end), where plain TCP would
// take none (sys/fd_budget.hpp, For::doorbells). Asked before the pair is made.
bool within_fd_budget(int tcp_fd) { return fd_budget::may_take(3, tcp_fd, fd_budget::For::doorbells); }
constexpr const char* kOverBudget = "over half of the file descriptor limit in use";

}  // namespace

ShmRendezvous::~ShmRendezvous() { close(); }

void ShmRendezvous::close() {
    fork_fence::Section fence;  // closed and forgotten together (a child never holds a number it lacks)
    // Never a plain close: a stranger's connection or message may be queued there,
    // with a file whose last close blocks (side_channel::close_channel).
    if (listen_fd_ >= 0) side_channel::close_listener(listen_fd_, !listen_refuses_fds_);
    if (chan_fd_ >= 0) side_channel::close_channel(chan_fd_, chan_may_hold_fds_);
    listen_fd_ = chan_fd_ = -1;
    shm_doorbell::close_sleep_end(sleep_end_);
    if (ring_end_ >= 0) close_own_fd(ring_end_);
    sleep_end_ = ring_end_ = -1;
}

// Every name the rendezvous looks up lives in the calling thread's network
// namespace (sys/netns.hpp): one that is not the socket's would find another
// namespace's look-alike connection. Such a connection stays on TCP for good.
// Asked right before each look-up (a name bound or connected to, a sock_diag
// query), in the thread that makes it; the steps between look up nothing.
bool ShmRendezvous::namespace_ok(int tcp_fd) {
    std::string why;
    if (socket_ns_.holds_thread(tcp_fd, why)) return true;
    stay_plain_ = true;
    RS_LOG(warn, "fd %d: no same-host transport: %s", tcp_fd, why.c_str());
    fail(why);
    return false;
}

// The doorbell pair this side sleeps on (shm_doorbell.hpp), at our own fd numbers.
bool ShmRendezvous::make_doorbell() {
    int s = -1, r = -1;
    if (!shm_doorbell::create(s, r)) return false;
    sleep_end_ = adopt_own_fd(s), ring_end_ = adopt_own_fd(r);
    return true;
}

ShmRendezvous::Result ShmRendezvous::fail(std::string why) {
    why_ = std::move(why);
    close();
    return Result::failed;
}

// Both names of our TCP socket; *err says why not (a peer that reset or ended
// the stream both ways leaves no peer name: ENOTCONN).
bool ShmRendezvous::peer_pair(int tcp_fd, sockaddr_storage& local, sockaddr_storage& remote, std::string* err) {
    socklen_t l1 = sizeof local, l2 = sizeof remote;
    int saved = errno;
    const char* which = "getsockname";
    bool ok = kernel::getsockname(tcp_fd, reinterpret_cast<sockaddr*>(&local), &l1) == 0 &&
              (which = "getpeername", kernel::getpeername(tcp_fd, reinterpret_cast<sockaddr*>(&remote), &l2) == 0);
    if (!ok && err) *err = errno == ENOTCONN ? std::string("the stream ended before the switch") : std::string(which) + ": " + strerror(errno);
    errno = saved;
    return ok;
}

// A refusal of a sender that once was the peer but has closed its socket since
// (its fd number may already name another socket) is no attack: say so.
// Call namespace_ok first.
bool ShmRendezvous::peer_gone(int tcp_fd) {
    sockaddr_storage local{}, remote{};
    peer_check::SocketId now;
    std::string err;
    return !peer_pair(tcp_fd, local, remote) || !peer_check::find_socket(remote, local, now, err) ||
           now.inode != peer_socket_.inode;
}

bool ShmRendezvous::client_listen(int tcp_fd) {
    fork_fence::Section fence;  // each step is one section: its fds are made and stored, or closed and forgotten, together
    if (!namespace_ok(tcp_fd)) return false;
    uint64_t ino = peer_check::inode_of(tcp_fd);
    if (ino) listen_fd_ = side_channel::listen_for(ino, listen_refuses_fds_, opt_.fault != "no-passrights");
    chan_may_hold_fds_ = !listen_refuses_fds_;  // its connections inherit the setting
    return listen_fd_ >= 0;
}

void ShmRendezvous::drop_candidate(const char* why) {
    RS_LOG(info, "side channel: %s; listening on for the server", why);
    side_channel::close_channel(std::exchange(chan_fd_, -1), chan_may_hold_fds_);  // forgotten first (fork_fence.hpp)
}

bool ShmRendezvous::accept_candidate(int tcp_fd, bool& failed) {
    failed = false;
    // Bounded per call: a stranger connecting in a loop costs each call a few syscalls.
    for (int i = 0; i < 8; ++i) {
        int c = side_channel::accept_peer(listen_fd_);
        if (c < 0) return false;
        // Who connected, by the kernel's word, before a byte of it is read.
        pid_t pid = 0;
        uid_t uid = static_cast<uid_t>(-1);
        if (!side_channel::peer_credentials(c, pid, uid)) {
            side_channel::close_channel(c, chan_may_hold_fds_);
            continue;
        }
        if (peer_socket_.inode == 0) {
            // The server end of our connection: local/remote swapped. Not connected
            // yet: no server can know the name yet either; whoever this is goes.
            sockaddr_storage local{}, remote{};
            std::string err;
            if (!namespace_ok(tcp_fd)) {
                side_channel::close_channel(c, chan_may_hold_fds_);
                failed = true;
                return false;
            }
            if (!peer_pair(tcp_fd, local, remote)) {
                side_channel::close_channel(c, chan_may_hold_fds_);
                continue;
            }
            bool queued = false;
            if (!peer_check::find_socket(remote, local, peer_socket_, err, &queued)) {
                side_channel::close_channel(c, chan_may_hold_fds_);
                if (queued) {
                    // The server has not accepted our connection: nobody holds its
                    // end yet, so nobody can be the server here. Whoever this is
                    // goes, unread; the real server may still come.
                    RS_LOG(info, "fd %d: side channel: refused a connection from pid %d (%s); listening on", tcp_fd,
                           static_cast<int>(pid), err.c_str());
                    continue;
                }
                failed = true;
                fail("cannot identify the server socket: " + err);
                return false;
            }
        }
        if (uid != peer_socket_.uid) {
            // Not the server's owner: a stranger (the names are listed in
            // /proc/net/unix). Dropped unread; the real server may still come.
            RS_LOG(info, "fd %d: side channel: refused a connection from pid %d uid %u (the server socket is uid %u's); listening on",
                   tcp_fd, static_cast<int>(pid), static_cast<unsigned>(uid), static_cast<unsigned>(peer_socket_.uid));
            side_channel::close_channel(c, chan_may_hold_fds_);
            continue;
        }
        if (opt_.same_user_only && uid != geteuid()) {
            side_channel::close_channel(c, chan_may_hold_fds_);
            failed = true;
            fail("OFFER refused: the peer is another user (RDMASOCK_SHM_USERS=same)");
            return false;
        }
        chan_fd_ = c;
        return true;
    }
    return false;
}

ShmRendezvous::Result ShmRendezvous::client_step(int tcp_fd, std::unique_ptr<Transport>& transport, bool may_accept,
                                                 const std::function<bool()>& stream_open) {
    fork_fence::Section fence;
    if (listen_fd_ < 0 && chan_fd_ < 0) return fail("no side channel");
    if (!offer_held_) {
        Result r = take_offer(tcp_fd);
        if (r != Result::done) return r;
    }
    // A verified OFFER waits here, costing no syscall, until the connection has
    // lived long enough to be worth rings (Connection::shm_due).
    if (!may_accept) return Result::waiting;
    return answer_offer(tcp_fd, transport, stream_open);
}

// done: a verified OFFER is held (offered_ring_); the listener is closed, since
// nobody else may join now.
ShmRendezvous::Result ShmRendezvous::take_offer(int tcp_fd) {
    Wire w{};
    side_channel::Received r;
    for (int candidates = 0;; ++candidates) {
        if (candidates == 8) return Result::waiting;  // bounded per call, as accept_candidate
        if (chan_fd_ < 0) {
            bool failed = false;
            if (!accept_candidate(tcp_fd, failed)) return failed ? Result::failed : Result::waiting;
        }
        r = side_channel::receive(chan_fd_, &w, sizeof w);
        if (r.bytes < 0 && r.error == 0) return Result::waiting;
        const bool had_fds = r.nfds > 0;
        side_channel::close_fds(r);  // an OFFER carries none (SO_PASSRIGHTS refuses them where the kernel can)
        if (r.bytes != sizeof w || r.truncated || had_fds || w.magic != kMagic || w.version != kVersion || w.type != kOffer) {
            // The server's uid, but not a well-formed OFFER: not the server's shim. Listen on.
            drop_candidate("a malformed OFFER");
            continue;
        }
        std::string err;
        if (!peer_check::holds(r.pid, r.uid, w.claimed_fd, peer_socket_, opt_.same_user_only, err)) {
            if (!namespace_ok(tcp_fd)) return Result::failed;
            if (peer_gone(tcp_fd)) return fail("the peer closed before the switch");
            // The sender is the server socket's owner (accept_candidate): a server
            // that moved its socket to another number since it offered, or closed
            // it, looks the same as a process of that user that never held it,
            // which gains nothing (docs/protocol.md, "Who may join"). Not a warning.
            RS_LOG(info, "fd %d: side channel: OFFER refused (pid %d): %s", tcp_fd, static_cast<int>(r.pid), err.c_str());
            drop_candidate("an OFFER refused");
            continue;
        }
        break;
    }
    offer_held_ = true;
    offered_ring_ = w.ring_bytes;
    side_channel::close_listener(std::exchange(listen_fd_, -1), !listen_refuses_fds_);  // forgotten first (fork_fence.hpp)
    return Result::done;
}

ShmRendezvous::Result ShmRendezvous::answer_offer(int tcp_fd, std::unique_ptr<Transport>& transport,
                                                  const std::function<bool()>& stream_open) {
    // The ACCEPT commits this side to the switch: only for a stream still open both ways.
    if (!stream_open()) return fail("the stream was shut down or ended before the switch");
    std::string err;
    const uint64_t wanted = ring::valid_capacity(offered_ring_) ? std::min(offered_ring_, opt_.ring_bytes) : opt_.ring_bytes;
    // Smaller rings, or none, rather than memory the program may need (memory_budget.hpp).
    memory_budget::Reservation reserved;  // until the rings below hold their memory
    const uint64_t ring = memory_budget::capacity_for_new_rings(wanted, [](uint64_t c) -> uint64_t { return ShmChannel::segment_size(c); },
                                                 opt_.ring_memory, err, &reserved);
    if (ring == 0) return fail(err);
    if (ring < wanted)
        RS_LOG(info, "fd %d: rings of %llu KiB, not %llu: memory is short (RDMASOCK_RING_MEMORY)", tcp_fd,
               static_cast<unsigned long long>(ring >> 10), static_cast<unsigned long long>(wanted >> 10));
    std::unique_ptr<ShmChannel> ch;
    if (opt_.fault == "shm-create") err = "fault injection shm-create";
    else ch = ShmChannel::create_sealed(ring, err, opt_.ring_memory);
    if (!ch) return fail("cannot create the rings: " + err);
    if (!within_fd_budget(tcp_fd)) return fail(kOverBudget);
    if (!make_doorbell()) return fail(std::string("socketpair: ") + strerror(errno));
    // The server's ring end comes with CONFIRM: from the OFFER's sender, now known.
    if (chan_may_hold_fds_ == false || listen_refuses_fds_) side_channel::allow_fds(chan_fd_, true);
    chan_may_hold_fds_ = true;
    auto t = std::make_unique<ShmTransport>(std::move(ch), sleep_end_, ring_end_, -1);
    const int ring_end = ring_end_;
    sleep_end_ = ring_end_ = -1;  // the transport's now
    Wire a = make(kAccept, tcp_fd, ring);
    // The server sleeps on its own pair and rings ours through `ring_end`.
    int fds[2] = {t->channel().memfd_fd(), ring_end};
    if (!side_channel::send(chan_fd_, &a, sizeof a, fds, 2)) return fail(std::string("cannot send ACCEPT: ") + strerror(errno));
    t->channel().release_memfd();  // the mapping stays; the server has its own fd now
    t->await_peer_ring(chan_fd_);  // CONFIRM comes there
    chan_fd_ = -1;
    transport = std::move(t);
    return Result::done;
}

ShmRendezvous::Result ShmRendezvous::client_confirmed(Transport& transport) {
    fork_fence::Section fence;
    switch (static_cast<ShmTransport&>(transport).confirm()) {
        case shm_doorbell::Confirm::waiting: return Result::waiting;
        case shm_doorbell::Confirm::done: close(); return Result::done;
        default: return fail("the server refused the side channel");
    }
}

ShmRendezvous::Result ShmRendezvous::server_offer(int tcp_fd) {
    fork_fence::Section fence;
    if (!namespace_ok(tcp_fd)) return Result::failed;
    sockaddr_storage local{}, remote{};
    std::string err;
    // The client end of our connection: its local address is our remote one.
    // (Asked once: a try again, for a client that publishes its name late, finds the same socket.)
    client_absent_ = false;
    if (peer_socket_.inode == 0 &&
        (!peer_pair(tcp_fd, local, remote, &err) || !peer_check::find_socket(remote, local, peer_socket_, err))) {
        peer_socket_ = {};
        return fail("cannot identify the client socket: " + err);
    }
    bool fds_refused = false;
    chan_fd_ = side_channel::connect_to(peer_socket_.inode, fds_refused, opt_.fault != "no-passrights");
    chan_may_hold_fds_ = !fds_refused;
    if (chan_fd_ < 0) {
        client_absent_ = true;
        return fail("the client has no side channel");
    }
    // Who listens there, by the kernel's word (its listen()), before we say a
    // thing or read a byte: anyone may bind a name first. Someone else than the
    // client socket's owner learns nothing from us (our fd number goes only to
    // the owner) and can hand us nothing (fds stay refused).
    pid_t pid = 0;
    uid_t uid = static_cast<uid_t>(-1);
    if (!side_channel::peer_credentials(chan_fd_, pid, uid)) return fail("no credentials for the side-channel listener");
    if (uid != peer_socket_.uid) {
        RS_LOG(warn, "fd %d: the side-channel name of the client socket is held by pid %d uid %u, not by the socket's owner (uid %u): no OFFER",
               tcp_fd, static_cast<int>(pid), static_cast<unsigned>(uid), static_cast<unsigned>(peer_socket_.uid));
        return fail("the side-channel name is held by another user than the client");
    }
    // The ACCEPT brings the rings and doorbells. (Without SO_PASSRIGHTS fds were never refused.)
    if (fds_refused) side_channel::allow_fds(chan_fd_, true);
    chan_may_hold_fds_ = true;
    Wire o = make(kOffer, tcp_fd, opt_.ring_bytes);
    if (!side_channel::send(chan_fd_, &o, sizeof o, nullptr, 0)) return fail("cannot send OFFER");
    return Result::waiting;
}

ShmRendezvous::Result ShmRendezvous::server_step(int tcp_fd, std::unique_ptr<Transport>& transport,
                                                 const std::function<bool()>& may_confirm) {
    fork_fence::Section fence;
    if (chan_fd_ < 0) return fail("no side channel");
    Wire w{};
    auto r = side_channel::receive(chan_fd_, &w, sizeof w);
    if (r.bytes < 0 && r.error == 0) return Result::waiting;
    struct Fds {  // closes whatever we do not keep
        side_channel::Received& r;
        ~Fds() { side_channel::close_fds(r); }
    } guard{r};
    if (r.bytes == 0) return fail("the client closed the side channel unanswered (it declined, or its connection ended first)");
    // A client gone before it answered (its side channel reset with our OFFER unread).
    if (r.bytes < 0) return fail(std::string("the client went away before the switch (side channel: ") + std::strerror(r.error) + ")");
    if (r.bytes != sizeof w || r.truncated || r.nfds != 2 || w.magic != kMagic || w.version != kVersion ||
        w.type != kAccept || !ring::valid_capacity(w.ring_bytes) || w.ring_bytes > opt_.ring_bytes)
        return fail("malformed ACCEPT on the side channel");
    std::string err;
    if (!peer_check::holds(r.pid, r.uid, w.claimed_fd, peer_socket_, opt_.same_user_only, err)) {
        if (!namespace_ok(tcp_fd)) return Result::failed;
        return fail(peer_gone(tcp_fd) ? "the peer closed before the switch" : "ACCEPT refused: " + err);
    }
    int memfd = r.fds[0];
    // Types first: a file of another kind would be closed by our refusal, and its
    // close may block (a lingering TCP socket); close_fds knows which may not.
    if (kernel::fcntl(memfd, F_GET_SEALS) < 0) return fail("the client's rings are not a memfd");
    // What we ring the client with: never a file whose flags or counter matter.
    if (!shm_doorbell::is_ring_end(r.fds[1])) return fail("the client's doorbell is not a connected Unix stream socket");
    if (!may_confirm()) return fail("the stream was shut down or ended before the switch");
    if (!within_fd_budget(tcp_fd)) return fail(kOverBudget);
    if (!make_doorbell()) return fail(std::string("socketpair: ") + strerror(errno));
    const int peer_ring = adopt_own_fd(r.fds[1]);
    r.nfds = 0;  // ours now (attach_sealed takes the memfd)
    auto ch = ShmChannel::attach_sealed(memfd, w.ring_bytes, err, opt_.ring_memory);
    if (!ch) {
        shm_doorbell::close_peer_ring(peer_ring);
        return fail("cannot map the client's rings: " + err);
    }
    // The client switches its sends on this byte; a close without it is a
    // refusal. It brings the ring end of the pair we sleep on.
    const uint8_t confirm = kConfirm;
    if (!side_channel::send(chan_fd_, &confirm, 1, &ring_end_, 1)) {
        shm_doorbell::close_peer_ring(peer_ring);
        return fail("cannot confirm on the side channel");
    }
    transport = std::make_unique<ShmTransport>(std::move(ch), sleep_end_, ring_end_, peer_ring);
    sleep_end_ = ring_end_ = -1;  // the transport's now
    close();
    return Result::done;
}

}  // namespace rdmasock
