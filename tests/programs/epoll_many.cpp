// One epoll set over many connections, most of them idle: the server side of
// tests/integration/epoll_scale.sh (every connection answered, exactly once,
// whatever order they wake in) and of benchmarks/epoll-scale.sh (ping-pong
// latency on one active connection beside N idle ones).
//
//   epoll_many --conns N --verify [--et]           prints a transcript
//   epoll_many --conns N --bench --iters I [--et]  prints p50/p99/rt/s
//
// The process forks: the parent serves every connection from one epoll set,
// the child is the client. Each connection first makes two round trips, so
// that under the shim it is on shared memory before the measured part.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr size_t kMsg = 64;

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "epoll_many: %s: %s\n", what, std::strerror(errno));
    std::exit(2);
}

void write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (w <= 0) die("send");
        p += w;
        n -= static_cast<size_t>(w);
    }
}

void read_all(int fd, char* p, size_t n) {
    while (n > 0) {
        ssize_t r = ::recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die("recv");
        p += r;
        n -= static_cast<size_t>(r);
    }
}

void prelude_client(int fd) {
    char b[kMsg] = {};
    for (int i = 0; i < 2; ++i) write_all(fd, b, kMsg), read_all(fd, b, kMsg);
}

void prelude_server(int fd) {
    char b[kMsg];
    for (int i = 0; i < 2; ++i) read_all(fd, b, kMsg), write_all(fd, b, kMsg);
}

void raise_fd_limit() {
    rlimit r{1 << 20, 1 << 20};
    if (setrlimit(RLIMIT_NOFILE, &r) == 0) return;
    getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
}

// Answers every message with itself, from one epoll set, until every
// connection has ended. Returns the number of messages answered.
long serve(int listener, int conns, bool et) {
    std::vector<int> fds;
    for (int i = 0; i < conns; ++i) {
        int fd = ::accept(listener, nullptr, nullptr);
        if (fd < 0) die("accept");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        prelude_server(fd);
        fds.push_back(fd);
    }
    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    for (int i = 0; i < conns; ++i) {
        epoll_event ev{EPOLLIN | (et ? EPOLLET : 0u), {}};
        ev.data.u32 = static_cast<uint32_t>(i);
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0) die("epoll_ctl");
    }
    std::vector<std::string> pending(conns);  // bytes of a message not complete yet
    long answered = 0;
    int open = conns;
    epoll_event evs[64];
    while (open > 0) {
        int n = epoll_wait(ep, evs, 64, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        for (int e = 0; e < n; ++e) {
            int i = static_cast<int>(evs[e].data.u32);
            if (fds[i] < 0) {
                std::fprintf(stderr, "epoll_many: event for closed connection %d\n", i);
                std::exit(3);
            }
            // Level-triggered: one read per event is enough; edge-triggered: all of it.
            for (;;) {
                char buf[4096];
                ssize_t r = ::recv(fds[i], buf, sizeof buf, MSG_DONTWAIT);
                if (r < 0 && errno == EINTR) continue;
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
                if (r < 0) die("recv");
                if (r == 0) {
                    epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], nullptr);
                    ::close(fds[i]);
                    fds[i] = -1;
                    --open;
                    break;
                }
                pending[i].append(buf, static_cast<size_t>(r));
                while (pending[i].size() >= kMsg) {
                    write_all(fds[i], pending[i].data(), kMsg);
                    pending[i].erase(0, kMsg);
                    ++answered;
                }
                if (!et) break;
            }
        }
    }
    return answered;
}

std::vector<int> connect_all(const sockaddr_in& a, int conns) {
    std::vector<int> fds;
    for (int i = 0; i < conns; ++i) {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket");
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) die("connect");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        prelude_client(fd);
        fds.push_back(fd);
    }
    return fds;
}

void message(char* b, int conn, int round) {
    std::memset(b, '.', kMsg);
    std::snprintf(b, kMsg, "conn %d round %d", conn, round);
}

// Every connection, in a random order, one at a time and then in bursts:
// each answer must be its own message. Prints what was checked.
int client_verify(const sockaddr_in& a, int conns) {
    auto fds = connect_all(a, conns);
    std::mt19937 rng(12345);
    std::vector<int> order(conns);
    for (int i = 0; i < conns; ++i) order[i] = i;
    // Give the server time to fall asleep: its idle connections go cold.
    usleep(200000);
    std::shuffle(order.begin(), order.end(), rng);
    long checked = 0;
    char out[kMsg], in[kMsg];
    for (int i : order) {  // one at a time: each wakes a cold connection
        message(out, i, 1);
        write_all(fds[i], out, kMsg);
        read_all(fds[i], in, kMsg);
        if (std::memcmp(in, out, kMsg) != 0) std::printf("MISMATCH conn %d round 1\n", i);
        else ++checked;
    }
    usleep(200000);
    for (int burst = 0; burst < 4; ++burst) {  // many at once: more wake than one epoll_wait returns
        std::shuffle(order.begin(), order.end(), rng);
        size_t k = std::min<size_t>(order.size(), 500);
        for (size_t j = 0; j < k; ++j) message(out, order[j], 2 + burst), write_all(fds[order[j]], out, kMsg);
        for (size_t j = 0; j < k; ++j) {
            message(out, order[j], 2 + burst);
            read_all(fds[order[j]], in, kMsg);
            if (std::memcmp(in, out, kMsg) != 0) std::printf("MISMATCH conn %d round %d\n", order[j], 2 + burst);
            else ++checked;
        }
        usleep(50000);
    }
    for (int fd : fds) ::close(fd);
    std::printf("client: %ld answers checked over %d connections\n", checked, conns);
    return 0;
}

int client_bench(const sockaddr_in& a, int conns, long iters) {
    auto fds = connect_all(a, conns);
    usleep(200000);
    int fd = fds.front();  // first: it gets its rings before any fd budget runs out
    char b[kMsg] = {};
    std::vector<double> rtt;
    rtt.reserve(static_cast<size_t>(iters));
    const long warmup = iters / 10;
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters + warmup; ++i) {
        if (i == warmup) t0 = std::chrono::steady_clock::now();
        auto s = std::chrono::steady_clock::now();
        write_all(fd, b, kMsg);
        read_all(fd, b, kMsg);
        if (i >= warmup) rtt.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count());
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::sort(rtt.begin(), rtt.end());
    std::printf("idle=%d p50_us=%.2f p99_us=%.2f rt_per_s=%.0f\n", conns - 1, rtt[rtt.size() / 2],
                rtt[rtt.size() * 99 / 100], static_cast<double>(iters) / secs);
    for (int f : fds) ::close(f);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    int conns = 100;
    long iters = 20000;
    bool verify = false, bench = false, et = false;
    for (int i = 1; i < argc; ++i) {
        std::string o = argv[i];
        if (o == "--conns" && i + 1 < argc) conns = std::atoi(argv[++i]);
        else if (o == "--iters" && i + 1 < argc) iters = std::atol(argv[++i]);
        else if (o == "--verify") verify = true;
        else if (o == "--bench") bench = true;
        else if (o == "--et") et = true;
        else {
            std::fprintf(stderr, "usage: epoll_many --conns N (--verify | --bench --iters I) [--et]\n");
            return 2;
        }
    }
    if (conns < (bench ? 0 : 1) || verify == bench) {
        std::fprintf(stderr, "epoll_many: need --conns (>= 1 for --verify) and one of --verify, --bench\n");
        return 2;
    }
    raise_fd_limit();
    int l = ::socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0) die("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 4096) != 0) die("listen");
    getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
    if (bench) ++conns;  // the active one, besides `conns` idle ones
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        ::close(l);
        std::exit(verify ? client_verify(a, conns) : client_bench(a, conns, iters));
    }
    long answered = serve(l, conns, et);
    int st = 0;
    waitpid(child, &st, 0);
    if (verify) std::printf("server: %ld messages answered\n", answered);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
