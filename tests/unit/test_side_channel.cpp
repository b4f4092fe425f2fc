// The same-host side channel: sealed memfd rings, fd passing with credentials,
// the peer check, and two Connections that start on TCP and switch to the rings
// at a byte offset, driven directly over a real loopback TCP connection.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <linux/sockios.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "connection/connection.hpp"
#include "connection_io.hpp"
#include "loopback.hpp"
#include "rdma/rdma_device.hpp"
#include "sys/process_id.hpp"
#include "shm/fd_reaper.hpp"
#include "shm/memfd_segment.hpp"
#include "shm/peer_check.hpp"
#include "shm/shm_channel.hpp"
#include "shm/shm_doorbell.hpp"
#include "shm/shm_transport.hpp"
#include "shm/side_channel.hpp"

using namespace rdmasock;
using rdmasock::test::recv_n;
using rdmasock::test::send_str;

namespace {

const SocketOps kLibc{::recv, ::send, ::recvmsg, ::sendmsg, ::poll};

// A loopback TCP pair whose client runs `before_connect` between socket() and connect().
template <class F>
std::pair<int, int> tcp_pair(F before_connect) {
    sockaddr_in a;
    int l = test::loopback_listener(a);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    before_connect(c);
    REQUIRE(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    int s = accept(l, nullptr, nullptr);
    close(l);
    return {c, s};
}

// A connected socket's (local, remote) addresses.
std::pair<sockaddr_storage, sockaddr_storage> addresses_of(int fd) {
    sockaddr_storage local{}, remote{};
    socklen_t l1 = sizeof local, l2 = sizeof remote;
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&local), &l1) == 0);
    REQUIRE(getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &l2) == 0);
    return {local, remote};
}

// A client and a server Connection over one loopback pair, side channel armed.
struct SidePair {
    Config cfg;
    std::unique_ptr<Connection> client, server;
    int cfd = -1, sfd = -1;
    // `eager`: the client answers the OFFER at its next call (RDMASOCK_SHM_AFTER_US=0),
    // which is what these cases test; the default's wait has its own case.
    explicit SidePair(Config c = {}, bool eager = true, const SocketOps& client_ops = kLibc) : cfg(std::move(c)) {
        if (eager) cfg.shm_after_us = 0;
        auto fds = tcp_pair([&](int fd) {
            client = std::make_unique<Connection>(fd, Role::client, false, cfg, client_ops);
            REQUIRE(client->start_rendezvous_client());
        });
        cfd = fds.first, sfd = fds.second;
        server = std::make_unique<Connection>(sfd, Role::server, false, cfg, kLibc);
        server->start_rendezvous_server();
    }
    ~SidePair() {
        client.reset(), server.reset();
        close(cfd), close(sfd);
    }
    // One request/answer round trip, both directions checked byte for byte.
    void round(const std::string& req) {
        auto srv = std::async(std::launch::async, [&] {
            std::string got = recv_n(*server, req.size());
            send_str(*server, "re:" + got);
            return got;
        });
        const ssize_t sent = send_str(*client, req);
        INFO("client send: errno " << errno << ", phases " << to_string(client->phase()) << "/" << to_string(server->phase()));
        REQUIRE(sent == static_cast<ssize_t>(req.size()));
        CHECK(recv_n(*client, req.size() + 3) == "re:" + req);
        CHECK(srv.get() == req);
    }
};

// Discovery waits only on a host without RDMA (Connection::discovery_may_wait).
bool discovery_may_wait_here() {
    std::string why;
    if (!RdmaDevice::host_may_have_rdma(why)) return true;
    WARN("an RDMA host: discovery is never deferred");
    return false;
}

// Round trips 1 ms apart (the client looks for an OFFER at most once a
// millisecond) until the server has switched, at most 400; then one more.
void rounds_until_switched(SidePair& p, const std::function<std::string(int)>& request) {
    for (int i = 0; i < 400 && p.server->phase() != Phase::upgraded; ++i) {
        p.round(request(i));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    p.round("after");
}

}  // namespace

TEST_CASE("a sealed memfd segment costs the pages touched, cannot be resized, and is checked on attach") {
    std::string err;
    MemfdSegment seg;
    REQUIRE(seg.create(1 << 16, 4096, err));
    struct stat st {};
    REQUIRE(fstat(seg.fd(), &st) == 0);
    CHECK(st.st_blocks == 0);  // nothing allocated before use
    static_cast<char*>(seg.data())[8192] = 1;
    REQUIRE(fstat(seg.fd(), &st) == 0);
    CHECK(st.st_blocks * 512 == 4096);
    // Neither side can change the size under the other's mapping.
    CHECK(ftruncate(seg.fd(), 4096) != 0);
    CHECK(ftruncate(seg.fd(), 1 << 20) != 0);
    CHECK(fallocate(seg.fd(), 0, 0, 1 << 20) != 0);
    CHECK(fcntl(seg.fd(), F_ADD_SEALS, F_SEAL_WRITE) != 0);
    // attach: right size and seals only.
    MemfdSegment other;
    CHECK_FALSE(other.attach(dup(seg.fd()), 1 << 17, err));
    int plain = memfd_create("unsealed", MFD_CLOEXEC);
    REQUIRE(ftruncate(plain, 1 << 16) == 0);
    MemfdSegment unsealed;
    CHECK_FALSE(unsealed.attach(plain, 1 << 16, err));
    CHECK(err.find("sealed") != std::string::npos);
    MemfdSegment good;
    CHECK(good.attach(dup(seg.fd()), 1 << 16, err));
    // A hugetlbfs memfd takes seals too, but its pages can run out into SIGBUS.
    const int huge = memfd_create("huge", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
    if (huge >= 0 && ftruncate(huge, 2 << 20) == 0 &&
        fcntl(huge, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) {
        MemfdSegment hugetlb;
        CHECK_FALSE(hugetlb.attach(huge, 2 << 20, err));
        CHECK(err.find("not a shared-memory memfd") != std::string::npos);
    } else if (huge >= 0) {
        close(huge);
    }
}

TEST_CASE("nothing of a same-host connection appears under /dev/shm") {
    std::string err;
    auto before = std::system("ls /dev/shm | grep -q rdmasock");
    auto ch = ShmChannel::create_sealed(1 << 16, err);
    REQUIRE(ch);
    CHECK(std::system("ls /dev/shm | grep -q rdmasock") == before);
}

TEST_CASE("the side channel carries fds and the sender's kernel-checked credentials") {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int one = 1;
    setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
    int pipefd[2];
    REQUIRE(pipe(pipefd) == 0);
    const char msg[] = "hello";
    REQUIRE(side_channel::send(sv[0], msg, sizeof msg, pipefd, 2));
    char buf[16];
    auto r = side_channel::receive(sv[1], buf, sizeof buf);
    CHECK(r.bytes == sizeof msg);
    CHECK(r.pid == getpid());
    CHECK(r.uid == geteuid());
    REQUIRE(r.nfds == 2);
    CHECK((fcntl(r.fds[0], F_GETFD) & FD_CLOEXEC));
    side_channel::close_fds(r);
    auto none = side_channel::receive(sv[1], buf, sizeof buf);
    CHECK(none.bytes < 0);
    CHECK(none.error == 0);  // nothing yet, not an error
    close(pipefd[0]), close(pipefd[1]), close(sv[0]), close(sv[1]);
}

// A client's side channel (sv[1]) and the server's end (sv[0]), with the
// server's doorbell pair, whose ring end CONFIRM carries.
namespace {
struct ConfirmChannel {
    int sv[2] = {-1, -1};
    int sleep_end = -1, ring_end = -1;
    const uint8_t tag = ShmTransport::kConfirmTag;
    ConfirmChannel() {
        REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
        REQUIRE(shm_doorbell::create(sleep_end, ring_end));
    }
    ~ConfirmChannel() {
        for (int fd : {sv[0], sv[1], sleep_end, ring_end})
            if (fd >= 0) close(fd);
    }
    bool send_confirm() { return side_channel::send(sv[0], &tag, 1, &ring_end, 1); }
};
}  // namespace

TEST_CASE("CONFIRM's doorbell reaches a parent and the child it forked before CONFIRM came") {
    // The client's channel is shared by a process and its child forked during
    // the rendezvous: whichever reads CONFIRM first must leave it for the other
    // (a child without the server's doorbell woke nobody: mt_fuzz hung).
    ConfirmChannel ch;
    int (&sv)[2] = ch.sv;
    const uint8_t tag = ch.tag;
    int got = -1;
    CHECK(shm_doorbell::receive_ring_end(sv[1], tag, got, true) == shm_doorbell::Confirm::waiting);
    int go[2];
    REQUIRE(pipe(go) == 0);
    pid_t child = fork();
    if (child == 0) {
        // The child looks after the parent took it (the parent waits for it below).
        char c;
        int r = -1;
        bool ok = read(go[0], &c, 1) == 1;
        ok = ok && shm_doorbell::receive_ring_end(sv[1], tag, r, true) == shm_doorbell::Confirm::done && shm_doorbell::is_ring_end(r);
        _exit(ok ? 0 : 1);
    }
    REQUIRE(child > 0);
    REQUIRE(ch.send_confirm());
    CHECK(shm_doorbell::receive_ring_end(sv[1], tag, got, true) == shm_doorbell::Confirm::done);
    CHECK(shm_doorbell::is_ring_end(got));
    close(sv[1]);  // the parent is done with the channel, as take_confirm is
    sv[1] = -1;
    REQUIRE(write(go[1], "g", 1) == 1);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    close(got), close(go[0]), close(go[1]);
}

TEST_CASE("CONFIRM is taken from a channel no other process holds: its close queues nothing for fd_reaper") {
    ConfirmChannel ch;
    REQUIRE(ch.send_confirm());
    int got = -1;
    CHECK(shm_doorbell::receive_ring_end(ch.sv[1], ch.tag, got) == shm_doorbell::Confirm::done);
    CHECK(shm_doorbell::is_ring_end(got));
    int queued = -1;
    REQUIRE(ioctl(ch.sv[1], SIOCINQ, &queued) == 0);
    CHECK(queued == 0);
    close(got);
}

TEST_CASE("a file a peer handed over is closed in place only when its close cannot block") {
    // (issue 38) A pipe closes in place; a TCP socket (whose last close may linger) and a
    // side-channel socket with a message still queued go to the shim's own thread.
    const unsigned before = fd_reaper::started();
    int p[2];
    REQUIRE(pipe(p) == 0);
    side_channel::discard_fd(p[0]);
    CHECK(fcntl(p[0], F_GETFD) < 0);
    CHECK(fd_reaper::started() == before);
    close(p[1]);
    // A socket pair with nothing queued: closed in place, even when it may hold fds.
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    side_channel::close_channel(sv[1], true);
    CHECK(fcntl(sv[1], F_GETFD) < 0);
    CHECK(fd_reaper::started() == before);
    close(sv[0]);
    // A message queued and never read: its fds would be dropped by our close.
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    REQUIRE(pipe(p) == 0);
    REQUIRE(side_channel::send(sv[0], "x", 1, p, 1));
    side_channel::close_channel(sv[1], true);
    CHECK(fd_reaper::started() >= std::min(before + 1, 1u));
    int tcp = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(tcp >= 0);
    side_channel::discard_fd(tcp);
    // The thread closes it soon; the number is the shim's until then (the program's close: EBADF).
    bool closed = false;
    for (int i = 0; i < 2000 && !closed; ++i) closed = fcntl(tcp, F_GETFD) < 0 || (usleep(1000), false);
    CHECK(closed);
    close(p[0]), close(p[1]), close(sv[0]);
}

TEST_CASE("sock_diag finds the peer socket of a loopback connection and holds() checks the fd") {
    auto [c, s] = tcp_pair([](int) {});
    const auto [local, remote] = addresses_of(c);
    peer_check::SocketId server_end;
    std::string err;
    REQUIRE(peer_check::find_socket(remote, local, server_end, err));
    CHECK(server_end.inode == peer_check::inode_of(s));
    CHECK(server_end.uid == geteuid());
    std::string why;
    CHECK(peer_check::holds(getpid(), geteuid(), s, server_end, false, why));
    // The right process claiming the wrong fd (a forged pair) is refused.
    CHECK_FALSE(peer_check::holds(getpid(), geteuid(), c, server_end, false, why));
    CHECK_FALSE(peer_check::holds(getpid(), geteuid() + 1, s, server_end, false, why));
    close(c), close(s);
}

TEST_CASE("sock_diag: a connection still in its listener's queue is told apart from a closed one") {
    // A stranger can reach a client's side channel before the server accepted the
    // connection (a busy postmaster): the server end has no inode yet. The client
    // must drop the stranger and wait, not give the connection up as if its peer
    // had closed (pgbench_beside_attackers, once in a CI run of 2026-12-01).
    sockaddr_in a;
    int l = test::loopback_listener(a, 4);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    const auto [local, remote] = addresses_of(c);
    peer_check::SocketId server_end;
    std::string err;
    bool queued = false;
    CHECK_FALSE(peer_check::find_socket(remote, local, server_end, err, &queued));
    CHECK(queued);
    CHECK_THAT(err, Catch::Contains("not accepted"));
    int s = accept(l, nullptr, nullptr);
    REQUIRE(s >= 0);
    CHECK(peer_check::find_socket(remote, local, server_end, err, &queued));
    CHECK(server_end.inode == peer_check::inode_of(s));
    close(s);  // the server end closes first: an orphan in FIN_WAIT, never "queued"
    CHECK_FALSE(peer_check::find_socket(remote, local, server_end, err, &queued));
    CHECK_FALSE(queued);
    CHECK_THAT(err, Catch::Contains("closed"));
    close(c), close(l);
}

TEST_CASE("side channel: a connection switches only once it has lived RDMASOCK_SHM_AFTER_US; before, no rings") {
    Config cfg;
    cfg.shm_after_us = 2000000;  // 2 s: the four rounds below take far less, even on a busy machine
    SidePair p(cfg, false);
    for (int i = 0; i < 4; ++i) p.round("short-" + std::to_string(i));
    std::string why;
    if (RdmaDevice::host_may_have_rdma(why)) {
        // An RDMA host: the server offers at its first call (a same-host client may
        // speak in band), so the OFFER was taken and verified, but no ACCEPT went
        // out: both ends still on TCP, no rings anywhere.
        CHECK(p.client->phase() == Phase::rv_listen);
        CHECK(p.server->phase() == Phase::rv_offered);
    } else {
        // Discovery deferred too: no name published, no OFFER made.
        CHECK(p.client->phase() == Phase::rv_listen);
        CHECK(p.server->phase() == Phase::rv_pending);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));
    // The client publishes its name at its next call, the server offers at its next.
    rounds_until_switched(p, [](int i) { return "lives-" + std::to_string(i) + std::string((i % 4) * 3000, 'y'); });
    CHECK(p.client->phase() == Phase::upgraded);
    CHECK(p.server->phase() == Phase::upgraded);
}

TEST_CASE("side channel: a server that looked before the client published its name tries again") {
    if (!discovery_may_wait_here()) return;
    Config cfg;
    cfg.shm_after_us = 1000;
    SidePair p(cfg, false);
    // The server's calls come first (eight, the count discovery waits for) and
    // find no name: the client has made no call since connect, so it published
    // none. The client's calls then do.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (int i = 0; i < 8; ++i) REQUIRE(send_str(*p.server, "hello") == 5);
    CHECK(p.server->phase() == Phase::rv_pending);
    CHECK(recv_n(*p.client, 40) == std::string("hellohellohellohellohellohellohellohello"));
    rounds_until_switched(p, [](int i) { return "r" + std::to_string(i); });
    CHECK(p.client->phase() == Phase::upgraded);
    CHECK(p.server->phase() == Phase::upgraded);
}

TEST_CASE("side channel: a server that forked after its first call stays on TCP: its child's bytes are not in its count") {
    if (!discovery_may_wait_here()) return;
    Config cfg;
    cfg.shm_after_us = 1000;
    SidePair p(cfg, false);
    p.round("first");  // the server's first calls: this process carries the stream
    note_fork_begins();  // what the shim's pthread_atfork prepare handler does (shim_state.cpp)
    pid_t child = fork();
    if (child == 0) _exit(send_str(*p.server, "from the child") == 14 ? 0 : 1);
    REQUIRE(child > 0);
    note_fork();
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    CHECK(recv_n(*p.client, 14) == "from the child");
    // Long past the discovery's time and count: a switch now would put the
    // parent's offset 14 bytes short (mt_fuzz's fork burst: a reset, or bytes
    // that never arrived). Every round is checked byte for byte.
    for (int i = 0; i < 40; ++i) {
        p.round("r" + std::to_string(i));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(p.server->phase() == Phase::plain);
    CHECK(p.client->phase() != Phase::upgraded);
    CHECK(p.server->stats_line(0, 0).find("forked while the same-host rendezvous was under way") != std::string::npos);
}

// A poll that, once armed, stops at its first look for the peer's FIN (the
// client's last check before it commits its ACCEPT, taken under handshake_mu_)
// until let go: the thread is then inside a rendezvous step.
std::atomic<bool> g_stop_armed{false}, g_stopped{false}, g_let_go{false};
int stopping_poll(pollfd* p, nfds_t n, int t) {
    if ((p->events & POLLRDHUP) && g_stop_armed.exchange(false)) {
        g_stopped = true;
        while (!g_let_go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return ::poll(p, n, t);
}
const SocketOps kStopping{::recv, ::send, ::recvmsg, ::sendmsg, stopping_poll};

TEST_CASE("side channel: a child forked while another thread is inside a rendezvous step trusts none of it: TCP at once, and the parent's stream stays whole") {
    SidePair p({}, true, kStopping);
    char b[8];
    iovec v{b, sizeof b};
    CHECK(p.server->recv(&v, 1, MSG_DONTWAIT) == -1);  // its first step: the OFFER
    REQUIRE(p.server->phase() == Phase::rv_offered);
    g_stop_armed = true;
    auto sender = std::async(std::launch::async, [&] { return send_str(*p.client, "one"); });
    for (int i = 0; i < 10000 && !g_stopped; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(g_stopped.load());
    note_fork_begins();  // the shim's pthread_atfork handlers (shim_state.cpp)
    pid_t child = fork();
    if (child == 0) {
        // What the shim's child handler does for every connection (fd_table.hpp).
        p.client->forget_other_threads();
        const bool plain = p.client->phase() == Phase::plain;
        const bool why = p.client->stats_line(0, 0).find("forked while the same-host rendezvous") != std::string::npos;
        _exit(plain && why ? 0 : 1);
    }
    REQUIRE(child > 0);
    note_fork();
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    g_let_go = true;
    CHECK(sender.get() == 3);
    CHECK(recv_n(*p.server, 3) == "one");
    // The parent's step finished after a fork: its side goes back to TCP in
    // order, and every round is checked byte for byte.
    for (int i = 0; i < 20; ++i) p.round("r" + std::to_string(i));
    CHECK(p.client->phase() != Phase::upgraded);
}

// The client's kernel calls, counted: a peek of the TCP socket and a poll.
std::atomic<int> g_peeks{0}, g_polls{0};
ssize_t counting_recv(int fd, void* b, size_t n, int flags) {
    if (flags & MSG_PEEK) ++g_peeks;
    return ::recv(fd, b, n, flags);
}
int counting_poll(pollfd* p, nfds_t n, int t) {
    ++g_polls;
    return ::poll(p, n, t);
}
const SocketOps kCounting{counting_recv, ::send, ::recvmsg, ::sendmsg, counting_poll};

TEST_CASE("side channel: a look that finds nothing costs one poll, at most one a millisecond, and still sees a FIN that came without an end-of-stream record") {
    SidePair p({}, true, kCounting);
    for (int i = 0; i < 4; ++i) p.round("q" + std::to_string(i));
    REQUIRE(p.client->phase() == Phase::upgraded);
    char b[16];
    iovec v{b, sizeof b};
    // Past the last drain's look (kTcpLookCycles, about 1 ms). A look first: on
    // a busy machine the last round's reader may have slept, and the doorbell
    // its writer rang then is still news to drain (a peek), not this case.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(p.client->recv(&v, 1, MSG_DONTWAIT) == -1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    g_peeks = 0, g_polls = 0;
    // Nothing there: EAGAIN, and the look took one poll, no peek (fds_have_news).
    CHECK(p.client->recv(&v, 1, MSG_DONTWAIT) == -1);
    CHECK(errno == EAGAIN);
    CHECK(g_peeks.load() == 0);
    CHECK(g_polls.load() == 1);
    // At once again: that look still stands, no system call (look_at_socket_now_and_then).
    CHECK(p.client->recv(&v, 1, MSG_DONTWAIT) == -1);
    CHECK(errno == EAGAIN);
    CHECK(g_polls.load() == 1);
    // The peer's kernel ends the stream without the shim's record (as when it
    // is killed): the poll sees the FIN, the drain takes it, the read says EOF.
    REQUIRE(::shutdown(p.sfd, SHUT_WR) == 0);
    ssize_t r = -1;
    for (int i = 0; i < 1000 && r != 0; ++i) {  // the FIN crosses loopback at once; a busy machine may lag
        r = p.client->recv(&v, 1, MSG_DONTWAIT);
        if (r != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(r == 0);
    CHECK(g_peeks.load() >= 1);
}

TEST_CASE("side channel: both ends start on TCP, switch to the rings, every byte in order") {
    SidePair p;
    CHECK(p.client->phase() == Phase::rv_listen);
    CHECK(p.server->phase() == Phase::rv_pending);
    for (int i = 0; i < 6; ++i) p.round("request-" + std::to_string(i) + std::string(i * 1000, 'x'));
    CHECK(p.client->phase() == Phase::upgraded);
    CHECK(p.server->phase() == Phase::upgraded);
    CHECK(p.client->stats_line(0, 0).find("transport=shm") != std::string::npos);
    // Nothing of ours ever went into the TCP stream: it is empty now.
    char b;
    CHECK(recv(p.cfd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0);
    CHECK(recv(p.sfd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0);
}

TEST_CASE("side channel: a server that never does I/O leaves the client on TCP") {
    SidePair p;
    // The server application reads through a path the shim does not see (stdio).
    REQUIRE(send_str(*p.client, "GET /\n") == 6);
    char buf[16];
    CHECK(read(p.sfd, buf, sizeof buf) == 6);
    REQUIRE(write(p.sfd, "200\n", 4) == 4);
    CHECK(recv_n(*p.client, 4) == "200\n");
    CHECK(p.client->phase() == Phase::plain);
}

TEST_CASE("side channel: a client without one leaves the server to the in-band path") {
    auto [c, s] = tcp_pair([](int) {});
    Config cfg;
    cfg.shm_after_us = 0;  // looks at once (deferred, it would look only after 8 calls)
    Connection server(s, Role::server, false, cfg, kLibc);
    server.start_rendezvous_server();
    REQUIRE(send(c, "plain", 5, 0) == 5);
    CHECK(recv_n(server, 5) == "plain");
    CHECK(server.phase() == Phase::plain);
    close(c), close(s);
}

TEST_CASE("side channel: ring creation failure keeps both on TCP with every byte") {
    Config cfg;
    cfg.fault = "shm-create";
    SidePair p(cfg);
    for (int i = 0; i < 4; ++i) p.round("r" + std::to_string(i));
    CHECK(p.client->phase() == Phase::plain);
    CHECK(p.server->phase() == Phase::plain);
    CHECK(p.client->stats_line(0, 0).find("shm-create") != std::string::npos);
}

TEST_CASE("side channel: a stream in one direction switches mid-flow without loss") {
    SidePair p;
    constexpr size_t kTotal = 8 << 20;
    auto writer = std::async(std::launch::async, [&] {
        std::string chunk(4000, '\0');
        size_t sent = 0;
        while (sent < kTotal) {
            for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>((sent + i) * 131 % 251);
            size_t n = std::min(chunk.size(), kTotal - sent);
            iovec v{chunk.data(), n};
            ssize_t w = p.client->send(&v, 1, MSG_NOSIGNAL);
            if (w <= 0) return false;
            sent += static_cast<size_t>(w);
        }
        return true;
    });
    size_t got = 0;
    bool ok = true;
    char buf[8192];
    while (got < kTotal && ok) {
        iovec v{buf, sizeof buf};
        ssize_t r = p.server->recv(&v, 1, 0);
        if (r <= 0) break;
        for (ssize_t i = 0; i < r; ++i) ok &= buf[i] == static_cast<char>((got + i) * 131 % 251);
        got += static_cast<size_t>(r);
        // The server answers now and then, which moves the rendezvous on.
        if (got % (1 << 20) < sizeof buf) send_str(*p.server, "k");
    }
    CHECK(ok);
    CHECK(got == kTotal);
    CHECK(writer.get());
}

TEST_CASE("side channel: a writer on the ring learns that a reader still on TCP closed (EPIPE, no hang)") {
    Config cfg;
    cfg.ring_bytes = 1 << 16;
    SidePair p(cfg);
    // Step by step, one thread: the client ends up having sent ACCEPT and nothing else.
    REQUIRE(send_str(*p.client, "a") == 1);   // TCP; no OFFER yet
    CHECK(recv_n(*p.server, 1) == "a");       // the server offers, reads over TCP
    REQUIRE(send_str(*p.server, "b") == 1);   // no ACCEPT yet: TCP
    CHECK(recv_n(*p.client, 1) == "b");       // the client accepts the OFFER, reads over TCP
    REQUIRE(p.client->phase() == Phase::rv_accepted);
    REQUIRE(send_str(*p.server, "x") == 1);  // the server upgrades and switches its sends
    REQUIRE(p.server->phase() == Phase::upgraded);
    p.client.reset();  // the client application closes without another call
    close(p.cfd);
    p.cfd = -1;
    p.server->set_timeouts(-1, 10 * 1000 * 1000);  // a hang shows as EAGAIN, not as a stuck test
    std::string chunk(16384, 'w');
    ssize_t r = 0;
    int err = 0;
    for (int i = 0; i < 1000 && r >= 0; ++i) {
        iovec v{chunk.data(), chunk.size()};
        r = p.server->send(&v, 1, MSG_NOSIGNAL);
        err = errno;
    }
    CHECK(r == -1);
    CHECK((err == EPIPE || err == ECONNRESET));
}

TEST_CASE("side channel: a peer that half-closes while still on TCP keeps reading the ring (no false EPIPE)") {
    Config cfg;
    cfg.ring_bytes = 1 << 16;
    cfg.spin_us = 0;  // every wait sleeps: the server meets the FIN with its ring full
    SidePair p(cfg);
    REQUIRE(send_str(*p.client, "a") == 1);
    CHECK(recv_n(*p.server, 1) == "a");
    REQUIRE(send_str(*p.server, "b") == 1);
    CHECK(recv_n(*p.client, 1) == "b");
    REQUIRE(p.client->phase() == Phase::rv_accepted);
    // The client's request ends with a half-close, carried by the kernel (its sends are on TCP).
    REQUIRE(send_str(*p.client, "GET") == 3);
    p.client->shutdown(SHUT_WR);
    REQUIRE(::shutdown(p.cfd, SHUT_WR) == 0);
    constexpr size_t kTotal = 4 << 20;  // 64 rings' worth: the server must wait for the reader
    p.client->set_timeouts(10 * 1000 * 1000, -1);  // a failure shows as EAGAIN, not as a stuck test
    auto srv = std::async(std::launch::async, [&] {
        if (recv_n(*p.server, 3) != "GET") return std::string("no request");
        char b;
        iovec e{&b, 1};
        if (p.server->recv(&e, 1, 0) != 0) return std::string("no EOF after the request");
        std::string chunk(8192, 'r');
        for (size_t sent = 0; sent < kTotal;) {
            iovec v{chunk.data(), chunk.size()};
            ssize_t w = p.server->send(&v, 1, MSG_NOSIGNAL);
            if (w <= 0) return std::string("send failed: ") + strerror(errno);
            sent += static_cast<size_t>(w);
        }
        return std::string("ok");
    });
    size_t got = 0;
    char buf[16384];
    while (got < kTotal) {
        iovec v{buf, sizeof buf};
        ssize_t r = p.client->recv(&v, 1, 0);
        if (r <= 0) break;
        got += static_cast<size_t>(r);
        if (got % (256 << 10) < sizeof buf) usleep(20000);  // a slow reader: the ring fills up
    }
    CHECK(got == kTotal);
    CHECK(srv.get() == "ok");
}

TEST_CASE("side channel: a process past half its fd limit keeps its fds and stays on TCP") {
    rlimit saved{};
    REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
    SidePair p;
    // Fill the table up to well past half of a small limit (the eventfds would land there).
    rlimit low = saved;
    low.rlim_cur = 256;
    std::vector<int> fillers;
    for (int fd = dup(0); fd >= 0 && fd < 200; fd = dup(0)) fillers.push_back(fd);
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
    for (int i = 0; i < 4; ++i) p.round("r" + std::to_string(i));
    setrlimit(RLIMIT_NOFILE, &saved);
    for (int fd : fillers) close(fd);
    CHECK(p.client->phase() == Phase::plain);
    CHECK(p.client->stats_line(0, 0).find("file descriptor limit") != std::string::npos);
    CHECK(p.server->phase() == Phase::plain);
}
