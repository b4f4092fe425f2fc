// Ping-pong round-trip benchmark on one host: one client, one echo process, N
// round trips of `size` bytes, over several transports in one run; prints
// p50/p99/p99.9, round trips/s, MB/s, user and system CPU per round trip (both
// processes) and the p50 ratio against TCP loopback of the same size.
//
//   pingpong [--sizes 64|16,64,1K|16..1M] [--iters N] [--warmup N] [--budget BYTES]
//            [--min-iters N] [--modes line,ring,unix,tcp,shm] [--csv FILE]
//   pingpong serve PORT SIZE             TCP echo server (for runs under LD_PRELOAD)
//   pingpong connect HOST PORT [opts]    TCP client: prints one CSV line (--warmup-ms M: warm up at
//                                        least M ms; the shm row asks kShimWarmupMs, past the shim's switch)
//
// Modes: tcp (loopback), unix (socketpair), shm (this program's own TCP client and
// server, both under LD_PRELOAD=librdmasock.so; the row fails unless the shim's
// stats say transport=shm), ring (the framed ring over shared memory, no socket
// layer), line (two processes bouncing one cache line: the floor), eventfd (two
// processes waking each other through eventfds: the floor of a sleeping wait).
// PINGPONG_WAIT=poll or epoll: tcp, unix and shm wait in poll() or epoll_wait()
// before each read, as libpq or an event loop does (default: the read waits).
#include <sys/eventfd.h>
#include <sys/mman.h>

#include <atomic>

#include "pingpong_harness.hpp"
#include "shm/shm_channel.hpp"

using namespace rdmasock;
using namespace rdmasock::bench;

namespace {

Summary run_socketpair(const std::string& mode, size_t size, size_t iters, size_t warmup, int a, int b) {
    std::vector<uint8_t> buf(size, 'x');
    PairRun p;
    p.echo = [&] {
        close(a);
        echo_fd(b, size);
    };
    p.client_rt = [&] {
        full_write(a, buf.data(), size);
        if (!full_read(a, buf.data(), size)) die_msg(mode + ": echo process closed");
    };
    p.finish = [&] { close(a); };
    auto s = measure(mode, size, iters, warmup, p);
    close(b);
    return s;
}

Summary run_tcp(size_t size, size_t iters, size_t warmup) {
    uint16_t port = 0;
    int l = tcp_listen(0, &port);
    int c = tcp_connect("127.0.0.1", port);
    int s = tcp_accept(l);
    close(l);
    return run_socketpair("tcp", size, iters, warmup, c, s);
}

Summary run_unix(size_t size, size_t iters, size_t warmup) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) die("socketpair");
    return run_socketpair("unix", size, iters, warmup, sv[0], sv[1]);
}

// Moves n bytes: read them all from r, then write them all to w (echo side).
bool ring_echo(ring::RingWriter& w, ring::RingReader& r, uint8_t* buf, size_t n) {
    for (size_t got = 0; got < n;) {
        auto res = r.read(buf + got, n - got);
        if (res.status == ring::RingStatus::eof || res.status == ring::RingStatus::broken) return false;
        got += res.bytes;
    }
    for (size_t sent = 0; sent < n;) sent += w.write(buf + sent, n - sent).bytes;
    return true;
}

// The ring without any socket layer: both processes spin on the shared rings.
Summary run_ring(size_t size, size_t iters, size_t warmup) {
    std::string err;
    const uint64_t cap = 4 << 20;
    auto chan = ShmChannel::create_sealed(cap, err);
    if (!chan) die_msg("ring: " + err);
    std::vector<uint8_t> buf(size, 'x');
    const int memfd = chan->memfd_fd();
    PairRun p;
    p.echo = [&] {  // the forked echo process maps the memfd it inherited
        auto peer = ShmChannel::attach_sealed(dup(memfd), cap, err);
        if (!peer) _exit(1);
        std::vector<uint8_t> b(size);
        while (ring_echo(peer->writer(), peer->reader(), b.data(), size)) {}
    };
    p.client_rt = [&] {
        for (size_t sent = 0; sent < size;) sent += chan->writer().write(buf.data() + sent, size - sent).bytes;
        for (size_t got = 0; got < size;) got += chan->reader().read(buf.data() + got, size - got).bytes;
    };
    p.finish = [&] { chan->writer().write_fin(); };
    return measure("ring", size, iters, warmup, p);
}

// The physical floor: two processes bouncing one shared cache line (size ignored).
Summary run_line(size_t size, size_t iters, size_t warmup) {
    auto* line = static_cast<std::atomic<uint64_t>*>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (line == MAP_FAILED) die("mmap");
    new (line) std::atomic<uint64_t>(0);
    uint64_t next = 0;
    const uint64_t total = iters + warmup;
    PairRun p;
    p.echo = [&] {
        for (uint64_t i = 0; i < total; ++i) {
            while (line->load(std::memory_order_acquire) != 2 * i + 1) {}
            line->store(2 * i + 2, std::memory_order_release);
        }
    };
    p.client_rt = [&] {
        line->store(++next, std::memory_order_release);
        ++next;
        while (line->load(std::memory_order_acquire) != next) {}
    };
    auto s = measure("line", size, iters, warmup, p);
    munmap(line, 4096);
    return s;
}

// The sleeping floor: two processes waking each other through a pair of blocking
// eventfds, no data (size ignored). A shimmed wait that really sleeps costs at
// least this much per round trip (docs/waiting.md).
Summary run_eventfd(size_t size, size_t iters, size_t warmup) {
    int to_echo = eventfd(0, EFD_CLOEXEC), to_client = eventfd(0, EFD_CLOEXEC);
    if (to_echo < 0 || to_client < 0) die("eventfd");
    const uint64_t total = iters + warmup;
    PairRun p;
    p.echo = [&] {
        uint64_t v;
        for (uint64_t i = 0; i < total; ++i) {
            if (read(to_echo, &v, sizeof v) != sizeof v) _exit(1);
            v = 1;
            if (write(to_client, &v, sizeof v) != sizeof v) _exit(1);
        }
    };
    p.client_rt = [&] {
        uint64_t v = 1;
        if (write(to_echo, &v, sizeof v) != sizeof v || read(to_client, &v, sizeof v) != sizeof v) die("eventfd round trip");
    };
    auto s = measure("eventfd", size, iters, warmup, p);
    close(to_echo), close(to_client);
    return s;
}

// One line a person reads first: did the shim carry it, and how much faster than TCP.
void print_verdict(const std::vector<Summary>& rows) {
    const Summary *tcp = nullptr, *shm = nullptr;
    bool all_ok = true;
    for (const auto& r : rows) {
        all_ok &= r.ok;
        if (r.mode == "tcp" && r.ok && !tcp) tcp = &r;
        if ((r.mode == "shm" || r.mode == "shim") && !shm) shm = &r;
    }
    if (shm && !shm->ok) std::printf("verdict: FAILED: the shimmed run did not run on shared memory\n");
    else if (shm && tcp && shm->p50_us > 0)
        std::printf("verdict: %s: an unmodified TCP program under the shim ran on shared memory, p50 %.2f us, %.1fx faster than TCP loopback (%.1f us)\n",
                    all_ok ? "ok" : "FAILED (a row failed)", shm->p50_us, tcp->p50_us / shm->p50_us, tcp->p50_us);
    else std::printf("verdict: %s\n", all_ok ? "ok" : "FAILED (a row failed)");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 2 && std::string(argv[1]) == "serve") return serve_main(argc, argv);
    if (argc >= 2 && std::string(argv[1]) == "connect") return connect_main(argc, argv);
    Options o = parse_options(argc, argv, 1, {});
    if (o.modes.empty()) o.modes = "line,ring,unix,tcp,shm";
    auto modes = split_modes(o.modes);
    const std::string lib = next_to_self(argv[0], "librdmasock.so");
    const std::string self = self_path();
    for (const auto& m : modes) {
        if (m != "tcp" && m != "unix" && m != "ring" && m != "line" && m != "shm" && m != "shim" && m != "eventfd")
            die_msg("unknown mode " + m + " (tcp, unix, shm, ring, line, eventfd)");
        if ((m == "shm" || m == "shim") && lib.empty()) die_msg("librdmasock.so not found next to " + self);
    }
    std::vector<Summary> rows;
    int rc = run_points(o, modes, "pingpong", [&](const std::string& m, size_t size, size_t iters, size_t warmup) {
        if (m == "tcp") return run_tcp(size, iters, warmup);
        if (m == "unix") return run_unix(size, iters, warmup);
        if (m == "ring") return run_ring(size, iters, warmup);
        if (m == "line") return run_line(size, iters, warmup);
        if (m == "eventfd") return run_eventfd(size, iters, warmup);
        // shm: the shim must really have carried it (stats line), else the row fails.
        return run_preloaded(self, lib, m, "127.0.0.1", size, iters, warmup,
                             {"RDMASOCK_TRANSPORT=shm"}, {"RDMASOCK_STATS=1"}, {"transport=shm", false});
    }, &rows);
    print_verdict(rows);
    return rc;
}
