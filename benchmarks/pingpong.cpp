// Ping-pong round-trip benchmark: one client, one echo process, N round trips of
// `size` bytes, over several transports in one run; prints p50/p99/p99.9, round
// trips per second, CPU per round trip and the ratio against TCP loopback.
//
//   pingpong [--size N] [--iters N] [--warmup N] [--modes tcp,unix,ring,line,shim] [--csv FILE]
//   pingpong serve PORT            echo server on TCP (for runs under LD_PRELOAD)
//   pingpong connect HOST PORT     client: prints one CSV line of results
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "pingpong_stats.hpp"
#include "shm_channel.hpp"

using namespace rdmasock;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    size_t size = 64;
    size_t iters = 200000;
    size_t warmup = 20000;
    std::string modes = "line,ring,unix,tcp,shim";
    std::string csv;
};

[[noreturn]] void die(const char* what) {
    std::perror(what);
    std::exit(1);
}

double cpu_seconds(const rusage& r) {
    return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

// Warm-up, then `iters` timed round trips: per-trip nanoseconds, wall time and
// this process's CPU time over the timed part.
struct Timed {
    std::vector<double> ns;
    double wall = 0;
    double cpu_self = 0;
};

Timed time_round_trips(const Options& o, const std::function<void()>& rt) {
    for (size_t i = 0; i < o.warmup; ++i) rt();
    Timed t;
    t.ns.resize(o.iters);
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    auto start = Clock::now();
    for (size_t i = 0; i < o.iters; ++i) {
        auto t0 = Clock::now();
        rt();
        t.ns[i] = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    }
    t.wall = std::chrono::duration<double>(Clock::now() - start).count();
    getrusage(RUSAGE_SELF, &after);
    t.cpu_self = cpu_seconds(after) - cpu_seconds(before);
    return t;
}

// Runs `client` here and `echo` in a forked child; times every round trip.
bench::Summary measure(const std::string& mode, const Options& o, const std::function<void()>& echo,
                       const std::function<void()>& client_rt, const std::function<void()>& finish) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        echo();
        _exit(0);
    }
    Timed t = time_round_trips(o, client_rt);
    rusage child{};
    finish();  // tell the echo process to stop
    int status = 0;
    // The child's CPU covers warm-up too; scale it to the measured share.
    wait4(pid, &status, 0, &child);
    double share = static_cast<double>(o.iters) / static_cast<double>(o.iters + o.warmup);
    return bench::summarize(mode, o.size, std::move(t.ns), t.wall, t.cpu_self + cpu_seconds(child) * share);
}

void full_write(int fd, const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    while (n > 0) {
        ssize_t w = ::write(fd, b, n);
        if (w <= 0) die("write");
        b += w;
        n -= static_cast<size_t>(w);
    }
}

bool full_read(int fd, void* p, size_t n) {
    auto* b = static_cast<uint8_t*>(p);
    while (n > 0) {
        ssize_t r = ::read(fd, b, n);
        if (r == 0) return false;
        if (r < 0) die("read");
        b += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

void echo_fd(int fd, size_t size) {
    std::vector<uint8_t> buf(size);
    while (full_read(fd, buf.data(), size)) full_write(fd, buf.data(), size);
}

bench::Summary run_socketpair(const std::string& mode, const Options& o, int a, int b) {
    std::vector<uint8_t> buf(o.size, 'x');
    auto s = measure(
        mode, o,
        [&] {
            close(a);
            echo_fd(b, o.size);
        },
        [&] {
            full_write(a, buf.data(), o.size);
            full_read(a, buf.data(), o.size);
        },
        [&] { close(a); });
    close(b);
    return s;
}

int tcp_listen(uint16_t port, uint16_t* bound) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(port);
    if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 16) != 0) die("bind/listen");
    socklen_t len = sizeof a;
    getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
    if (bound) *bound = ntohs(a.sin_port);
    return l;
}

int tcp_connect(const char* host, uint16_t port) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) die("inet_pton");
    for (int i = 0; connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0; ++i) {
        if (i > 200) die("connect");
        usleep(10000);
    }
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return c;
}

bench::Summary run_tcp(const Options& o) {
    uint16_t port = 0;
    int l = tcp_listen(0, &port);
    int c = tcp_connect("127.0.0.1", port);
    int s = accept(l, nullptr, nullptr);
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    close(l);
    return run_socketpair("tcp", o, c, s);
}

bench::Summary run_unix(const Options& o) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) die("socketpair");
    return run_socketpair("unix", o, sv[0], sv[1]);
}

// The ring without any socket layer: both processes spin on the shared rings.
bench::Summary run_ring(const Options& o) {
    std::string err;
    const uint64_t cap = 1 << 20;
    auto chan = ShmChannel::create(cap, err);
    if (!chan) {
        std::fprintf(stderr, "ring: %s\n", err.c_str());
        std::exit(1);
    }
    auto move = [](ring::RingWriter& w, ring::RingReader& r, uint8_t* buf, size_t n) {
        for (size_t got = 0; got < n;) {
            auto res = r.read(buf + got, n - got);
            if (res.status == ring::RingStatus::eof || res.status == ring::RingStatus::broken) return false;
            got += res.bytes;
        }
        for (size_t sent = 0; sent < n;) sent += w.write(buf + sent, n - sent).bytes;
        return true;
    };
    std::vector<uint8_t> buf(o.size, 'x');
    std::string name = chan->name();
    auto s = measure(
        "ring", o,
        [&] {
            auto peer = ShmChannel::attach(name, cap, err);
            if (!peer) _exit(1);
            std::vector<uint8_t> b(o.size);
            while (move(peer->writer(), peer->reader(), b.data(), o.size)) {}
        },
        [&] {
            for (size_t sent = 0; sent < o.size;) sent += chan->writer().write(buf.data() + sent, o.size - sent).bytes;
            for (size_t got = 0; got < o.size;) got += chan->reader().read(buf.data() + got, o.size - got).bytes;
        },
        [&] { chan->writer().write_fin(); });
    return s;
}

// The physical floor: two processes bouncing one shared cache line.
bench::Summary run_line(const Options& o) {
    auto* line = static_cast<std::atomic<uint64_t>*>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    new (line) std::atomic<uint64_t>(0);
    uint64_t next = 0;
    const uint64_t total = o.iters + o.warmup;
    return measure(
        "line", o,
        [&] {
            for (uint64_t i = 0; i < total; ++i) {
                while (line->load(std::memory_order_acquire) != 2 * i + 1) {}
                line->store(2 * i + 2, std::memory_order_release);
            }
        },
        [&] {
            line->store(++next, std::memory_order_release);
            ++next;
            while (line->load(std::memory_order_acquire) != next) {}
        },
        [] {});
}

// TCP ping-pong between two processes of this same binary started with
// LD_PRELOAD=<library>, as an unmodified program would be.
bench::Summary run_preloaded(const Options& o, const char* self, const std::string& lib, const std::string& mode) {
    uint16_t port = 0;
    int probe = tcp_listen(0, &port);  // pick a free port, then hand it over
    close(probe);
    std::string p = std::to_string(port);
    pid_t server = fork();
    if (server == 0) {
        setenv("LD_PRELOAD", lib.c_str(), 1);
        execl(self, self, "serve", p.c_str(), std::to_string(o.size).c_str(), nullptr);
        _exit(127);
    }
    std::string cmd = "LD_PRELOAD=" + lib + " " + self + " connect 127.0.0.1 " + p + " --size " +
                      std::to_string(o.size) + " --iters " + std::to_string(o.iters) + " --warmup " +
                      std::to_string(o.warmup) + " --label " + mode;
    FILE* f = popen(cmd.c_str(), "r");
    char line[512] = {};
    bench::Summary s;
    s.mode = mode;
    if (f && std::fgets(line, sizeof line, f)) {
        std::istringstream in(line);
        std::string field;
        std::vector<std::string> v;
        while (std::getline(in, field, ',')) v.push_back(field);
        if (v.size() >= 8) {
            s.size = std::stoul(v[1]);
            s.iters = std::stoul(v[2]);
            s.p50_us = std::stod(v[3]);
            s.p99_us = std::stod(v[4]);
            s.p999_us = std::stod(v[5]);
            s.rt_per_s = std::stod(v[6]);
            s.cpu_us_per_rt = std::stod(v[7]);
        }
    }
    if (f) pclose(f);
    int status;
    waitpid(server, &status, 0);
    return s;
}

Options parse(int argc, char** argv, int from, std::string* label = nullptr) {
    Options o;
    for (int i = from; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--size") o.size = std::stoul(v);
        else if (k == "--iters") o.iters = std::stoul(v);
        else if (k == "--warmup") o.warmup = std::stoul(v);
        else if (k == "--modes") o.modes = v;
        else if (k == "--csv") o.csv = v;
        else if (k == "--label" && label) *label = v;
        else {
            std::fprintf(stderr, "pingpong: unknown option %s\n", k.c_str());
            std::exit(2);
        }
    }
    if (o.size == 0 || o.iters == 0) {
        std::fprintf(stderr, "pingpong: --size and --iters must be positive\n");
        std::exit(2);
    }
    return o;
}

std::string default_library(const char* self) {
    std::string s = self;
    auto slash = s.rfind('/');
    std::string dir = slash == std::string::npos ? "." : s.substr(0, slash);
    char buf[4096];
    return realpath((dir + "/librdmasock.so").c_str(), buf) ? buf : "";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 3 && std::string(argv[1]) == "serve") {
        size_t size = argc >= 4 ? std::stoul(argv[3]) : 64;
        int l = tcp_listen(static_cast<uint16_t>(std::stoi(argv[2])), nullptr);
        int s = accept(l, nullptr, nullptr);
        int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        close(l);
        echo_fd(s, size);
        close(s);
        return 0;
    }
    if (argc >= 4 && std::string(argv[1]) == "connect") {
        std::string label = "tcp";
        Options o = parse(argc, argv, 4, &label);
        int c = tcp_connect(argv[2], static_cast<uint16_t>(std::stoi(argv[3])));
        std::vector<uint8_t> buf(o.size, 'x');
        auto rt = [&] {
            full_write(c, buf.data(), o.size);
            if (!full_read(c, buf.data(), o.size)) die("peer closed");
        };
        Timed t = time_round_trips(o, rt);
        close(c);
        auto s = bench::summarize(label, o.size, std::move(t.ns), t.wall, t.cpu_self);
        std::printf("%s,%zu,%zu,%.4f,%.4f,%.4f,%.1f,%.4f\n", s.mode.c_str(), s.size, s.iters, s.p50_us, s.p99_us,
                    s.p999_us, s.rt_per_s, s.cpu_us_per_rt);
        return 0;
    }
    Options o = parse(argc, argv, 1);
    std::vector<bench::Summary> rows;
    std::string lib = default_library(argv[0]);
    std::stringstream modes(o.modes);
    std::string m;
    while (std::getline(modes, m, ',')) {
        std::fprintf(stderr, "pingpong: measuring %s (%zu round trips of %zu bytes)...\n", m.c_str(), o.iters, o.size);
        if (m == "tcp") rows.push_back(run_tcp(o));
        else if (m == "unix") rows.push_back(run_unix(o));
        else if (m == "ring") rows.push_back(run_ring(o));
        else if (m == "line") rows.push_back(run_line(o));
        else if (m == "shim" || m == "shim-tcp") {
            if (lib.empty()) {
                std::fprintf(stderr, "pingpong: librdmasock.so not found next to %s, skipping %s\n", argv[0], m.c_str());
                continue;
            }
            rows.push_back(run_preloaded(o, argv[0], lib, m));
        } else {
            std::fprintf(stderr, "pingpong: unknown mode %s\n", m.c_str());
            return 2;
        }
    }
    bench::print_table(rows, "tcp");
    if (!o.csv.empty()) bench::write_csv(rows, o.csv);
    return 0;
}
