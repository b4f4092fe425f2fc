// Spin-then-sleep trade-off: 64-byte ping-pong between two plain TCP processes
// under LD_PRELOAD, where the echo side "thinks" (busy-waits) THINK µs before
// answering. A reply that comes within the client's spin budget is caught
// spinning; a later one costs a sleep and a doorbell wake-up. Prints, per
// RDMASOCK_SPIN_US and think time: p50/p99 round trip minus the think time
// (the waiting overhead) and the client's CPU per round trip.
//
//   spin_sweep [--spins tcp,0,5,10,20,50,100] [--thinks 0,5,20,50,200] [--iters N] [--pin 0|1]
//   (spin "tcp": the same two programs without LD_PRELOAD, the baseline)
//   (--pin 1: echo side on CPU 0, client on CPU 1, so neither can take the other's core)
//   spin_sweep serve PORT THINK_US     (internal) echo side
//   spin_sweep connect PORT ITERS      (internal) client: prints "p50 p99 cpu_us_per_rt"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "pingpong_stats.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kSize = 64;

// SPIN_SWEEP_CPU (set by the driver with --pin 1) pins this process to one CPU.
void maybe_pin() {
    const char* cpu = getenv("SPIN_SWEEP_CPU");
    if (!cpu) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(cpu), &set);
    sched_setaffinity(0, sizeof set, &set);
}

[[noreturn]] void die(const char* what) {
    perror(what);
    exit(1);
}

bool full_io(int fd, char* p, size_t n, bool rd) {
    while (n > 0) {
        ssize_t r = rd ? recv(fd, p, n, 0) : send(fd, p, n, MSG_NOSIGNAL);
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

int serve(int port, int think_us) {
    maybe_pin();
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = loopback(port);
    if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(l, 1)) die("listen");
    int s = accept(l, nullptr, nullptr);
    close(l);
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char buf[kSize];
    while (full_io(s, buf, kSize, true)) {
        auto end = Clock::now() + std::chrono::microseconds(think_us);
        while (Clock::now() < end) {}
        if (!full_io(s, buf, kSize, false)) break;
    }
    close(s);
    return 0;
}

int connect_and_time(int port, size_t iters) {
    maybe_pin();
    int c = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(port);
    for (int i = 0; connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0; ++i) {
        if (i > 500) die("connect");
        usleep(10000);
    }
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char buf[kSize] = {};
    // Warm-up: a tenth of the round trips, and long enough to pass the shim's
    // switch to the rings (pingpong_stats.hpp, kShimWarmupMs).
    const auto warm_until = Clock::now() + std::chrono::milliseconds(rdmasock::bench::kShimWarmupMs);
    for (size_t i = 0; i < iters / 10 || Clock::now() < warm_until; ++i)
        if (!full_io(c, buf, kSize, false) || !full_io(c, buf, kSize, true)) die("warm-up");
    std::vector<double> ns(iters);
    rusage r0{}, r1{};
    getrusage(RUSAGE_SELF, &r0);
    auto w0 = Clock::now();
    for (size_t i = 0; i < iters; ++i) {
        auto t0 = Clock::now();
        if (!full_io(c, buf, kSize, false) || !full_io(c, buf, kSize, true)) die("round trip");
        ns[i] = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    }
    double wall = std::chrono::duration<double>(Clock::now() - w0).count();
    getrusage(RUSAGE_SELF, &r1);
    close(c);
    auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    rdmasock::bench::Cpu cpu{secs(r1.ru_utime) - secs(r0.ru_utime), secs(r1.ru_stime) - secs(r0.ru_stime)};
    auto s = rdmasock::bench::summarize("spin", kSize, std::move(ns), wall, cpu);
    printf("%.3f %.3f %.3f\n", s.p50_us, s.p99_us, s.cpu_us_per_rt());
    return 0;
}

constexpr int kTcp = -1;  // a "spin" that means: no shim at all

std::vector<int> parse_list(const std::string& s) {
    std::vector<int> v;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ',')) v.push_back(item == "tcp" ? kTcp : std::stoi(item));
    return v;
}

std::string library_next_to(const char* self) {
    std::string s = self;
    auto slash = s.rfind('/');
    std::string path = (slash == std::string::npos ? std::string(".") : s.substr(0, slash)) + "/librdmasock.so";
    char buf[4096];
    return realpath(path.c_str(), buf) ? buf : "";
}

// One run: echo side and client as separate preloaded processes.
bool run_one(const char* self, const std::string& lib, int spin, int think, size_t iters, bool pin, double out[3]) {
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(0);
    socklen_t len = sizeof a;
    if (bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) || getsockname(probe, reinterpret_cast<sockaddr*>(&a), &len))
        die("port");
    close(probe);
    std::string port = std::to_string(ntohs(a.sin_port));
    if (spin != kTcp) {
        setenv("LD_PRELOAD", lib.c_str(), 1);
        setenv("RDMASOCK_SPIN_US", std::to_string(spin).c_str(), 1);
    }
    pid_t srv = fork();
    if (srv == 0) {
        if (pin) setenv("SPIN_SWEEP_CPU", "0", 1);
        execl(self, self, "serve", port.c_str(), std::to_string(think).c_str(), nullptr);
        _exit(127);
    }
    std::string cmd = std::string(self) + " connect " + port + " " + std::to_string(iters);
    if (pin) setenv("SPIN_SWEEP_CPU", "1", 1);
    FILE* f = popen(cmd.c_str(), "r");
    unsetenv("LD_PRELOAD");
    unsetenv("SPIN_SWEEP_CPU");
    bool ok = f && fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) == 3;
    if (f) pclose(f);
    int st = 0;
    waitpid(srv, &st, 0);
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 4 && std::string(argv[1]) == "serve") return serve(atoi(argv[2]), atoi(argv[3]));
    if (argc == 4 && std::string(argv[1]) == "connect") return connect_and_time(atoi(argv[2]), strtoul(argv[3], nullptr, 10));
    std::vector<int> spins = {0, 5, 10, 20, 50, 100}, thinks = {0, 5, 20, 50, 200};
    size_t iters = 20000;
    bool pin = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        if (k == "--spins") spins = parse_list(argv[i + 1]);
        else if (k == "--thinks") thinks = parse_list(argv[i + 1]);
        else if (k == "--iters") iters = strtoul(argv[i + 1], nullptr, 10);
        else if (k == "--pin") pin = std::string(argv[i + 1]) == "1";
        else {
            fprintf(stderr, "usage: spin_sweep [--spins LIST] [--thinks LIST] [--iters N] [--pin 0|1]\n");
            return 2;
        }
    }
    std::string lib = library_next_to(argv[0]);
    if (lib.empty()) {
        fprintf(stderr, "spin_sweep: librdmasock.so not found next to %s\n", argv[0]);
        return 2;
    }
    printf("64-byte ping-pong, both ends under LD_PRELOAD (spin tcp: neither); overhead = round trip minus think time (us)\n");
    printf("%8s %8s %14s %14s %14s\n", "spin_us", "think_us", "p50_overhead", "p99_overhead", "client_cpu/rt");
    for (int think : thinks)
        for (int spin : spins) {
            double r[3];
            if (!run_one(argv[0], lib, spin, think, iters, pin, r)) {
                fprintf(stderr, "spin_sweep: run spin=%d think=%d failed\n", spin, think);
                return 1;
            }
            std::string label = spin == kTcp ? "tcp" : std::to_string(spin);
            printf("%8s %8d %14.2f %14.2f %14.2f\n", label.c_str(), think, r[0] - think, r[1] - think, r[2]);
        }
    return 0;
}
