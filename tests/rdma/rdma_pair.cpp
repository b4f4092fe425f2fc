// End-to-end test of the RDMA transport (common/rdma_*.cpp) over real verbs.
// Runs inside the Soft-RoCE VM (scripts/test-rdma); see docs/rdma-transport.md.
//
//   rdma_pair [options]                 server (forked child) and client (parent)
//   rdma_pair --fault F [options]       F = rdma-no-device | rdma-open | rdma-qp-create |
//                                       rdma-qp-rtr: the step must fail cleanly with a message
//   rdma_pair --check-fork [options]    a device opened before fork is refused in the child,
//                                       which opens its own
//   rdma_pair --check-big [options]     a 12 MiB record (over rxe's 8 MiB max_msg_sz)
//   rdma_pair --check-peer-death [opts] the server is SIGKILLed: the client's transport breaks
//   rdma_pair --check-isolation [opts]  a peer cannot write into another connection's ring
//   rdma_pair --check-params            RdmaParams encode/decode checks (no device needed)
//
// Pair mode: the two sides make their own TCP connections (c0, c1, c2), exchange
// RdmaParams over c0, connect the queue pairs, then
//   1. ping-pong: --pingpong round trips of 64 bytes: ring with both sides spinning,
//      ring with the reader sleeping (doorbells), kernel TCP; interleaved, twice;
//   2. stream: --bytes of a deterministic pattern in each direction at once, a sender
//      and a receiver thread per side, random chunk sizes (inline and not), random
//      pauses so that both sleep paths run: a receiver finding the ring empty and a
//      sender finding it full follow the transport.hpp contract exactly (arm, re-check,
//      sleep in poll() on the transport's completion channel, woken by the receive
//      completion of the peer's next WRITE_WITH_IMM; take_peer_*_waiting() is always
//      false, so no doorbell byte is ever sent). c0 and c1 carry the parameters and
//      report the peer's death (c2: the TCP ping-pong baseline).
//      A sleep that is not woken within --wake-timeout seconds is a lost wake-up: FAIL.
// Every byte is verified. Each side prints "PASS ..." or "FAIL ..."; exit status 0
// only if both sides passed.
//
// Options: --addr A (server address, default $RDMA_VM_ADDR or 127.0.0.1)
//          --client-bind A (client's TCP source address)  --port P (default: ephemeral)
//          --server-dev D --client-dev D (default $RDMA_VM_DEV or first active)
//          --server-gid N --client-gid N (default -1: automatic)
//          --bytes N (per direction, default 4 MiB)  --ring N (default 16384)
//          --min-arms N, --min-slept N, --min-writer-slept N: sleep-path entries, real
//            sleeps, writer sleeps required per side (defaults: 500, 300, 10 per 4 MiB;
//            no writer minimum with rings over 16 KiB)
//          --pingpong N (default 1000)  --seed S  --wake-timeout SEC (default 20)
//          --no-pause (stream flat out: a throughput figure; no sleep-path minimums)
//          --chunk N (fixed sender chunk size)  --spin-us N (spin before the sleep path)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rdma/rdma_device.hpp"
#include "rdma/rdma_params.hpp"
#include "rdma/rdma_transport.hpp"

using namespace rdmasock;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    std::string addr = getenv("RDMA_VM_ADDR") ? getenv("RDMA_VM_ADDR") : "127.0.0.1";
    std::string client_bind;
    int port = 0;
    std::string server_dev = getenv("RDMA_VM_DEV") ? getenv("RDMA_VM_DEV") : "";
    std::string client_dev = getenv("RDMA_VM_DEV") ? getenv("RDMA_VM_DEV") : "";
    int server_gid = -1, client_gid = -1;
    uint64_t bytes = 4ull << 20;
    uint64_t ring = 16384;
    uint64_t min_arms = 0, min_slept = 0, min_writer_slept = 0;  // 0: scaled defaults (main)
    bool min_arms_set = false, min_slept_set = false, min_writer_slept_set = false;
    int pingpong = 1000;
    uint64_t seed = 1;
    int wake_timeout_s = 20;
    std::string fault;
    bool check_fork = false, check_params = false, check_big = false, check_death = false, check_isolation = false;
    bool no_pause = false;  // stream as fast as possible (throughput); no sleep-path minimums
    size_t chunk = 0;       // fixed sender chunk (0: random sizes)
    int spin_us = 0;        // spin on the ring before taking the sleep path
};

Options opt;
const char* g_role = "main";

[[noreturn]] void die(const std::string& why) {
    printf("FAIL %s: %s\n", g_role, why.c_str());
    fflush(stdout);
    _exit(1);
}

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The pattern: byte i of direction d.
uint8_t pattern(int dir, uint64_t i) {
    uint64_t x = (i >> 3) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(dir) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    return static_cast<uint8_t>(x >> (8 * (i & 7)));
}
void fill(int dir, uint64_t pos, uint8_t* p, size_t n) {
    for (size_t k = 0; k < n; ++k) p[k] = pattern(dir, pos + k);
}

// ---------------------------------------------------------------- TCP

void send_all(int fd, const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    while (n > 0) {
        ssize_t r = send(fd, b, n, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die(std::string("tcp send: ") + strerror(errno));
        b += r, n -= static_cast<size_t>(r);
    }
}
void recv_all(int fd, void* p, size_t n) {
    auto* b = static_cast<uint8_t*>(p);
    while (n > 0) {
        ssize_t r = recv(fd, b, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) die("tcp recv: peer closed");
        if (r < 0) die(std::string("tcp recv: ") + strerror(errno));
        b += r, n -= static_cast<size_t>(r);
    }
}
sockaddr_in inet(const std::string& a, int port) {
    sockaddr_in s{};
    s.sin_family = AF_INET;
    s.sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, a.c_str(), &s.sin_addr) != 1) die("bad address " + a);
    return s;
}
void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// ---------------------------------------------------------------- one side

struct Side {
    bool server;
    // c[0]: parameters and doorbells of the client->server ring, c[1]: doorbells of
    // the server->client ring, c[2]: the TCP ping-pong baseline.
    int c[3] = {-1, -1, -1};
    RdmaDevice* dev = nullptr;
    std::unique_ptr<RdmaTransport> t;
    std::atomic<bool> drain_owned{false};  // one thread at a time takes the channel's events
    int tx_dir() const { return server ? 2 : 1; }
    int rx_dir() const { return server ? 1 : 2; }
    int tx_bell() const { return server ? c[1] : c[0]; }  // we sleep on it as a writer, ring it as a writer
    int rx_bell() const { return server ? c[0] : c[1]; }
};

struct Counters {
    uint64_t arms = 0, slept = 0, in_flight = 0, recheck = 0, doorbells = 0, pauses = 0;
};

// Rings a doorbell: one byte on the TCP socket (non-blocking; a full socket buffer
// already holds unread doorbells, so dropping this one loses nothing).
void doorbell(int fd, Counters& k) {
    char b = 1;
    ssize_t r = send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) die(std::string("doorbell: ") + strerror(errno));
    ++k.doorbells;
}

// The sleep path of transport.hpp, for either side of a ring:
//   arm(true); fence; if (!may_sleep || ready()) { disarm; return } ; sleep; disarm
// The sleep is poll() on the transport's completion channel (wake_fd(): the
// peer's WRITE_WITH_IMM raised a receive completion after arm re-armed the CQ)
// and the TCP socket (the peer's FIN: it died). The sender and the receiver
// thread of one side share the channel: like the shim (Connection::try_own_drain)
// only one of them owns its drain at a time; the other naps 1 ms, because the
// owner may take an event meant for both.
template <class Arm, class Ready>
void sleep_until(Side& s, int fd, Arm arm, Ready ready, Counters& k, const char* what) {
    if (opt.spin_us > 0) {  // what the shim does first (RDMASOCK spin time)
        auto end = Clock::now() + std::chrono::microseconds(opt.spin_us);
        while (Clock::now() < end)
            if (ready()) return;
    }
    ++k.arms;
    bool may = arm(true);
    const bool owned = !s.drain_owned.exchange(true, std::memory_order_acq_rel);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    auto done = [&] {
        if (owned) s.drain_owned.store(false, std::memory_order_release);
        arm(false);
    };
    if (!may) {
        ++k.in_flight;
        return done();
    }
    if (ready()) {
        ++k.recheck;
        return done();
    }
    pollfd p[2] = {{s.t->wake_fd(), POLLIN, 0}, {fd, POLLRDHUP, 0}};
    int rc;
    do rc = poll(p, 2, owned ? opt.wake_timeout_s * 1000 : 1);
    while (rc < 0 && errno == EINTR);
    if (rc == 0 && owned)
        die(std::string("lost wake-up: ") + what + " slept " + std::to_string(opt.wake_timeout_s) +
            " s without a doorbell (condition now " + (ready() ? "TRUE: the doorbell was lost" : "false: peer stuck") +
            ")");
    if (p[1].revents & (POLLHUP | POLLERR | POLLRDHUP)) die(std::string(what) + ": the peer's TCP socket closed");
    if (p[0].revents & (POLLHUP | POLLERR)) die(std::string(what) + ": completion channel error");
    if (owned) s.t->drain_wake();
    ++k.slept;
    done();
}

// Pauses make the peer find the ring empty (its reader sleeps) or full (its
// writer sleeps), deterministically enough that the counts do not depend on the
// host's speed: the sender sleeps in the kernel after every other chunk (longer
// than the peer needs to drain the ring, so the peer's reader takes the sleep
// path), the receiver after every 16th read for longer than the sender needs to
// fill the ring (the peer's writer takes the sleep path). Short random spins in
// between vary the timing of everything else ("in flight" and re-check answers).
void pause_after(bool sender, uint64_t op, std::mt19937_64& rng, Counters& k) {
    if (opt.no_pause) return;
    uint32_t r = static_cast<uint32_t>(rng());
    if (sender ? op % 2 == 0 : op % 16 == 15) {
        ++k.pauses;
        usleep(sender ? 100 + r % 400 : 2000 + r % 3000);
    } else if (r % 4 == 0) {
        auto end = Clock::now() + std::chrono::microseconds((r >> 8) % 100);
        while (Clock::now() < end) {
        }
    }
}

size_t random_chunk(std::mt19937_64& rng, uint32_t max_inline) {
    uint32_t r = static_cast<uint32_t>(rng());
    switch (r & 7) {
        case 0: case 1: case 2: return 1 + (r >> 8) % 64;                   // tiny: inline
        case 3: case 4: case 5: return 1 + (r >> 8) % (max_inline ? max_inline + 64 : 320);  // around the limit
        case 6: return 1 + (r >> 8) % 4096;
        default: return 1 + (r >> 8) % 20000;                               // beyond one record
    }
}

void sender(Side& s, Counters& k, std::string& fail) {
    auto& w = s.t->writer();
    std::mt19937_64 rng(opt.seed * 7919 + static_cast<uint64_t>(s.tx_dir()));
    std::vector<uint8_t> buf(std::max<size_t>(20000, opt.chunk));
    uint64_t pos = 0, ops = 0;
    auto space = [&] { return w.has_space(); };
    auto arm = [&](bool on) { return s.t->arm_writer(on); };
    while (pos < opt.bytes) {
        size_t n = std::min<uint64_t>(opt.chunk ? opt.chunk : random_chunk(rng, s.t->max_inline()), opt.bytes - pos);
        fill(s.tx_dir(), pos, buf.data(), n);
        size_t off = 0;
        while (off < n) {
            auto r = w.write(buf.data() + off, n - off);
            if (r.bytes > 0) {
                off += r.bytes;
                std::atomic_thread_fence(std::memory_order_seq_cst);
                if (s.t->take_peer_reader_waiting()) doorbell(s.tx_bell(), k);
                continue;
            }
            if (r.status == ring::RingStatus::broken) {
                fail = "writer broken: " + w.error() + " / " + s.t->error();
                return;
            }
            sleep_until(s, s.tx_bell(), arm, space, k, "writer");
        }
        pos += n;
        pause_after(true, ++ops, rng, k);
    }
    for (;;) {
        auto st = w.write_fin();
        if (st == ring::RingStatus::ok) break;
        if (st == ring::RingStatus::broken) {
            fail = "write_fin broken: " + w.error();
            return;
        }
        sleep_until(s, s.tx_bell(), arm, space, k, "writer(fin)");
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (s.t->take_peer_reader_waiting()) doorbell(s.tx_bell(), k);
}

void receiver(Side& s, Counters& k, std::string& fail, uint64_t& got) {
    auto& rd = s.t->reader();
    std::mt19937_64 rng(opt.seed * 104729 + static_cast<uint64_t>(s.rx_dir()));
    std::vector<uint8_t> buf(32768);
    auto ready = [&] { return rd.poll() != ring::RingStatus::would_block; };
    auto arm = [&](bool on) { return s.t->arm_reader(on); };
    uint64_t ops = 0;
    for (;;) {
        size_t want = 1 + rng() % buf.size();
        auto r = rd.read(buf.data(), want);
        if (r.bytes > 0) {
            for (size_t i = 0; i < r.bytes; ++i)
                if (buf[i] != pattern(s.rx_dir(), got + i)) {
                    fail = "byte " + std::to_string(got + i) + " differs: got " + std::to_string(buf[i]) + " expected " +
                           std::to_string(pattern(s.rx_dir(), got + i));
                    return;
                }
            got += r.bytes;
            if (got > opt.bytes) {
                fail = "more bytes than sent";
                return;
            }
            if (rd.unpublished() == 0) {  // we just published consumed space
                std::atomic_thread_fence(std::memory_order_seq_cst);
                if (s.t->take_peer_writer_waiting()) doorbell(s.rx_bell(), k);
            }
            pause_after(false, ++ops, rng, k);
            continue;
        }
        if (r.status == ring::RingStatus::eof) break;
        if (r.status == ring::RingStatus::broken) {
            fail = "reader broken: " + rd.error() + " / " + s.t->error();
            return;
        }
        sleep_until(s, s.rx_bell(), arm, ready, k, "reader");
    }
    if (got != opt.bytes) fail = "end of stream after " + std::to_string(got) + " of " + std::to_string(opt.bytes) + " bytes";
}

void print_latency(const char* what, std::vector<double>& us) {
    std::sort(us.begin(), us.end());
    auto q = [&](double f) { return us[std::min(us.size() - 1, static_cast<size_t>(f * us.size()))]; };
    printf("INFO client: ping-pong 64 B x %zu, %-28s p50 %8.1f us  p99 %8.1f us  p99.9 %8.1f us  min %7.1f us\n",
           us.size(), what, q(0.5), q(0.99), q(0.999), us.front());
}

// Ping-pong: the client writes 64 bytes, the server echoes them. mode 0: both
// sides spin on the ring; mode 1: the reader takes the sleep path at once (arm,
// re-check, poll() on the TCP socket, doorbell from the writer); mode 2: plain
// blocking TCP on c[2] (the baseline, same run, same VM).
void pingpong(Side& s, int mode) {
    if (opt.pingpong <= 0) return;
    auto& w = s.t->writer();
    auto& rd = s.t->reader();
    uint8_t msg[64], in[64];
    std::vector<double> us;
    Counters k;
    auto ready = [&] { return rd.poll() != ring::RingStatus::would_block; };
    auto arm = [&](bool on) { return s.t->arm_reader(on); };
    auto ring_read = [&] {
        size_t have = 0;
        auto deadline = Clock::now() + std::chrono::seconds(opt.wake_timeout_s);
        for (unsigned i = 0; have < sizeof in; ++i) {
            auto r = rd.read(in + have, sizeof in - have);
            have += r.bytes;
            if (r.status == ring::RingStatus::broken || r.status == ring::RingStatus::eof)
                die("ping-pong read: " + std::string(ring::to_string(r.status)) + " " + rd.error());
            if (r.bytes > 0 && rd.unpublished() == 0) {
                std::atomic_thread_fence(std::memory_order_seq_cst);
                if (s.t->take_peer_writer_waiting()) doorbell(s.rx_bell(), k);
            }
            if (r.bytes == 0 && mode == 1) sleep_until(s, s.rx_bell(), arm, ready, k, "ping-pong reader");
            if ((i & 4095) == 4095 && Clock::now() > deadline) die("ping-pong: no answer");
        }
    };
    auto ring_write = [&] {
        size_t off = 0;
        while (off < sizeof msg) {
            auto r = w.write(msg + off, sizeof msg - off);
            if (r.status == ring::RingStatus::broken) die("ping-pong write broken: " + w.error());
            off += r.bytes;
        }
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (s.t->take_peer_reader_waiting()) doorbell(s.tx_bell(), k);
    };
    const int fd = s.c[2];
    auto rd_msg = [&] {
        if (mode == 2) recv_all(fd, in, sizeof in);
        else ring_read();
    };
    auto wr_msg = [&] {
        if (mode == 2) send_all(fd, msg, sizeof msg);
        else ring_write();
    };
    const int warm = std::min(100, opt.pingpong);
    for (int i = 0; i < warm + opt.pingpong; ++i) {
        if (s.server) {
            rd_msg();
            memcpy(msg, in, sizeof msg);
            wr_msg();
        } else {
            memset(msg, (i + mode) & 0xff, sizeof msg);
            auto t0 = Clock::now();
            wr_msg();
            rd_msg();
            auto t1 = Clock::now();
            if (memcmp(in, msg, sizeof msg) != 0) die("ping-pong: echo differs");
            if (i >= warm) us.push_back(secs(t1 - t0) * 1e6);
        }
    }
    if (!s.server) {
        const char* names[] = {"rdma ring, spinning:", "rdma ring, sleep + doorbell:", "kernel TCP (baseline):"};
        print_latency(names[mode], us);
        if (mode == 1)
            printf("INFO client: ping-pong sleep path: arms %llu, slept %llu, in flight %llu, re-check %llu\n",
                   (unsigned long long)k.arms, (unsigned long long)k.slept, (unsigned long long)k.in_flight,
                   (unsigned long long)k.recheck);
    }
}

// TCP connections, device, transport, parameter exchange, QP connection, sync.
void setup_side(Side& s, bool server, int listener) {
    g_role = server ? "server" : "client";
    s.server = server;
    if (server) {
        for (int i = 0; i < 3; ++i) {
            int fd = accept(listener, nullptr, nullptr);
            if (fd < 0) die(std::string("accept: ") + strerror(errno));
            char which;
            recv_all(fd, &which, 1);
            if (which < 0 || which > 2 || s.c[static_cast<int>(which)] >= 0) die("bad connection index");
            s.c[static_cast<int>(which)] = fd;
            nodelay(fd);
        }
        close(listener);
    } else {
        sockaddr_in sa{};
        socklen_t len = sizeof sa;
        getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len);
        close(listener);
        auto to = inet(opt.addr, ntohs(sa.sin_port));
        for (int i = 0; i < 3; ++i) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            if (!opt.client_bind.empty()) {
                auto b = inet(opt.client_bind, 0);
                if (bind(fd, reinterpret_cast<sockaddr*>(&b), sizeof b)) die(std::string("bind: ") + strerror(errno));
            }
            if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to))
                die("connect " + opt.addr + ": " + strerror(errno));
            char which = static_cast<char>(i);
            send_all(fd, &which, 1);
            s.c[i] = fd;
            nodelay(fd);
        }
    }
    std::string err;
    const auto t0 = Clock::now();
    s.dev = RdmaDevice::process(server ? opt.server_dev : opt.client_dev, server ? opt.server_gid : opt.client_gid, RdmaFaults{},
                                err);
    if (!s.dev) die("device: " + err);
    const auto t1 = Clock::now();
    s.t = RdmaTransport::create(*s.dev, opt.ring, RdmaFaults{}, err);
    if (!s.t) die("create: " + err);
    const auto t2 = Clock::now();
    // Exchange parameters (as the handshake would), through the wire format.
    auto mine = encode(s.t->local_params());
    std::vector<uint8_t> theirs(kRdmaParamsBytes);
    send_all(s.c[0], mine.data(), mine.size());
    recv_all(s.c[0], theirs.data(), theirs.size());
    RdmaParams remote;
    if (!decode(theirs.data(), theirs.size(), remote, err)) die("decode: " + err);
    if (!s.t->connect(remote, err)) die("connect: " + err);
    const auto t3 = Clock::now();
    // Both QPs must be ready to receive before either side writes.
    char sync = 's';
    send_all(s.c[0], &sync, 1);
    recv_all(s.c[0], &sync, 1);
    printf("INFO %s: %s; local %s; max_inline_data %u (read back), sq depth %u, signal every %u, path mtu %u; "
           "open %.1f ms, create %.1f ms, connect %.1f ms\n",
           g_role, s.dev->describe().c_str(), to_string(s.t->local_params()).c_str(), s.t->max_inline(),
           s.t->sq_depth(), s.t->signal_every(), 128u << s.t->path_mtu(), secs(t1 - t0) * 1e3, secs(t2 - t1) * 1e3,
           secs(t3 - t2) * 1e3);
    fflush(stdout);
    if (s.t->max_inline() == 0) printf("INFO %s: the QP reports no inline data: every record is a gather WRITE\n", g_role);
}

int run_side(bool server, int listener) {
    Side s;
    setup_side(s, server, listener);

    // Interleaved so that the host's load affects all three alike.
    for (int round = 0; round < 2; ++round)
        for (int mode : {2, 0, 1}) pingpong(s, mode);

    Counters ks, kr;
    std::string fs, fr;
    uint64_t got = 0;
    const auto t4 = Clock::now();
    std::thread snd([&] { sender(s, ks, fs); });
    receiver(s, kr, fr, got);
    snd.join();
    const auto t5 = Clock::now();
    if (!fs.empty()) die("sender: " + fs);
    if (!fr.empty()) die("receiver: " + fr);
    if (!s.t->flush(5000)) die("flush: " + s.t->error());
    // Neither side tears its QP down before the other has everything. On c[2],
    // the idle baseline socket: a receiver still draining doorbells from c[0]
    // could swallow the byte there.
    char fin = 'F';
    send_all(s.c[2], &fin, 1);
    recv_all(s.c[2], &fin, 1);
    if (fin != 'F') die("expected the peer's F on the baseline socket");

    auto st = s.t->stats();
    const uint64_t arms = ks.arms + kr.arms;
    printf("INFO %s: stream %.1f MiB each way in %.2f s (%.2f MiB/s per direction); records %llu (%llu inline, %.0f%%), "
           "publishes %llu, arms %llu, receive completions %llu, channel events %llu, signaled %llu, cq polls %llu, "
           "sq-full waits %llu\n",
           g_role, opt.bytes / 1048576.0, secs(t5 - t4), opt.bytes / 1048576.0 / secs(t5 - t4),
           static_cast<unsigned long long>(st.records), static_cast<unsigned long long>(st.inline_records),
           st.records ? 100.0 * st.inline_records / st.records : 0.0, static_cast<unsigned long long>(st.publishes),
           static_cast<unsigned long long>(st.arms), static_cast<unsigned long long>(st.recv_completions),
           static_cast<unsigned long long>(st.cq_events),
           static_cast<unsigned long long>(st.signaled), static_cast<unsigned long long>(st.cq_polls),
           static_cast<unsigned long long>(st.sq_full_waits));
    printf("INFO %s: sleep path: reader arms %llu (slept %llu, in flight %llu, re-check %llu), writer arms %llu (slept "
           "%llu, in flight %llu, re-check %llu), doorbells sent %llu\n",
           g_role, (unsigned long long)kr.arms, (unsigned long long)kr.slept, (unsigned long long)kr.in_flight,
           (unsigned long long)kr.recheck, (unsigned long long)ks.arms, (unsigned long long)ks.slept,
           (unsigned long long)ks.in_flight, (unsigned long long)ks.recheck,
           (unsigned long long)(ks.doorbells + kr.doorbells));
    if (s.t->broken()) die("transport broken at the end: " + s.t->error());
    if (arms < opt.min_arms)
        die("sleep path entered only " + std::to_string(arms) + " times (< --min-arms " + std::to_string(opt.min_arms) + ")");
    if (kr.slept + ks.slept < opt.min_slept)
        die("slept only " + std::to_string(kr.slept + ks.slept) + " times (< --min-slept " + std::to_string(opt.min_slept) + ")");
    if (ks.slept < opt.min_writer_slept)
        die("the writer slept only " + std::to_string(ks.slept) + " times (< --min-writer-slept " +
            std::to_string(opt.min_writer_slept) + ")");
    if (s.t->max_inline() >= 16 && st.inline_records == 0 && !opt.chunk) die("no record went inline");
    if (st.inline_records == st.records && !opt.chunk) die("every record went inline: the gather path was not exercised");
    printf("PASS %s: %llu bytes each way verified, %llu sleep-path entries (%llu slept, %llu in flight), max_inline %u\n",
           g_role, (unsigned long long)opt.bytes, (unsigned long long)arms, (unsigned long long)(ks.slept + kr.slept),
           (unsigned long long)(ks.in_flight + kr.in_flight), s.t->max_inline());
    fflush(stdout);
    s.t.reset();
    for (int fd : s.c) close(fd);
    return 0;
}

int make_listener() {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    auto a = inet(opt.addr, opt.port);
    if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(l, 4))
        die("bind/listen " + opt.addr + ": " + strerror(errno));
    fflush(stdout);
    return l;
}

int run_pair() {
    int l = make_listener();
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) _exit(run_side(true, l));
    int rc = run_side(false, l);
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("FAIL server process exited with status %d\n", status);
        return 1;
    }
    return rc;
}

// ---------------------------------------------------------------- checks

// The server reads a little, then is killed (SIGKILL: no teardown). The client
// keeps writing and arming without looking at TCP: the transport itself must turn
// broken (completion error after the QP's retries, or the arm READ timeout) within
// seconds, never hang.
int check_peer_death() {
    int l = make_listener();
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        Side s;
        setup_side(s, true, l);
        std::vector<uint8_t> buf(65536);
        uint64_t got = 0;
        while (got < 100000) got += s.t->reader().read(buf.data(), buf.size()).bytes;
        printf("INFO server: read %llu bytes, now dying (SIGKILL)\n", static_cast<unsigned long long>(got));
        fflush(stdout);
        char d = 'D';
        send_all(s.c[0], &d, 1);
        raise(SIGKILL);
    }
    Side s;
    setup_side(s, false, l);
    // RDMA_PAIR_READ_TIMEOUT_MS: a long liveness READ timeout lets the QP's own retry
    // exhaustion (a completion error) be what breaks the transport.
    int read_timeout_ms = 0;  // 0: RdmaTransport::kReadTimeoutMs
    if (const char* e = getenv("RDMA_PAIR_READ_TIMEOUT_MS")) read_timeout_ms = atoi(e), s.t->set_read_timeout_ms(read_timeout_ms);
    std::vector<uint8_t> buf(4096);
    uint64_t pos = 0;
    Clock::time_point dead{};
    auto start = Clock::now();
    uint64_t arms = 0;
    while (!s.t->broken() && s.t->writer().status() != ring::RingStatus::broken) {
        fill(1, pos, buf.data(), buf.size());
        auto r = s.t->writer().write(buf.data(), buf.size());
        pos += r.bytes;
        char d = 0;
        if (dead == Clock::time_point{} && recv(s.c[0], &d, 1, MSG_DONTWAIT) == 1 && d == 'D') dead = Clock::now();
        if (r.bytes == 0) {  // ring full: the sleep path, minus the sleep
            ++arms;
            s.t->arm_writer(true);
            s.t->arm_writer(false);
            // Arming no longer talks to the peer (no READ since the completion-
            // channel doorbells; in the shim the dead peer's TCP FIN/RST ends the
            // wait): a liveness READ, bounded by the READ timeout, breaks it here.
            std::string perr;
            s.t->probe(read_timeout_ms, perr);
            usleep(1000);
        }
        if (Clock::now() - start > std::chrono::seconds(120)) die("transport still not broken 120 s after start: hang");
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) die("the server did not die as planned");
    if (dead == Clock::time_point{}) {
        pollfd p{s.c[0], POLLIN, 0};
        char d = 0;
        if (poll(&p, 1, 5000) != 1 || recv(s.c[0], &d, 1, 0) != 1 || d != 'D')
            die("transport broke before the peer died: " + s.t->error() + s.t->writer().error());
        dead = Clock::now();
    }
    printf("INFO client: wrote %llu bytes; transport broken %.2f s after the peer died (%llu arms): %s\n",
           static_cast<unsigned long long>(pos), secs(Clock::now() - dead), static_cast<unsigned long long>(arms),
           s.t->error().c_str());
    // The ring writer learns of it at its next post; with a full ring it has none
    // to make and says would_block (the caller sleeps; TCP's EOF/RST wakes it).
    auto w = s.t->writer().write(buf.data(), 1);
    if (w.status != ring::RingStatus::broken && w.status != ring::RingStatus::would_block)
        die(std::string("writer after the transport broke: ") + ring::to_string(w.status));
    if (!s.t->arm_reader(true) || !s.t->arm_writer(true)) die("arm on a broken transport must allow the kernel sleep");
    printf("PASS peer death: transport broken, writer says %s, arm_* allow the kernel sleep\n",
           ring::to_string(w.status));
    return 0;
}

int check_fault() {
    g_role = "fault";
    const std::string& f = opt.fault;
    std::string err;
    if (f == "rdma-no-device" || f == "rdma-open") {
        RdmaDevice* d = RdmaDevice::process(opt.client_dev, opt.client_gid, RdmaFaults::parse(f), err);
        if (d || err.empty()) die(f + ": device opened anyway");
        printf("INFO fault %s: RdmaDevice::process failed: %s\n", f.c_str(), err.c_str());
        // The injected failure is not cached: the real device still opens afterwards.
        std::string err2;
        if (!RdmaDevice::process(opt.client_dev, opt.client_gid, RdmaFaults{}, err2)) die("device after fault: " + err2);
        auto u = RdmaDevice::open(opt.client_dev, opt.client_gid, RdmaFaults::parse(f), err2);
        if (u) die(f + ": RdmaDevice::open succeeded anyway");
    } else if (f == "rdma-qp-create") {
        RdmaDevice* d = RdmaDevice::process(opt.client_dev, opt.client_gid, RdmaFaults{}, err);
        if (!d) die("device: " + err);
        auto t = RdmaTransport::create(*d, opt.ring, RdmaFaults::parse(f), err);
        if (t || err.empty()) die(f + ": transport created anyway");
        printf("INFO fault %s: RdmaTransport::create failed: %s\n", f.c_str(), err.c_str());
        std::string err2;
        if (!RdmaTransport::create(*d, opt.ring, RdmaFaults{}, err2)) die("create after fault: " + err2);
    } else if (f == "rdma-qp-rtr") {
        RdmaDevice* d = RdmaDevice::process(opt.client_dev, opt.client_gid, RdmaFaults{}, err);
        if (!d) die("device: " + err);
        auto a = RdmaTransport::create(*d, opt.ring, RdmaFaults::parse(f), err);
        auto b = RdmaTransport::create(*d, opt.ring, RdmaFaults{}, err);
        if (!a || !b) die("create: " + err);
        if (a->connect(b->local_params(), err) || err.empty()) die(f + ": connect succeeded anyway");
        printf("INFO fault %s: RdmaTransport::connect failed: %s\n", f.c_str(), err.c_str());
        // Without the fault, a loopback pair on one device connects and carries a record.
        auto c = RdmaTransport::create(*d, opt.ring, RdmaFaults{}, err);
        if (!c) die("create: " + err);
        if (!b->connect(c->local_params(), err) || !c->connect(b->local_params(), err)) die("loopback connect: " + err);
        const char hello[] = "hello";
        if (b->writer().write(hello, sizeof hello).bytes != sizeof hello) die("loopback write");
        char in[sizeof hello] = {};
        auto deadline = Clock::now() + std::chrono::seconds(10);
        size_t have = 0;
        while (have < sizeof in && Clock::now() < deadline) have += c->reader().read(in + have, sizeof in - have).bytes;
        if (memcmp(in, hello, sizeof hello) != 0) die("loopback record did not arrive");
    } else {
        die("unknown fault " + f);
    }
    printf("PASS fault %s: failed cleanly with a message\n", f.c_str());
    return 0;
}

// Sends `n` records a -> b on a connected loopback pair and checks them (spinning).
void loopback_traffic(RdmaTransport& a, RdmaTransport& b, int n, uint64_t& pos) {
    std::vector<uint8_t> out(3000), in(3000);
    for (int i = 0; i < n; ++i) {
        size_t len = 1 + (static_cast<size_t>(i) * 977) % out.size();
        fill(3, pos, out.data(), len);
        size_t off = 0, have = 0;
        auto deadline = Clock::now() + std::chrono::seconds(opt.wake_timeout_s);
        while (have < len) {
            if (off < len) off += a.writer().write(out.data() + off, len - off).bytes;
            auto r = b.reader().read(in.data() + have, len - have);
            have += r.bytes;
            if (r.status == ring::RingStatus::broken || a.writer().status() == ring::RingStatus::broken)
                die("loopback broken: " + a.error() + b.error());
            if (Clock::now() > deadline) die("loopback: record " + std::to_string(i) + " never arrived");
        }
        if (memcmp(in.data(), out.data(), len) != 0) die("loopback: record " + std::to_string(i) + " differs");
        pos += len;
    }
}

int check_fork() {
    g_role = "fork";
    std::string err;
    RdmaDevice* d = RdmaDevice::process(opt.client_dev, opt.client_gid, RdmaFaults{}, err);
    if (!d) die("device: " + err);
    // RDMA_PAIR_DONTFORK=1: MADV_DONTFORK even where the kernel copies on fork.
    const bool dontfork = getenv("RDMA_PAIR_DONTFORK") && std::string(getenv("RDMA_PAIR_DONTFORK")) == "1";
    const std::string hook = dontfork ? "rdma-dontfork" : "";
    auto a = RdmaTransport::create(*d, opt.ring, RdmaFaults::parse(hook), err);
    auto b = a ? RdmaTransport::create(*d, opt.ring, RdmaFaults::parse(hook), err) : nullptr;
    if (!a || !b) die("create: " + err);
    if (!a->connect(b->local_params(), err) || !b->connect(a->local_params(), err)) die("loopback connect: " + err);
    uint64_t pos = 0;
    loopback_traffic(*a, *b, 50, pos);  // the registered pages are touched before the fork
    const bool copies = d->kernel_copies_on_fork() && !dontfork;
    printf("INFO fork: kernel copies pinned pages on fork: %s; %s\n", d->kernel_copies_on_fork() ? "yes" : "no",
           copies ? "the child gets a frozen copy of the rings" : "rings are MADV_DONTFORK, absent in the child");
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        std::string e1, e2;
        auto t2 = RdmaTransport::create(*d, opt.ring, RdmaFaults{}, e2);
        if (t2 || e2.empty()) {
            printf("FAIL fork: the child could use the parent's device\n");
            _exit(1);
        }
        printf("INFO fork child: create() on the parent's device: %s\n", e2.c_str());
        // The child's own device (a pre-fork server's worker): a fresh context that works.
        RdmaDevice* own = RdmaDevice::process(opt.client_dev, opt.client_gid, RdmaFaults{}, e1);
        if (!own || own == d) {
            printf("FAIL fork: the child got no device of its own: %s\n", e1.c_str());
            _exit(1);
        }
        {
            auto c1 = RdmaTransport::create(*own, opt.ring, RdmaFaults{}, e1);
            auto c2 = c1 ? RdmaTransport::create(*own, opt.ring, RdmaFaults{}, e1) : nullptr;
            if (!c1 || !c2 || !c1->connect(c2->local_params(), e1) || !c2->connect(c1->local_params(), e1)) {
                printf("FAIL fork: the child's own device: %s\n", e1.c_str());
                _exit(1);
            }
            uint64_t cpos = 0;
            loopback_traffic(*c1, *c2, 50, cpos);
            printf("INFO fork child: its own device carried %llu bytes\n", static_cast<unsigned long long>(cpos));
        }
        if (copies)  // a frozen copy: reading it is harmless
            printf("INFO fork child: reader().poll() on the copy: %s\n", ring::to_string(b->reader().poll()));
        // Destroying the inherited transports must not touch the parent's verbs objects.
        a.reset();
        b.reset();
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(c, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("child failed");
    // The parent's connection still works: its registered pages did not turn
    // copy-on-write under the NIC (records land where the reader looks).
    loopback_traffic(*a, *b, 200, pos);
    auto t3 = RdmaTransport::create(*d, opt.ring, RdmaFaults{}, err);
    if (!t3) die("parent after fork: " + err);
    printf("PASS fork: the parent's verbs refused in the forked child, which opens its own; parent's connection unaffected (%llu bytes)\n",
           static_cast<unsigned long long>(pos));
    return 0;
}

// One record larger than the port's max_msg_sz (rxe: 8 MiB): a 64 MiB ring takes
// records up to 16 MiB; the transport splits such a record into ordered WRITEs.
int check_big() {
    g_role = "big";
    std::string err;
    RdmaDevice* d = RdmaDevice::process(opt.client_dev, opt.client_gid, RdmaFaults{}, err);
    if (!d) die("device: " + err);
    const uint64_t ring = 64ull << 20;
    auto a = RdmaTransport::create(*d, ring, RdmaFaults{}, err);
    auto b = a ? RdmaTransport::create(*d, ring, RdmaFaults{}, err) : nullptr;
    if (!a || !b) die("create: " + err);
    if (!a->connect(b->local_params(), err) || !b->connect(a->local_params(), err)) die("loopback connect: " + err);
    const size_t len = 12u << 20;
    std::vector<uint8_t> out(len), in(len);
    fill(4, 0, out.data(), len);
    auto r = a->writer().write(out.data(), len);
    if (r.bytes != len) die("one write took " + std::to_string(r.bytes) + " of " + std::to_string(len) + " bytes");
    auto st = a->stats();
    size_t have = 0;
    auto deadline = Clock::now() + std::chrono::seconds(opt.wake_timeout_s * 3);
    while (have < len) {
        auto rr = b->reader().read(in.data() + have, len - have);
        have += rr.bytes;
        if (rr.status == ring::RingStatus::broken || a->broken()) die("broken: " + b->reader().error() + a->error());
        if (Clock::now() > deadline) die("the record never arrived");
    }
    if (memcmp(in.data(), out.data(), len) != 0) die("the record differs");
    printf("PASS big: one %zu MiB record (port max_msg_sz %u bytes) arrived intact in %llu record(s)\n", len >> 20,
           d->max_msg_sz(), static_cast<unsigned long long>(st.records));
    return 0;
}

// A peer that aims its writes at another connection's ring (right address, right
// rkey, same process, same device) must be refused by the NIC: each connection
// has its own protection domain.
int check_isolation() {
    g_role = "isolation";
    std::string err;
    RdmaDevice* d = RdmaDevice::process(opt.client_dev, opt.client_gid, RdmaFaults{}, err);
    if (!d) die("device: " + err);
    std::unique_ptr<RdmaTransport> t[4];
    for (auto& x : t)
        if (!(x = RdmaTransport::create(*d, opt.ring, RdmaFaults{}, err))) die("create: " + err);
    auto& [a1, b1, a2, b2] = t;
    RdmaParams spoof = b1->local_params();
    spoof.ring_addr = b2->local_params().ring_addr;  // the victim: connection 2's ring
    spoof.ring_rkey = b2->local_params().ring_rkey;
    if (!a1->connect(spoof, err) || !b1->connect(a1->local_params(), err)) die("connect 1: " + err);
    if (!a2->connect(b2->local_params(), err) || !b2->connect(a2->local_params(), err)) die("connect 2: " + err);
    const char x[] = "intruder";
    if (a1->writer().write(x, sizeof x).bytes != sizeof x) die("write");
    a1->flush(3000);
    if (!a1->broken()) die("the write into another connection's ring was not refused");
    if (b2->reader().poll() != ring::RingStatus::would_block) die("the victim's ring changed");
    uint64_t pos = 0;
    loopback_traffic(*a2, *b2, 20, pos);  // the victim connection is unaffected
    printf("PASS isolation: refused (%s); the other connection still works\n", a1->error().c_str());
    return 0;
}

int check_params() {
    g_role = "params";
    RdmaParams p;
    for (int i = 0; i < 16; ++i) p.gid[i] = static_cast<uint8_t>(i * 17);
    p.qpn = 0x123456;
    p.psn = 0xabcdef;
    p.mtu = 3;
    p.ring_addr = 0x7f0011223344ull;
    p.ring_rkey = 0xdeadbeef;
    p.ring_bytes = 1 << 20;
    p.ctrl_addr = 0x7f0055667788ull;
    p.ctrl_rkey = 0x01020304;
    p.lid = 7;
    auto b = encode(p);
    if (b.size() != kRdmaParamsBytes) die("encoded size");
    if (b[0] != 'R' || b[1] != 'D' || b[2] != 'P' || b[3] != '4') die("magic bytes");
    if (b[20] != 0x56 || b[21] != 0x34 || b[22] != 0x12) die("not little endian");
    RdmaParams q;
    std::string err;
    if (!decode(b.data(), b.size(), q, err)) die("decode: " + err);
    if (memcmp(&p.gid, &q.gid, 16) || p.qpn != q.qpn || p.psn != q.psn || p.mtu != q.mtu || p.ring_addr != q.ring_addr ||
        p.ring_rkey != q.ring_rkey || p.ring_bytes != q.ring_bytes || p.ctrl_addr != q.ctrl_addr ||
        p.ctrl_rkey != q.ctrl_rkey || p.lid != q.lid)
        die("round trip differs");
    auto bad = [&](const char* what, auto mutate) {
        auto c = b;
        mutate(c);
        RdmaParams r;
        std::string e;
        if (decode(c.data(), c.size(), r, e)) die(std::string("accepted ") + what);
        if (e.empty()) die(std::string("no message for ") + what);
    };
    auto p2 = [&](auto f) {
        return [=](std::vector<uint8_t>& c) {
            RdmaParams x = p;
            f(x);
            c = encode(x);
        };
    };
    bad("short blob", [](std::vector<uint8_t>& c) { c.pop_back(); });
    bad("long blob", [](std::vector<uint8_t>& c) { c.push_back(0); });
    bad("bad magic", [](std::vector<uint8_t>& c) { c[3] = '1'; });  // RDP1: the TCP-doorbell protocol
    bad("RDP2 peer", [](std::vector<uint8_t>& c) { c[3] = '2'; });  // cannot go back to TCP
    bad("RDP3 peer", [](std::vector<uint8_t>& c) { c[3] = '3'; });  // publishes the consumed counter once
    bad("reserved", [](std::vector<uint8_t>& c) { c[67] = 1; });
    bad("mtu 0", p2([](RdmaParams& x) { x.mtu = 0; }));
    bad("mtu 6", p2([](RdmaParams& x) { x.mtu = 6; }));
    bad("qpn 0", p2([](RdmaParams& x) { x.qpn = 0; }));
    bad("qpn 25 bits", p2([](RdmaParams& x) { x.qpn = 1 << 24; }));
    bad("psn 25 bits", p2([](RdmaParams& x) { x.psn = 1 << 24; }));
    bad("ring 0", p2([](RdmaParams& x) { x.ring_bytes = 0; }));
    bad("ring not power of two", p2([](RdmaParams& x) { x.ring_bytes = 3 << 10; }));
    bad("ring too small", p2([](RdmaParams& x) { x.ring_bytes = 512; }));
    bad("ring too large", p2([](RdmaParams& x) { x.ring_bytes = 1ull << 31; }));
    bad("ring wraps the address space", p2([](RdmaParams& x) { x.ring_addr = ~0ull - 100; }));
    if (decode(nullptr, 0, q, err)) die("accepted null");
    printf("PASS params: encode/decode round trip, %zu bytes little endian, 15 malformed blobs rejected\n",
           kRdmaParamsBytes);
    return 0;
}

uint64_t num(const char* s) {
    char* end = nullptr;
    uint64_t v = strtoull(s, &end, 0);
    if (*end == 'K' || *end == 'k') v <<= 10;
    else if (*end == 'M' || *end == 'm') v <<= 20;
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> const char* {
            if (i + 1 >= argc) die("missing value for " + a);
            return argv[++i];
        };
        if (a == "--addr") opt.addr = next();
        else if (a == "--client-bind") opt.client_bind = next();
        else if (a == "--port") opt.port = static_cast<int>(num(next()));
        else if (a == "--server-dev") opt.server_dev = next();
        else if (a == "--client-dev") opt.client_dev = next();
        else if (a == "--server-gid") opt.server_gid = static_cast<int>(strtol(next(), nullptr, 0));
        else if (a == "--client-gid") opt.client_gid = static_cast<int>(strtol(next(), nullptr, 0));
        else if (a == "--bytes") opt.bytes = num(next());
        else if (a == "--ring") opt.ring = num(next());
        else if (a == "--min-arms") opt.min_arms = num(next()), opt.min_arms_set = true;
        else if (a == "--min-slept") opt.min_slept = num(next()), opt.min_slept_set = true;
        else if (a == "--min-writer-slept") opt.min_writer_slept = num(next()), opt.min_writer_slept_set = true;
        else if (a == "--pingpong") opt.pingpong = static_cast<int>(num(next()));
        else if (a == "--seed") opt.seed = num(next());
        else if (a == "--wake-timeout") opt.wake_timeout_s = static_cast<int>(num(next()));
        else if (a == "--fault") opt.fault = next();
        else if (a == "--check-fork") opt.check_fork = true;
        else if (a == "--check-params") opt.check_params = true;
        else if (a == "--check-big") opt.check_big = true;
        else if (a == "--check-peer-death") opt.check_death = true;
        else if (a == "--check-isolation") opt.check_isolation = true;
        else if (a == "--no-pause") opt.no_pause = true;
        else if (a == "--chunk") opt.chunk = num(next());
        else if (a == "--spin-us") opt.spin_us = static_cast<int>(num(next()));
        else {
            fprintf(stderr, "usage: see the comment at the top of tests/rdma/rdma_pair.cpp (unknown option %s)\n", a.c_str());
            return 2;
        }
    }
    // Defaults scaled to the stream: about one sender chunk in two is followed by a
    // kernel sleep, so the peer's reader sleeps about (chunks / 2) times; these are
    // a third to a half of what a 4 MiB run measures, on a quiet or a loaded host.
    // Arms: ~1,180 per side since the completion-channel doorbells (an arm always
    // allows the sleep now; the old arm READ's "in flight" answers made 2,200-2,800).
    const double scale = opt.no_pause ? 0.0 : static_cast<double>(opt.bytes) / (4 << 20);
    if (!opt.min_arms_set) opt.min_arms = static_cast<uint64_t>(500 * scale);
    if (!opt.min_slept_set) opt.min_slept = static_cast<uint64_t>(300 * scale);
    if (!opt.min_writer_slept_set) opt.min_writer_slept = opt.ring <= 16384 ? static_cast<uint64_t>(10 * scale) : 0;
    alarm(600);  // a hang is a failure (SIGALRM kills us: nonzero status)
    if (opt.check_params) return check_params();
    if (!opt.fault.empty()) return check_fault();
    if (opt.check_fork) return check_fork();
    if (opt.check_big) return check_big();
    if (opt.check_death) return check_peer_death();
    if (opt.check_isolation) return check_isolation();
    return run_pair();
}
