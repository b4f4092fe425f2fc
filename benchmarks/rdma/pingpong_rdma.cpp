// Ping-pong over RDMA (needs a verbs device; run inside the Soft-RoCE VM, see
// scripts/bench-rdma). Same output as build/pingpong; ratios against `tcp` of the
// same run and size.
//
//   pingpong_rdma [pingpong options] [--modes LIST] [--dev D] [--gid N] [--ring BYTES]
//                 [--inline-wanted BYTES] [--crossover 1]
//   pingpong_rdma serve PORT SIZE | connect HOST PORT [opts]   (as in pingpong)
//   pingpong_rdma ring-echo PORT [--dev D] [--gid N] [--ring BYTES] [--inline-wanted BYTES]
//                 the echo end of rdma-footer / rdma-footer-inline on another host: serves
//                 one run per connection until killed; the client names it with
//                 --echo HOST:PORT (those two modes only; then only the client's CPU
//                 is counted)
//
// Modes (--host: the address of the RDMA netdev, default $RDMA_VM_ADDR):
//   tcp                 kernel TCP to --host (the baseline)
//   rsocket             this program's TCP client and server under LD_PRELOAD=$RDMA_VM_RSPRELOAD
//                       (rdma-core's rsocket); fails unless /dev/infiniband was in use
//   rdma-basic          RDMA WRITE of the payload + a separate atomic fetch-and-add on the
//                       peer's counter, which the receiver polls (benchmarks/rdma/basic_qp.hpp)
//   rdma-footer         common/rdma_transport: framed ring records (header/footer), inline off
//   rdma-footer-inline  the same with inline sends (up to the QP's max_inline_data)
//   shim-rdma           TCP client and server under LD_PRELOAD=librdmasock.so with
//                       RDMASOCK_TRANSPORT=rdma; fails unless the stats say transport=rdma
//   shim-rdma-signal-all  the same with every WRITE signaled (RDMASOCK_RDMA_SIGNAL_EVERY=1)
//   shim-rdma-no-inline   the same with no inline sends (RDMASOCK_RDMA_INLINE=0)
//                       (the send-queue discipline, each choice against its alternative)
// Every RDMA mode bootstraps its queue pair over a TCP connection, spins on memory
// (no sleeping) and checks the first and last byte of every echoed message.
// --crossover 1 (with rdma-footer,rdma-footer-inline): prints where inline stops paying.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "basic_qp.hpp"
#include "pingpong_harness.hpp"
#include "rdma/rdma_device.hpp"
#include "rdma/rdma_params.hpp"
#include "rdma/rdma_transport.hpp"

using namespace rdmasock;
using namespace rdmasock::bench;

namespace {

struct RdmaOptions {
    std::string dev;
    int gid = -1;
    uint64_t ring = 1 << 20;
    uint32_t inline_wanted = RdmaTransport::kInlineWanted;
};

uint32_t g_max_inline = 0;  // what the last rdma-footer-inline QP read back

std::unique_ptr<RdmaDevice> open_device(const RdmaOptions& r) {
    std::string err;
    auto d = RdmaDevice::open(r.dev, r.gid, RdmaFaults{}, err);
    if (!d) die_msg("RDMA device: " + err);
    return d;
}

// One side's parameters out, the peer's in, over the bootstrap TCP connection.
RdmaParams exchange(int fd, const RdmaParams& mine) {
    auto blob = encode(mine);
    full_write(fd, blob.data(), blob.size());
    std::vector<uint8_t> theirs(kRdmaParamsBytes);
    if (!full_read(fd, theirs.data(), theirs.size())) die_msg("bootstrap: peer closed");
    RdmaParams p;
    std::string err;
    if (!decode(theirs.data(), theirs.size(), p, err)) die_msg("bootstrap: " + err);
    return p;
}

// Both queue pairs are connected before either side posts (else the first packets
// would reach a QP not yet ready to receive and wait for a retry).
void sync(int fd) {
    char b = 's';
    full_write(fd, &b, 1);
    if (!full_read(fd, &b, 1)) die_msg("bootstrap: peer closed");
}

uint8_t stamp_of(size_t i) { return static_cast<uint8_t>(i * 31 + 7); }

void stamp(uint8_t* buf, size_t size, size_t i) { buf[0] = buf[size - 1] = stamp_of(i); }

void check_stamp(const uint8_t* buf, size_t size, size_t i, const std::string& mode) {
    if (buf[0] != stamp_of(i) || buf[size - 1] != stamp_of(i))
        die_msg(mode + ": echoed message " + std::to_string(i) + " is corrupt");
}

// ---------------------------------------------------------------- ring modes

void write_all(RdmaTransport& t, const uint8_t* p, size_t n) {
    for (size_t sent = 0; sent < n;) {
        auto r = t.writer().write(p + sent, n - sent);
        if (r.status == ring::RingStatus::broken) die_msg("rdma write: " + t.error());
        sent += r.bytes;
    }
}

void read_all(RdmaTransport& t, uint8_t* p, size_t n) {
    for (size_t got = 0; got < n;) {
        auto r = t.reader().read(p + got, n - got);
        if (r.status == ring::RingStatus::broken || r.status == ring::RingStatus::eof)
            die_msg("rdma read: " + std::string(ring::to_string(r.status)) + " " + t.error());
        got += r.bytes;
    }
}

struct RingEnd {
    std::unique_ptr<RdmaDevice> dev;
    std::unique_ptr<RdmaTransport> t;

    void open(int fd, const RdmaOptions& r, bool use_inline) {
        std::string err;
        dev = open_device(r);
        t = RdmaTransport::create(*dev, r.ring, RdmaFaults{}, err, r.inline_wanted);
        if (!t) die_msg("RdmaTransport::create: " + err);
        if (!use_inline) t->limit_inline(0);
        if (!t->connect(exchange(fd, t->local_params()), err)) die_msg("RdmaTransport::connect: " + err);
        sync(fd);
    }
    void close_down() {
        t.reset();
        dev.reset();
    }
};

// The echo end of one ring run over the bootstrap connection `c`.
void echo_ring(int c, size_t size, size_t total, const RdmaOptions& r, bool use_inline) {
    RingEnd peer;
    peer.open(c, r, use_inline);
    std::vector<uint8_t> b(size);
    for (size_t i = 0; i < total; ++i) {
        read_all(*peer.t, b.data(), size);
        write_all(*peer.t, b.data(), size);
    }
    peer.t->flush(1000);
    sync(c);  // the client is done: tear down
    peer.close_down();
}

// What a ring-echo on another host needs to know about a run (sent first).
struct RingRunHeader {
    uint64_t size = 0, total = 0;
    uint8_t use_inline = 0;
    uint8_t pad[7] = {};
};

// A TCP port number, 1 to 65535, in decimal.
bool parse_port(const std::string& s, uint16_t& port) {
    if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    const int v = std::stoi(s);
    if (v < 1 || v > 65535) return false;
    port = static_cast<uint16_t>(v);
    return true;
}

// An echo on another host (`ring-echo`, --echo HOST:PORT): empty host for the
// local forked echo.
std::string g_echo_host;
uint16_t g_echo_port = 0;

Summary run_ring(const std::string& mode, size_t size, size_t iters, size_t warmup, const std::string& host,
                 const RdmaOptions& r, bool use_inline) {
    const bool remote = !g_echo_host.empty();
    uint16_t port = 0;
    int l = remote ? -1 : tcp_listen(0, &port);
    const size_t total = iters + warmup;
    RingEnd me;
    int s = -1;
    std::vector<uint8_t> buf(size, 'x');
    size_t n = 0;
    PairRun p;
    p.echo = [&] {
        if (remote) return;  // the other host echoes
        close(l);
        echo_ring(tcp_connect(host, port), size, total, r, use_inline);
    };
    p.setup = [&] {
        if (remote) {
            s = tcp_connect(g_echo_host, g_echo_port);
            RingRunHeader h;
            h.size = size, h.total = total, h.use_inline = use_inline;
            full_write(s, &h, sizeof h);
        } else {
            s = tcp_accept(l);
            close(l);
        }
        me.open(s, r, use_inline);
        if (use_inline) g_max_inline = me.t->max_inline();
    };
    p.client_rt = [&] {
        stamp(buf.data(), size, n);
        write_all(*me.t, buf.data(), size);
        read_all(*me.t, buf.data(), size);
        check_stamp(buf.data(), size, n++, mode);
    };
    p.finish = [&] {
        me.t->flush(1000);
        sync(s);
    };
    auto out = measure(mode, size, iters, warmup, p);
    me.close_down();
    if (s >= 0) close(s);
    return out;
}

// ---------------------------------------------------------------- rdma-basic

Summary run_basic(size_t size, size_t iters, size_t warmup, const std::string& host, const RdmaOptions& r) {
    uint16_t port = 0;
    int l = tcp_listen(0, &port);
    const size_t total = iters + warmup;
    std::unique_ptr<RdmaDevice> dev;
    std::unique_ptr<BasicQp> q;
    int s = -1;
    size_t n = 0;
    auto open = [&](int fd, std::unique_ptr<RdmaDevice>& d, std::unique_ptr<BasicQp>& qp) {
        std::string err;
        d = open_device(r);
        qp = BasicQp::create(*d, size, err);
        if (!qp) die_msg("rdma-basic: " + err);
        if (!qp->connect(exchange(fd, qp->local_params()), err)) die_msg("rdma-basic: " + err);
        sync(fd);
    };
    PairRun p;
    p.echo = [&] {
        close(l);
        int c = tcp_connect(host, port);
        std::unique_ptr<RdmaDevice> pd;
        std::unique_ptr<BasicQp> pq;
        open(c, pd, pq);
        std::string err;
        for (size_t i = 1; i <= total; ++i) {
            if (!pq->wait_count(i, err)) die_msg("rdma-basic echo: " + err);
            std::memcpy(pq->send_buf(), pq->recv_buf(), size);
            if (!pq->send(static_cast<uint32_t>(size), err)) die_msg("rdma-basic echo: " + err);
        }
        sync(c);
        pq.reset();
        pd.reset();
    };
    p.setup = [&] {
        s = tcp_accept(l);
        close(l);
        open(s, dev, q);
    };
    p.client_rt = [&] {
        std::string err;
        stamp(q->send_buf(), size, n);
        if (!q->send(static_cast<uint32_t>(size), err)) die_msg("rdma-basic: " + err);
        if (!q->wait_count(n + 1, err)) die_msg("rdma-basic: " + err);
        check_stamp(q->recv_buf(), size, n++, "rdma-basic");
    };
    p.finish = [&] { sync(s); };
    auto out = measure("rdma-basic", size, iters, warmup, p);
    q.reset();
    dev.reset();
    if (s >= 0) close(s);
    return out;
}

// ---------------------------------------------------------------- tcp

Summary run_tcp(size_t size, size_t iters, size_t warmup, const std::string& host) {
    uint16_t port = 0;
    int l = tcp_listen(0, &port);
    int s = -1;
    std::vector<uint8_t> buf(size, 'x');
    PairRun p;
    p.echo = [&] {
        close(l);
        int c = tcp_connect(host, port);
        echo_fd(c, size);
    };
    p.setup = [&] {
        s = tcp_accept(l);
        close(l);
    };
    p.client_rt = [&] {
        full_write(s, buf.data(), size);
        if (!full_read(s, buf.data(), size)) die_msg("tcp: echo process closed");
    };
    p.finish = [&] { shutdown(s, SHUT_WR); };
    auto out = measure("tcp", size, iters, warmup, p);
    close(s);
    return out;
}

// The crossover: the first size from which inline never again gains more than the
// noise at p50. The noise is the largest |gain| among the sizes whose records can
// never go inline (payload > max_inline_data - 8: 4-byte header and footer; there
// only the 8-byte consumed-counter writes differ): twice their median |gain|, so
// one outlier does not set it, at least 2%; 5% when the sweep has no such size.
// The median gains within and beyond the cap are printed too.
double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void print_crossover(const std::vector<Summary>& rows) {
    std::printf("\ninline comparison (p50; gain = no-inline p50 / inline p50 - 1; max_inline_data %u B):\n",
                g_max_inline);
    const size_t cap = g_max_inline > 8 ? g_max_inline - 8 : 0;
    std::vector<std::pair<size_t, double>> gains;
    std::vector<double> within, beyond;
    for (const auto& a : rows)
        for (const auto& b : rows)
            if (a.ok && b.ok && a.size == b.size && a.mode == "rdma-footer" && b.mode == "rdma-footer-inline") {
                double g = b.p50_us > 0 ? a.p50_us / b.p50_us - 1 : 0;
                gains.emplace_back(a.size, g);
                (a.size <= cap ? within : beyond).push_back(g);
                std::printf("  %6zu B  no-inline %8.2f us  inline %8.2f us  gain %+6.1f%%%s\n", a.size, a.p50_us,
                            b.p50_us, g * 100, a.size <= cap ? "" : "  (never inline)");
            }
    std::vector<double> beyond_abs;
    for (double g : beyond) beyond_abs.push_back(std::abs(g));
    const double noise = beyond.empty() ? 0.05 : std::max(0.02, 2 * median(beyond_abs));
    size_t cross = 0;
    for (size_t i = gains.size(); i-- > 0;) {
        if (gains[i].second > noise) break;
        cross = gains[i].first;
    }
    if (gains.empty()) {
        std::printf("crossover: no data\n");
        return;
    }
    if (cross == 0)
        std::printf("crossover: none in the range: inline still gained more than the noise (%.1f%%) at %zu B\n",
                    noise * 100, gains.back().first);
    else
        std::printf("crossover: %zu B (from there on inline never gained more than the noise, %.1f%%, at p50)\n",
                    cross, noise * 100);
    std::printf("median gain: %+.1f%% over %zu sizes whose records go inline (payload <= %zu B), %+.1f%% over %zu "
                "sizes whose records never do\n",
                median(within) * 100, within.size(), cap, median(beyond) * 100, beyond.size());
}

}  // namespace

// `ring-echo PORT`: one ring run per connection, forever (until killed).
int ring_echo_main(int argc, char** argv, const RdmaOptions& r) {
    uint16_t port = 0;
    if (argc < 3 || !parse_port(argv[2], port))
        die_msg("usage: ring-echo PORT [--dev D] [--gid N] [--ring BYTES] [--inline-wanted BYTES]");
    int l = tcp_listen(port, nullptr);
    for (;;) {
        int c = tcp_accept(l);
        RingRunHeader h;
        if (!full_read(c, &h, sizeof h) || h.size == 0 || h.size > (64u << 20)) {
            close(c);
            continue;
        }
        std::fprintf(stderr, "ring-echo: %llu messages of %llu B%s\n", static_cast<unsigned long long>(h.total),
                     static_cast<unsigned long long>(h.size), h.use_inline ? ", inline" : "");
        echo_ring(c, h.size, h.total, r, h.use_inline != 0);
        close(c);
    }
}

int main(int argc, char** argv) {
    if (argc >= 2 && std::string(argv[1]) == "serve") return serve_main(argc, argv);
    if (argc >= 2 && std::string(argv[1]) == "connect") return connect_main(argc, argv);
    const bool echo_only = argc >= 2 && std::string(argv[1]) == "ring-echo";
    Options o = parse_options(argc, argv, echo_only ? 3 : 1,
                              {"--dev", "--gid", "--ring", "--inline-wanted", "--crossover", "--echo"});
    RdmaOptions r;
    const char* vm_addr = getenv("RDMA_VM_ADDR");
    if (o.host == "127.0.0.1" && vm_addr) o.host = vm_addr;
    r.dev = extra_option(o, "--dev", getenv("RDMA_VM_DEV") ? getenv("RDMA_VM_DEV") : "");
    try {
        r.gid = std::stoi(extra_option(o, "--gid", "-1"));
        r.ring = parse_bytes(extra_option(o, "--ring", "1M"));
        r.inline_wanted = static_cast<uint32_t>(parse_bytes(extra_option(o, "--inline-wanted", "256")));
    } catch (const std::exception&) {
        die_msg("bad --gid, --ring or --inline-wanted");
    }
    if (!ring::valid_capacity(r.ring)) die_msg("--ring must be a power of two from 1K to 1G");
    if (echo_only) return ring_echo_main(argc, argv, r);
    if (const std::string echo = extra_option(o, "--echo", ""); !echo.empty()) {
        const auto colon = echo.rfind(':');
        if (colon == std::string::npos || colon == 0 || !parse_port(echo.substr(colon + 1), g_echo_port))
            die_msg("--echo wants HOST:PORT (the ring-echo of another host; used by rdma-footer and rdma-footer-inline)");
        g_echo_host = echo.substr(0, colon);
    }
    if (o.modes.empty()) o.modes = "tcp,rsocket,rdma-basic,rdma-footer,rdma-footer-inline";
    auto modes = split_modes(o.modes);
    const std::string self = self_path();
    const char* rs = getenv("RDMA_VM_RSPRELOAD");
    const std::string rspreload = rs ? rs : "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so";
    const std::string shim = next_to_self(argv[0], "librdmasock.so");
    // The shim's modes: the environment each end adds.
    const std::vector<std::pair<std::string, std::vector<std::string>>> shim_modes = {
        {"shim-rdma", {"RDMASOCK_TRANSPORT=rdma"}},
        {"shim-rdma-signal-all", {"RDMASOCK_TRANSPORT=rdma", "RDMASOCK_RDMA_SIGNAL_EVERY=1"}},
        {"shim-rdma-no-inline", {"RDMASOCK_TRANSPORT=rdma", "RDMASOCK_RDMA_INLINE=0"}},
    };
    auto shim_env = [&](const std::string& m) -> const std::vector<std::string>* {
        for (const auto& [name, env] : shim_modes)
            if (name == m) return &env;
        return nullptr;
    };
    for (const auto& m : modes)
        if (m != "tcp" && m != "rsocket" && m != "rdma-basic" && m != "rdma-footer" && m != "rdma-footer-inline" &&
            !shim_env(m))
            die_msg("unknown mode " + m +
                    " (tcp, rsocket, rdma-basic, rdma-footer, rdma-footer-inline, shim-rdma, shim-rdma-signal-all, "
                    "shim-rdma-no-inline)");
    std::vector<Summary> rows;
    int rc = run_points(
        o, modes, "pingpong_rdma",
        [&](const std::string& m, size_t size, size_t iters, size_t warmup) {
            if (m == "tcp") return run_tcp(size, iters, warmup, o.host);
            if (m == "rdma-basic") return run_basic(size, iters, warmup, o.host, r);
            if (m == "rdma-footer") return run_ring(m, size, iters, warmup, o.host, r, false);
            if (m == "rdma-footer-inline") return run_ring(m, size, iters, warmup, o.host, r, true);
            if (m == "rsocket")
                return run_preloaded(self, rspreload, m, o.host, size, iters, warmup, {}, {}, {"", true});
            return run_preloaded(self, shim, m, o.host, size, iters, warmup, *shim_env(m), {"RDMASOCK_STATS=1"},
                                 {"transport=rdma", false});
        },
        &rows);
    if (extra_option(o, "--crossover", "0") == "1") print_crossover(rows);
    return rc;
}
