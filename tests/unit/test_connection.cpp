// Negotiation and data paths of two Connections over a real loopback TCP
// connection, driven directly (no LD_PRELOAD): the shim's logic, testable.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "connection/connection.hpp"
#include "connection_io.hpp"
#include "loopback.hpp"

using namespace rdmasock;
using rdmasock::test::recv_n;
using rdmasock::test::send_str;

namespace {

const SocketOps kLibc{::recv, ::send, ::recvmsg, ::sendmsg, ::poll};

struct TcpPair {
    int client = -1, server = -1;
    TcpPair() {
        sockaddr_in a;
        int l = rdmasock::test::loopback_listener(a);
        client = socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        server = accept(l, nullptr, nullptr);
        close(l);
    }
    ~TcpPair() {
        close(client);
        close(server);
    }
};


// A HELLO offering shared memory in band (which a server always declines), encoded.
std::vector<uint8_t> shm_hello_bytes() {
    handshake::Message h;
    h.type = handshake::Type::hello;
    h.offers = handshake::kOfferShm;
    h.uid = geteuid();
    h.ring_bytes = 1 << 16;
    h.boot_id = handshake::local_boot_id();
    return handshake::encode(h);
}

// Client sends a request, server answers: the first I/O on each side runs the handshake.
void exchange(Connection& client, Connection& server) {
    auto srv = std::async(std::launch::async, [&] {
        std::string req = recv_n(server, 5);
        send_str(server, "pong:" + req);
        return req;
    });
    REQUIRE(send_str(client, "ping!") == 5);
    CHECK(recv_n(client, 10) == "pong:ping!");
    CHECK(srv.get() == "ping!");
}

}  // namespace

TEST_CASE("an in-band shm offer is declined: shared memory only over the side channel") {
    // Only the side channel proves that a peer holds this very connection
    // (test_side_channel.cpp); a HELLO in the stream proves nothing.
    TcpPair p;
    Config cfg;
    Connection client(p.client, Role::client, false, cfg, kLibc);
    Connection server(p.server, Role::server, false, cfg, kLibc);
    client.set_offer(handshake::kOfferShm);
    exchange(client, server);
    CHECK(client.phase() == Phase::plain);
    CHECK(server.phase() == Phase::plain);
    CHECK_THAT(client.stats_line(0, 0), Catch::Contains("transport=tcp") && Catch::Contains("no common transport"));
}

TEST_CASE("a server configured for tcp declines and both stay on TCP") {
    TcpPair p;
    Config cfg, tcp_only;
    tcp_only.transport = TransportChoice::tcp;
    Connection client(p.client, Role::client, false, cfg, kLibc);
    Connection server(p.server, Role::server, false, tcp_only, kLibc);
    client.set_offer(handshake::kOfferShm);
    exchange(client, server);
    CHECK(client.phase() == Phase::plain);
    CHECK(server.phase() == Phase::plain);
    CHECK_THAT(client.stats_line(0, 0), Catch::Contains("disabled by configuration"));
}

TEST_CASE("a client that does not offer leaves the server on TCP with its bytes intact") {
    TcpPair p;
    Config cfg;
    Connection server(p.server, Role::server, false, cfg, kLibc);
    REQUIRE(::send(p.client, "plain", 5, 0) == 5);
    CHECK(recv_n(server, 5) == "plain");
    CHECK(server.phase() == Phase::plain);
}

TEST_CASE("a server that speaks first keeps both ends on TCP, HELLO stripped") {
    TcpPair p;
    Config cfg;
    Connection client(p.client, Role::client, false, cfg, kLibc);
    Connection server(p.server, Role::server, false, cfg, kLibc);
    client.set_offer(handshake::kOfferShm);
    REQUIRE(send_str(server, "220 ready\r\n") == 11);  // before any HELLO arrived
    CHECK(recv_n(client, 11) == "220 ready\r\n");       // the client sent HELLO, got a banner
    CHECK(client.phase() == Phase::plain);
    REQUIRE(send_str(client, "QUIT") == 4);
    CHECK(recv_n(server, 4) == "QUIT");  // the HELLO in front of it was dropped
    CHECK(server.phase() == Phase::plain);
}


TEST_CASE("a truncated HELLO becomes application data after the handshake timeout") {
    TcpPair p;
    Config cfg;
    cfg.handshake_timeout_ms = 100;
    Connection server(p.server, Role::server, false, cfg, kLibc);
    REQUIRE(::send(p.client, "\xF7RDM", 4, 0) == 4);
    CHECK(recv_n(server, 4) == "\xF7RDM");
    CHECK(server.phase() == Phase::plain);
}

TEST_CASE("a nonblocking server reports EAGAIN while waiting for the first bytes") {
    TcpPair p;
    Config cfg;
    Connection server(p.server, Role::server, true, cfg, kLibc);
    char b[4];
    iovec v{b, 4};
    errno = 0;
    CHECK(server.recv(&v, 1, 0) == -1);
    CHECK(errno == EAGAIN);
    CHECK(server.phase() == Phase::undecided);
}

TEST_CASE("an in-band shm HELLO gets a DECLINE and the bytes behind it stay application data") {
    TcpPair p;
    Config cfg;
    Connection server(p.server, Role::server, false, cfg, kLibc);
    auto bytes = shm_hello_bytes();
    const char after[] = "bytes behind the HELLO";
    bytes.insert(bytes.end(), after, after + sizeof after);
    REQUIRE(::send(p.client, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
    CHECK(recv_n(server, sizeof after) == std::string(after, sizeof after));
    CHECK(server.phase() == Phase::plain);
    // The client got a DECLINE, never an ACCEPT naming a segment.
    uint8_t reply[handshake::kMaxMessage];
    ssize_t n = ::recv(p.client, reply, sizeof reply, 0);
    REQUIRE(n > 0);
    auto r = handshake::parse(reply, static_cast<size_t>(n));
    REQUIRE(r.status == handshake::Parse::complete);
    CHECK(r.message.type == handshake::Type::decline);
}

// This machine has no RDMA device (nor does CI): the real device scan finds
// nothing, and the RDMA half of the negotiation must fall back without a byte lost.
TEST_CASE("a client offering rdma without a device sends no HELLO and stays on TCP") {
    TcpPair p;
    Config cfg, faulty;
    faulty.fault = "rdma-no-device";  // also true without the fault on a machine without RDMA
    Connection client(p.client, Role::client, false, faulty, kLibc);
    Connection server(p.server, Role::server, false, cfg, kLibc);
    client.set_offer(handshake::kOfferRdma);
    exchange(client, server);
    CHECK(client.phase() == Phase::plain);
    CHECK(server.phase() == Phase::plain);
    CHECK_THAT(client.stats_line(0, 0), Catch::Contains("reason=no RDMA: no RDMA device found"));
    CHECK_THAT(server.stats_line(0, 0), Catch::Contains("reason=client does not speak the protocol"));
}

TEST_CASE("a server without a device declines an rdma HELLO and the client's bytes follow on TCP") {
    TcpPair p;
    Config cfg;
    cfg.fault = "rdma-no-device";
    Connection server(p.server, Role::server, false, cfg, kLibc);
    // A HELLO offering rdma, with well-formed parameters (from a device we do not have).
    handshake::Message hello;
    hello.type = handshake::Type::hello;
    hello.offers = handshake::kOfferRdma;
    hello.uid = 12345;
    hello.ring_bytes = 1 << 16;
    hello.rdma.assign(handshake::kRdmaBlobBytes, 0);
    const uint8_t magic[4] = {'R', 'D', 'P', '1'};
    std::memcpy(hello.rdma.data(), magic, 4);
    hello.rdma[20] = 17;            // qpn
    hello.rdma[28] = 3;             // mtu 1024
    hello.rdma[44 + 2] = 1;         // ring_bytes 65536
    auto bytes = handshake::encode(hello);
    bytes.insert(bytes.end(), {'d', 'a', 't', 'a'});
    REQUIRE(::send(p.client, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
    CHECK(recv_n(server, 4) == "data");
    CHECK(server.phase() == Phase::plain);
    CHECK_THAT(server.stats_line(0, 0), Catch::Contains("transport setup failed"));
    uint8_t reply[64];
    ssize_t n = ::recv(p.client, reply, sizeof reply, 0);
    auto r = handshake::parse(reply, static_cast<size_t>(n));
    REQUIRE(r.status == handshake::Parse::complete);
    CHECK(r.message.type == handshake::Type::decline);
    CHECK(r.message.reason == handshake::Reason::setup_failed);
}

TEST_CASE("a server that allows only rdma declines a shm-only HELLO") {
    TcpPair p;
    Config cfg, rdma_only;
    rdma_only.transport = TransportChoice::rdma;
    Connection client(p.client, Role::client, false, cfg, kLibc);
    Connection server(p.server, Role::server, false, rdma_only, kLibc);
    client.set_offer(handshake::kOfferShm);
    exchange(client, server);
    CHECK(client.phase() == Phase::plain);
    CHECK(server.phase() == Phase::plain);
    CHECK_THAT(client.stats_line(0, 0), Catch::Contains("no common transport"));
}

namespace {

// The client's HELLO is out and the reply owed (Phase::offered): a nonblocking
// look sends it. The raw server side reads it.
void client_offered(TcpPair& p, Connection& client) {
    client.set_offer(handshake::kOfferShm);
    char b[8];
    iovec v{b, sizeof b};
    REQUIRE(client.recv(&v, 1, MSG_DONTWAIT) == -1);
    REQUIRE(client.phase() == Phase::offered);
    uint8_t hello[handshake::kMaxMessage];
    ssize_t n = ::recv(p.server, hello, sizeof hello, 0);
    REQUIRE(handshake::parse(hello, static_cast<size_t>(n)).message.type == handshake::Type::hello);
}

void send_decline(int fd) {
    handshake::Message m;
    m.type = handshake::Type::decline;
    m.reason = handshake::Reason::no_transport;
    auto bytes = handshake::encode(m);
    REQUIRE(::send(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
}

// What the application's shutdown does through the interposer.
void app_shutdown(Connection& c, int fd, int how) {
    bool kernel_carries = false;
    int r = c.shutdown(how, &kernel_carries);
    if (kernel_carries) r = ::shutdown(fd, how);
    REQUIRE(r == 0);
}

bool lands(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 10000) == 1;
}

}  // namespace

TEST_CASE("shut both ways while the reply to HELLO is owed: the reply draws no reset; reads say 0, as TCP's") {
    // A kernel socket shut for reading and writing resets the connection when
    // bytes land (tcp_rcv_state_process): the reply, which TCP never sends,
    // must not find it so (seen as ECONNRESET on the VM, the handler's shutdown
    // racing a slow ACCEPT).
    TcpPair p, tcp;
    Config cfg;
    Connection client(p.client, Role::client, false, cfg, kLibc);
    client_offered(p, client);
    app_shutdown(client, p.client, SHUT_RDWR);
    ::shutdown(tcp.client, SHUT_RDWR);  // the same over plain TCP, for its poll
    const short asked = POLLIN | POLLOUT | POLLRDHUP;
    pollfd k{tcp.client, asked, 0};
    REQUIRE(::poll(&k, 1, 0) == 1);
    short kernel_events = 0;
    CHECK(client.ready_events(asked, &kernel_events) == k.revents);
    char b[8];
    iovec v{b, sizeof b};
    CHECK(client.recv(&v, 1, 0) == 0);  // at once, as TCP's, the reply still owed
    CHECK(::recv(p.server, b, sizeof b, 0) == 0);  // our FIN went out at once
    send_decline(p.server);
    REQUIRE(lands(p.client));
    int err = -1;
    socklen_t len = sizeof err;
    REQUIRE(getsockopt(p.client, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
    CHECK(err == 0);  // no reset
    CHECK(client.recv(&v, 1, 0) == 0);
    CHECK(client.phase() == Phase::plain);  // the reply read on the way
    CHECK(client.ready_events(asked, &kernel_events) == 0);
    CHECK(kernel_events == asked);          // plain: the kernel's poll, shut both ways now
    pollfd now{p.client, asked, 0};
    REQUIRE(::poll(&now, 1, 0) == 1);
    CHECK(now.revents == k.revents);
    iovec w{b, 1};
    errno = 0;
    CHECK(client.send(&w, 1, MSG_NOSIGNAL) == -1);
    CHECK(errno == EPIPE);
}

TEST_CASE("shut for reading while the reply to HELLO is owed: reads say 0, the handshake ends on TCP, writes go on") {
    TcpPair p;
    Config cfg;
    Connection client(p.client, Role::client, false, cfg, kLibc);
    client_offered(p, client);
    app_shutdown(client, p.client, SHUT_RD);
    char b[8];
    iovec v{b, sizeof b};
    CHECK(client.recv(&v, 1, 0) == 0);
    send_decline(p.server);
    REQUIRE(lands(p.client));
    CHECK(client.recv(&v, 1, 0) == 0);
    CHECK(client.phase() == Phase::plain);
    CHECK(send_str(client, "late") == 4);  // SHUT_RD leaves the writing side open
    char got[4];
    CHECK(::recv(p.server, got, 4, MSG_WAITALL) == 4);
}

TEST_CASE("closed with the reply to HELLO landed and unread: a FIN, not a reset") {
    TcpPair p;
    Config cfg;
    Connection client(p.client, Role::client, false, cfg, kLibc);
    client_offered(p, client);
    send_decline(p.server);
    REQUIRE(lands(p.client));
    client.close_last_reference();
    ::close(p.client);
    p.client = -1;
    char b[8];
    CHECK(::recv(p.server, b, sizeof b, 0) == 0);  // EOF, not ECONNRESET
}

TEST_CASE("a client that shut its end right after its HELLO gets no reply: the server reads EOF, as over TCP") {
    // A reply could land on a client socket shut both ways or closed: a RST,
    // which TCP would never send. A client that cannot write sends no READY anyway.
    TcpPair p;
    Config cfg;
    Connection server(p.server, Role::server, false, cfg, kLibc);
    auto bytes = shm_hello_bytes();
    REQUIRE(::send(p.client, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
    REQUIRE(::shutdown(p.client, SHUT_WR) == 0);
    char b[8];
    iovec v{b, sizeof b};
    CHECK(server.recv(&v, 1, 0) == 0);
    CHECK(server.phase() == Phase::plain);
    CHECK_THAT(server.stats_line(0, 0), Catch::Contains("client shut its end after its HELLO"));
    CHECK(::recv(p.client, b, sizeof b, MSG_DONTWAIT) == -1);  // no reply
    CHECK(errno == EAGAIN);
}
