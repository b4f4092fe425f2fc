// libFuzzer target: the server side of the in-band negotiation (Connection,
// Role::server, nonblocking) fed an arbitrary byte stream that arrives in
// arbitrary pieces, interleaved with the application's recv/send/poll calls.
//
// The kernel socket is a fake (SocketOps): what "arrived" from the client, a
// read position, EOF, and everything the server sent. At the end the stream the
// application received is compared with a model of docs/protocol.md /
// DESIGN.md "Negotiation, fallback, safety" computed from the whole arrived
// stream S (the handshake parser is prefix-stable, so arrival timing does not
// change any decision, except "the application wrote before any byte came",
// which the harness records):
//  * plain (fallback): the application gets S minus exactly the handshake
//    messages the server consumed (none for application data or a malformed
//    HELLO; the HELLO when declined or stripped; HELLO + ABORT after an ACCEPT),
//    in order, nothing lost, duplicated or reordered; peeks agree with reads;
//  * upgraded / failed / still negotiating: no TCP byte ever reaches the app;
//  * the server's TCP output is exactly [its reply] + the app's plain sends;
//    a stripped connection sends no handshake message at all;
//  * the reply matches the HELLO (DECLINE reasons, ACCEPT ring size valid and
//    no larger than asked or configured);
//  * no shared-memory segment outlives the Connection.
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/config.hpp"
#include "connection/connection.hpp"
#include "negotiation/handshake.hpp"
#include "base/log.hpp"
#include "ring/ring_format.hpp"

using namespace rdmasock;
namespace hs = rdmasock::handshake;

namespace {

[[noreturn]] void fail_at(const char* what, int line) {
    std::fprintf(stderr, "fuzz_connection: property violated (line %d): %s\n", line, what);
    std::abort();
}
#define CHECK(cond)                            \
    do {                                       \
        if (!(cond)) fail_at(#cond, __LINE__); \
    } while (0)

// ------------------------------------------------------------ the fake kernel

struct Kernel {
    std::vector<uint8_t> in;  // bytes that arrived from the client
    size_t rpos = 0;          // read position of the socket
    bool eof = false;
    std::vector<uint8_t> out;  // bytes the server sent
} *g;

size_t copy_in(const iovec* iov, size_t cnt, int flags) {
    size_t avail = g->in.size() - g->rpos, done = 0;
    for (size_t i = 0; i < cnt && done < avail; ++i) {
        size_t k = std::min(iov[i].iov_len, avail - done);
        if (k) std::memcpy(iov[i].iov_base, g->in.data() + g->rpos + done, k);
        done += k;
    }
    if (!(flags & MSG_PEEK)) g->rpos += done;
    return done;
}

ssize_t k_recvmsg(int, msghdr* m, int flags) {
    size_t want = 0;
    for (size_t i = 0; i < m->msg_iovlen; ++i) want += m->msg_iov[i].iov_len;
    if (want == 0) return 0;
    if (g->rpos == g->in.size()) {
        if (g->eof) return 0;
        errno = EAGAIN;
        return -1;
    }
    return static_cast<ssize_t>(copy_in(m->msg_iov, m->msg_iovlen, flags));
}
ssize_t k_recv(int fd, void* buf, size_t n, int flags) {
    iovec v{buf, n};
    msghdr m{};
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    return k_recvmsg(fd, &m, flags);
}
ssize_t k_sendmsg(int, const msghdr* m, int) {
    size_t n = 0;
    for (size_t i = 0; i < m->msg_iovlen; ++i) {
        auto* p = static_cast<const uint8_t*>(m->msg_iov[i].iov_base);
        g->out.insert(g->out.end(), p, p + m->msg_iov[i].iov_len);
        n += m->msg_iov[i].iov_len;
    }
    return static_cast<ssize_t>(n);
}
ssize_t k_send(int fd, const void* buf, size_t n, int flags) {
    iovec v{const_cast<void*>(buf), n};
    msghdr m{};
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    return k_sendmsg(fd, &m, flags);
}
int k_poll(pollfd* p, nfds_t n, int) {
    int ready = 0;
    for (nfds_t i = 0; i < n; ++i) {
        p[i].revents = 0;
        if ((p[i].events & POLLIN) && (g->rpos < g->in.size() || g->eof)) p[i].revents |= POLLIN;
        if (p[i].events & POLLOUT) p[i].revents |= POLLOUT;
        ready += p[i].revents != 0;
    }
    return ready;
}
const SocketOps kOps{k_recv, k_send, k_recvmsg, k_sendmsg, k_poll};

// ------------------------------------------------------------ input

struct Input {
    const uint8_t* p;
    size_t left;
    uint64_t take(int n) {
        uint64_t v = 0;
        for (int i = 0; i < n && left > 0; ++i, ++p, --left) v |= static_cast<uint64_t>(*p) << (8 * i);
        return v;
    }
    uint8_t u8() { return static_cast<uint8_t>(take(1)); }
    uint16_t u16() { return static_cast<uint16_t>(take(2)); }
};

hs::Message local_hello(uint64_t ring) {
    hs::Message m;
    m.type = hs::Type::hello;
    m.offers = hs::kOfferShm;
    m.uid = static_cast<uint32_t>(geteuid());
    m.ring_bytes = ring;
    m.boot_id = hs::local_boot_id();
    return m;
}

std::vector<uint8_t> canned(uint8_t sel, Input& in) {
    hs::Message m = local_hello(uint64_t{1024} << (in.u8() % 12));
    switch (sel % 12) {
        case 0: break;
        case 1: m.ring_bytes = in.take(8); break;
        case 2: m = {}, m.type = hs::Type::ready; break;
        case 3: m = {}, m.type = hs::Type::abort, m.reason = hs::Reason::setup_failed; break;
        case 4: m.version = static_cast<uint8_t>(2 + in.u8() % 3); break;
        case 5: m.uid += 1; break;
        case 6: m.boot_id[in.u8() % 16] ^= 1; break;
        case 7: m.offers = in.u8() & 2; break;
        case 8: m = {}, m.type = hs::Type::decline, m.reason = hs::Reason::disabled; break;
        case 9: m = {}, m.type = hs::Type::accept, m.transport = 1, m.ring_bytes = 4096, m.name = "/rdmasock-x"; break;
        case 10: {  // a prefix of a valid HELLO
            auto b = hs::encode(m);
            b.resize(in.u8() % b.size());
            return b;
        }
        default: m = {}, m.type = hs::Type::ready, m.version = 2; break;
    }
    return hs::encode(m);
}

// ------------------------------------------------------------ the model

struct Expect {
    enum Final { stuck, plain, upgraded, failed } final;
    size_t k = 0;            // the app's stream is S[k:] (plain)
    bool reply = false;      // the server sends a handshake reply
    hs::Type reply_type = hs::Type::decline;
    hs::Reason reason = hs::Reason::none;
    uint64_t asked_ring = 0;
};

Expect model(const std::vector<uint8_t>& s, bool eof, bool strip, const Config& cfg) {
    Expect e;
    static const uint8_t none = 0;
    auto m1 = hs::parse(s.empty() ? &none : s.data(), s.size());  // (parse needs a pointer even for 0 bytes)
    if (strip) {
        // The app spoke first: a HELLO is dropped once complete; anything else is data.
        if (s.empty()) return e.final = eof ? Expect::plain : Expect::stuck, e;
        if (m1.status == hs::Parse::need_more) return e.final = Expect::stuck, e;
        e.final = Expect::plain;
        if (m1.status == hs::Parse::complete && m1.message.type == hs::Type::hello) e.k = m1.consumed;
        return e;
    }
    if (s.empty()) return e.final = eof ? Expect::plain : Expect::stuck, e;
    if (m1.status == hs::Parse::need_more) return e.final = Expect::stuck, e;
    if (m1.status == hs::Parse::not_handshake || m1.message.type != hs::Type::hello) return e.final = Expect::plain, e;
    const hs::Message& h = m1.message;
    e.reply = true;
    e.k = m1.consumed;
    e.asked_ring = h.ring_bytes;
    if (h.version != hs::kVersion) e.reason = hs::Reason::bad_version;
    else if (cfg.transport == TransportChoice::tcp) e.reason = hs::Reason::disabled;
    // Shared memory is never negotiated in band (only over the side channel,
    // docs/protocol.md), and this harness's server has no RDMA: every valid
    // HELLO is declined. The ACCEPT half of the model below stays for RDMA.
    // An RDMA offer is tried (accept_rdma) and fails: the harness has no device.
    else if ((h.offers & hs::kOfferRdma) && cfg.transport != TransportChoice::shm) e.reason = hs::Reason::setup_failed;
    else e.reason = hs::Reason::no_transport;
    if (e.reason != hs::Reason::none) return e.final = Expect::plain, e;
    e.reply_type = hs::Type::accept;
    auto m2 = hs::parse(s.data() + m1.consumed, s.size() - m1.consumed);
    if (s.size() == m1.consumed) return e.final = eof ? Expect::plain : Expect::stuck, e;
    if (m2.status == hs::Parse::need_more) return e.final = Expect::stuck, e;
    bool ok_version = m2.message.version == hs::kVersion;  // another version resets (bug 5)
    if (m2.status == hs::Parse::complete && ok_version && m2.message.type == hs::Type::abort) {
        e.k += m2.consumed;
        return e.final = Expect::plain, e;
    }
    if (m2.status == hs::Parse::complete && ok_version && m2.message.type == hs::Type::ready)
        return e.final = Expect::upgraded, e;
    return e.final = Expect::failed, e;
}

bool segments_of_this_process_exist() {
    std::string prefix = "rdmasock-" + std::to_string(getpid()) + "-";
    DIR* d = opendir("/dev/shm");
    if (!d) return false;
    bool found = false;
    while (dirent* ent = readdir(d))
        if (std::strncmp(ent->d_name, prefix.c_str(), prefix.size()) == 0) found = true;
    closedir(d);
    return found;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static Config cfg = [] {
        Config c;
        c.ring_bytes = 4096;
        c.handshake_timeout_ms = 600000;  // timing must not matter within one run
        c.spin_us = 0;
        set_log_level(LogLevel::off);
        return c;
    }();
    Kernel kernel;
    g = &kernel;
    Input in{data, size};
    std::vector<uint8_t> app_in;   // what recv() delivered
    std::vector<uint8_t> app_out;  // what the app sent while the connection was plain / stripping
    bool strip = false, app_sent_any = false, saw_reset = false;
    bool accept_seen_while_alive = false;
    {
        Connection c(1 << 30, Role::server, true, cfg, kOps);
        while (in.left > 0) {
            switch (in.u8() % 8) {
                case 0: {  // raw bytes arrive
                    if (kernel.eof) break;
                    size_t n = 1 + in.u8() % 64;
                    for (size_t i = 0; i < n && in.left; ++i) kernel.in.push_back(in.u8());
                    break;
                }
                case 1: {  // a canned handshake message (or prefix) arrives
                    if (kernel.eof) break;
                    auto b = canned(in.u8(), in);
                    kernel.in.insert(kernel.in.end(), b.begin(), b.end());
                    break;
                }
                case 2:
                case 3: {  // app recv (or peek)
                    const bool peek = in.u8() & 1;
                    std::vector<uint8_t> buf(1 + in.u16() % 2048);
                    iovec v{buf.data(), buf.size()};
                    ssize_t r = c.recv(&v, 1, peek ? MSG_PEEK : 0);
                    if (r < 0) {
                        CHECK(errno == EAGAIN || errno == ECONNRESET);
                        if (errno == ECONNRESET) saw_reset = true;
                    } else if (r > 0) {
                        if (peek) {
                            // a peek shows what the next read will return
                            std::vector<uint8_t> again(static_cast<size_t>(r));
                            iovec v2{again.data(), again.size()};
                            CHECK(c.recv(&v2, 1, MSG_PEEK) == r);
                            CHECK(std::memcmp(again.data(), buf.data(), static_cast<size_t>(r)) == 0);
                        }
                        if (!peek) app_in.insert(app_in.end(), buf.begin(), buf.begin() + r);
                        else {
                            // check the peek against the model later: remember it as expected next bytes
                            std::vector<uint8_t> next(static_cast<size_t>(r));
                            iovec v3{next.data(), next.size()};
                            ssize_t r3 = c.recv(&v3, 1, 0);  // consume what was peeked
                            CHECK(r3 == r && std::memcmp(next.data(), buf.data(), static_cast<size_t>(r)) == 0);
                            app_in.insert(app_in.end(), next.begin(), next.end());
                        }
                    }
                    break;
                }
                case 4: {  // app send
                    uint8_t msg[64];
                    size_t n = 1 + in.u8() % 64;
                    for (size_t i = 0; i < n; ++i) msg[i] = static_cast<uint8_t>('a' + (app_out.size() + i) % 26);
                    if (!app_sent_any && c.phase() == Phase::undecided && kernel.in.size() == kernel.rpos) strip = true;
                    app_sent_any = true;
                    iovec v{msg, n};
                    Phase before = c.phase();
                    ssize_t r = c.send(&v, 1, MSG_NOSIGNAL);
                    Phase after = c.phase();
                    if (r > 0 && (after == Phase::plain || after == Phase::strip_hello))
                        app_out.insert(app_out.end(), msg, msg + r);
                    else if (r < 0) CHECK(errno == EAGAIN || errno == ECONNRESET || errno == EPIPE);
                    (void)before;
                    break;
                }
                case 5:  // EOF arrives
                    kernel.eof = true;
                    break;
                case 6: {
                    short kev = 0;
                    (void)c.ready_events(POLLIN | POLLOUT, &kev);
                    break;
                }
                case 7:
                    if (c.phase() == Phase::accepted) accept_seen_while_alive = true;
                    break;
            }
        }
        // The end: EOF, then drain what the app can still get.
        kernel.eof = true;
        for (int i = 0; i < 64; ++i) {
            std::vector<uint8_t> buf(4096);
            iovec v{buf.data(), buf.size()};
            ssize_t r = c.recv(&v, 1, 0);
            if (r <= 0) {
                if (r < 0 && errno == ECONNRESET) saw_reset = true;
                break;
            }
            app_in.insert(app_in.end(), buf.begin(), buf.begin() + r);
        }
        const Phase ph = c.phase();
        const Expect e = model(kernel.in, true, strip, cfg);
        if (std::getenv("FUZZ_TRACE"))  // which paths a corpus reaches: FUZZ_TRACE=1 <target> -runs=0 DIR
            std::fprintf(stderr, "trace: phase=%s strip=%d reply=%d type=%d in=%zu app_in=%zu\n", to_string(ph), strip,
                         e.reply, static_cast<int>(e.reply_type), kernel.in.size(), app_in.size());
        switch (e.final) {
            case Expect::plain:
                CHECK(ph == Phase::plain);
                CHECK(app_in.size() == kernel.in.size() - e.k);
                CHECK(std::equal(app_in.begin(), app_in.end(), kernel.in.begin() + static_cast<long>(e.k)));
                break;
            case Expect::upgraded: CHECK(ph == Phase::upgraded); CHECK(app_in.empty()); break;
            case Expect::failed: CHECK(ph == Phase::failed); CHECK(app_in.empty()); break;
            case Expect::stuck:
                CHECK(ph == Phase::undecided || ph == Phase::accepted || ph == Phase::strip_hello);
                CHECK(app_in.empty());
                break;
        }
        // The server's TCP output: [reply] + the app's plain bytes.
        size_t off = 0;
        if (e.reply && !strip) {
            CHECK(!kernel.out.empty());
            auto r = hs::parse(kernel.out.data(), kernel.out.size());
            CHECK(r.status == hs::Parse::complete);
            CHECK(r.message.type == e.reply_type);
            if (e.reply_type == hs::Type::decline) CHECK(r.message.reason == e.reason);
            else {
                const uint64_t ring = r.message.ring_bytes;
                CHECK(ring::valid_capacity(ring) && ring <= cfg.ring_bytes);
                if (ring::valid_capacity(e.asked_ring)) CHECK(ring <= e.asked_ring);
                CHECK(r.message.transport == hs::kOfferShm);
            }
            off = r.consumed;
        }
        CHECK(kernel.out.size() - off == app_out.size());
        CHECK(std::equal(app_out.begin(), app_out.end(), kernel.out.begin() + static_cast<long>(off)));
        if (e.final == Expect::failed) CHECK(saw_reset);
    }
    (void)accept_seen_while_alive;
    CHECK(!segments_of_this_process_exist());  // the Connection is gone: so are its segments
    return 0;
}
