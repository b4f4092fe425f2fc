// The in-band negotiation (HELLO / ACCEPT / DECLINE / READY / ABORT before the
// first application byte): RDMA only since shared memory moved to the side channel.
#include "connection/connection_detail.hpp"

#include <cstring>

#include "base/log.hpp"
#include "rdma/rdma_device.hpp"
#include "rdma/rdma_setup.hpp"
#include "shm/shm_transport.hpp"

namespace rdmasock {

using namespace detail;

// ---------------------------------------------------------------- handshake

handshake::ParseResult Connection::peek_message(bool* eof, bool* empty) {
    uint8_t buf[handshake::kMaxMessage];
    *eof = *empty = false;
    ssize_t n = peek_tcp(buf, sizeof buf);
    if (n == 0) *eof = true;
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) *empty = true;
        else *eof = true;  // the app's own next call reports the error
    }
    if (n <= 0) return {};
    auto r = handshake::parse(buf, static_cast<size_t>(n));
    if (r.status == handshake::Parse::need_more) {
        int64_t now = now_us() / 1000;
        if (need_more_since_ms_ == 0) need_more_since_ms_ = now;
        if (now - need_more_since_ms_ > static_cast<int64_t>(config_.handshake_timeout_ms)) {
            r.status = handshake::Parse::not_handshake;
            r.why = "incomplete handshake message timed out";
        }
    } else {
        need_more_since_ms_ = 0;
    }
    if (r.status == handshake::Parse::not_handshake && !r.why.empty())
        RS_LOG(warn, "fd %d: ignoring malformed handshake (%s); bytes stay application data", fd(), r.why.c_str());
    return r;
}

bool Connection::consume(size_t n) {
    uint8_t buf[handshake::kMaxMessage];
    while (n > 0) {
        ssize_t r = ops_.recv(fd(), buf, std::min(n, sizeof buf), MSG_DONTWAIT);
        if (r <= 0) return false;  // peeked bytes cannot vanish; treat as a broken stream
        n -= static_cast<size_t>(r);
    }
    return true;
}

bool Connection::send_message(const handshake::Message& m) {
    auto bytes = handshake::encode(m);
    size_t sent = 0;
    for (int spins = 0; sent < bytes.size() && spins < 1000; ++spins) {
        ssize_t w = ops_.send(fd(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            sent += static_cast<size_t>(w);
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
        pollfd p{fd(), POLLOUT, 0};
        ops_.poll(&p, 1, 10);
    }
    RS_LOG(debug, "fd %d: sent %s", fd(), handshake::to_string(m.type));
    return sent == bytes.size();
}

bool Connection::send_or_settle(const handshake::Message& m, const char* what) {
    if (send_message(m)) return true;
    // EPIPE: the socket is shut for writing (the application's shutdown in
    // the middle of the handshake, from a signal handler or another thread) or
    // already reset. Nothing more can reach the peer, which reads our FIN (or
    // the reset) where it waits for this message and stays on TCP: so do we,
    // and the application meets the kernel's own state. Otherwise the peer
    // still waits for the message and would parse our next bytes as it.
    const std::string why = std::string("could not send ") + what;
    if (errno == EPIPE) become_plain((why + ": the socket is shut for writing").c_str());
    else become_failed(why.c_str());
    return false;
}

bool Connection::progress_client_offer() {
    pollfd p{fd(), POLLOUT, 0};
    if (ops_.poll(&p, 1, 0) < 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) {
        become_plain("connect failed");
        return true;
    }
    if (!(p.revents & POLLOUT)) return false;  // still connecting
    // Forked since the connect (the perl echo client: one process writes, the
    // other reads): two processes would each run the handshake on one socket.
    if (forked_since_rendezvous()) {
        become_plain("forked before the handshake: two processes may use the socket");
        return true;
    }
    // The server already spoke (a banner, or it wrote and closed): a HELLO now
    // would sit unread in its socket and its close would become a RST that
    // destroys these bytes. A server that writes first stays on TCP anyway.
    uint8_t first;
    if (peek_tcp(&first, 1) > 0) {
        become_plain("server spoke first");
        return true;
    }
    handshake::Message hello;
    hello.type = handshake::Type::hello;
    if (offers_ & handshake::kOfferRdma) {
        // The QP and the rings exist before the HELLO: it carries their addresses.
        std::string err;
        pending_ = rdma_setup::offer(config_, hello.rdma, err);
        if (!pending_) {
            offers_ &= ~handshake::kOfferRdma;
            if (offers_ == 0) {
                become_plain(("no RDMA: " + err).c_str());  // nothing sent: the server sees a plain client
                return true;
            }
            RS_LOG(info, "fd %d: not offering rdma: %s", fd(), err.c_str());
        }
    }
    hello.offers = offers_;
    hello.uid = static_cast<uint32_t>(geteuid());
    hello.ring_bytes = config_.ring_bytes;
    hello.boot_id = handshake::local_boot_id();
    if (config_.fault == "client-hello") {
        become_failed("could not send HELLO");
        return true;
    }
    if (!send_or_settle(hello, "HELLO")) return true;
    enter(Phase::offered);
    return true;
}

bool Connection::progress_client_reply() {
    bool eof, empty;
    auto r = peek_message(&eof, &empty);
    if (empty || r.status == handshake::Parse::need_more) return false;
    if (eof) {
        become_plain("server closed during the handshake");
        return true;
    }
    if (r.status == handshake::Parse::not_handshake) {
        become_plain("server does not speak the protocol");
        return true;
    }
    const auto& m = r.message;
    if (m.type == handshake::Type::decline) {
        consume(r.consumed);
        become_plain(handshake::to_string(m.reason));
        return true;
    }
    if (m.type != handshake::Type::accept || m.version != handshake::kVersion) {
        consume(r.consumed);
        become_failed("unexpected reply to HELLO");
        return true;
    }
    consume(r.consumed);
    std::string err;
    std::unique_ptr<Transport> t;
    // Shared memory is never accepted in band (only the side channel proves that
    // the peer holds this very connection): an in-band shm ACCEPT is refused.
    if (m.transport == handshake::kOfferRdma && pending_) {
        if (rdma_setup::complete(config_, *pending_, m.rdma, err)) t = std::move(pending_);
    } else {
        err = "the server accepted a transport we did not offer";
    }
    pending_.reset();
    // The application shut a direction meanwhile (Connection::shutdown): the
    // connection ends on TCP, where the kernel then keeps what it shut.
    if (t && (shut_rd_.load() || shut_wr_.load())) {
        t.reset();
        err = "the application shut the connection down during the handshake";
    }
    handshake::Message reply;
    if (!t) {
        reply.type = handshake::Type::abort;
        reply.reason = handshake::Reason::setup_failed;
        if (send_or_settle(reply, "ABORT")) become_plain(("could not set up the accepted transport: " + err).c_str());
        return true;
    }
    reply.type = handshake::Type::ready;
    if (!send_or_settle(reply, "READY")) return true;
    upgrade(std::move(t));
    return true;
}

bool Connection::progress_server_hello(bool app_wants_to_write) {
    if (in_band_needs_rdma_) {
        // No RDMA here: nothing can be negotiated in band (a client on this host
        // offers RDMA only where its device opens, and shared memory goes over the
        // side channel), so no byte is read as a HELLO.
        in_band_needs_rdma_ = false;
        std::string why;
        // Fault inband-anyway: the in-band parser under test on a host without RDMA.
        const bool anyway = config_.fault.find("inband-anyway") != std::string::npos;
        if (!anyway && !RdmaDevice::host_may_have_rdma(why)) {
            // A client on this host that found no side channel: say that first.
            if (!side_channel_why_.empty()) why = "same host: " + side_channel_why_ + "; in band: " + why;
            become_plain(why.c_str());
            return true;
        }
    }
    bool eof, empty;
    auto r = peek_message(&eof, &empty);
    if (empty) {
        if (!app_wants_to_write) return false;
        // The app speaks first: its bytes go out on TCP now; a shimmed client
        // will see them instead of a reply and stay on TCP too.
        enter(Phase::strip_hello);
        return true;
    }
    if (r.status == handshake::Parse::need_more) return false;
    if (eof || r.status == handshake::Parse::not_handshake || r.message.type != handshake::Type::hello) {
        become_plain(eof ? "client closed before sending" : "client does not speak the protocol");
        return true;
    }
    consume(r.consumed);
    // The client's FIN is behind its HELLO: it shut its end, or closed, before a
    // reply. A reply could then land on a socket shut both ways or closed, whose
    // kernel answers it with a RST that TCP would never send; and a client that
    // can no longer write can send no READY. No reply: TCP from here on, and
    // the client, which reads our bytes or our FIN instead, stays there too.
    pollfd fin{fd(), POLLRDHUP, 0};
    if (ops_.poll(&fin, 1, 0) == 1 && (fin.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        become_plain("client shut its end after its HELLO");
        return true;
    }
    const auto& m = r.message;
    handshake::Message reply;
    reply.type = handshake::Type::decline;
    if (m.version != handshake::kVersion) reply.reason = handshake::Reason::bad_version;
    else if (config_.transport == TransportChoice::tcp || tcp_only_.load()) reply.reason = handshake::Reason::disabled;
    else {
        // Same host and same user: shared memory. Otherwise RDMA, if offered.
        // Shared memory is never negotiated in band any more: only the side channel
        // proves that the peer holds this very connection (shm_rendezvous.hpp). An
        // in-band shm offer is declined like any transport we do not have.
        const bool want_rdma = (m.offers & handshake::kOfferRdma) && config_.transport != TransportChoice::shm;
        reply.reason = handshake::Reason::no_transport;
        if (config_.fault == "server-setup") reply.reason = handshake::Reason::setup_failed;
        else if (want_rdma) accept_rdma(m, reply);
    }
    if (!send_or_settle(reply, "the reply to HELLO")) return true;
    if (reply.type == handshake::Type::decline) become_plain(handshake::to_string(reply.reason));
    else enter(Phase::accepted);
    return true;
}

void Connection::accept_rdma(const handshake::Message& hello, handshake::Message& reply) {
    std::string err;
    auto t = rdma_setup::accept(config_, hello.rdma, reply.rdma, err);
    if (!t) {
        RS_LOG(warn, "fd %d: declining rdma: %s", fd(), err.c_str());
        reply.reason = handshake::Reason::setup_failed;
        return;
    }
    reply.type = handshake::Type::accept;
    reply.transport = handshake::kOfferRdma;
    reply.ring_bytes = config_.ring_bytes;
    pending_ = std::move(t);
}

bool Connection::progress_server_ready() {
    bool eof, empty;
    auto r = peek_message(&eof, &empty);
    if (empty || r.status == handshake::Parse::need_more) return false;
    if (eof) {
        become_plain("client closed during the handshake");
        return true;
    }
    if (r.status != handshake::Parse::complete || r.message.version != handshake::kVersion ||
        (r.message.type != handshake::Type::ready && r.message.type != handshake::Type::abort)) {
        become_failed("expected READY or ABORT after ACCEPT");
        return true;
    }
    consume(r.consumed);
    if (r.message.type == handshake::Type::abort) {
        become_plain("client could not set up the transport");
        return true;
    }
    pending_->on_peer_ready();
    upgrade(std::move(pending_));
    return true;
}

bool Connection::progress_strip_hello() {
    bool eof, empty;
    auto r = peek_message(&eof, &empty);
    if (empty || r.status == handshake::Parse::need_more) return false;
    if (r.status == handshake::Parse::complete && r.message.type == handshake::Type::hello) consume(r.consumed);
    become_plain("application spoke first");
    return true;
}

}  // namespace rdmasock
