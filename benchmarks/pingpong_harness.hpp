// What every ping-pong program shares: options, sockets, the timing loop, the
// two-process runner and the runner for a program started under LD_PRELOAD.
// Header only: each benchmarks/*.cpp is a program of its own (Makefile).
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "pingpong_stats.hpp"

namespace rdmasock::bench {

using Clock = std::chrono::steady_clock;

struct Options {
    std::vector<size_t> sizes{64};
    size_t iters = 100000;
    size_t warmup = 10000;
    // And at least this long (a shimmed client: the switch to the rings comes
    // after RDMASOCK_SHM_AFTER_US and the discovery, run_preloaded).
    unsigned warmup_ms = 0;
    // Sweeps: a point moves about `budget` bytes each way (iters = budget / size,
    // at least min_iters, at most iters) so that 1 MiB points do not take minutes.
    size_t budget = 0;
    size_t min_iters = 200;
    std::string modes;
    std::string csv;
    std::string host = "127.0.0.1";
    std::vector<std::string> extra;  // --key value pairs a program handles itself
};

[[noreturn]] inline void die(const char* what) {
    std::perror(what);
    std::exit(1);
}

[[noreturn]] inline void die_msg(const std::string& what) {
    std::fprintf(stderr, "pingpong: %s\n", what.c_str());
    std::exit(1);
}

inline size_t iters_for(const Options& o, size_t size) {
    if (o.budget == 0) return o.iters;
    return std::clamp(o.budget / size, std::min(o.min_iters, o.iters), o.iters);
}

inline size_t warmup_for(const Options& o, size_t size) {
    if (o.iters == 0) return 0;
    return std::max<size_t>(o.warmup * iters_for(o, size) / o.iters, std::min<size_t>(o.warmup, 10));
}

// "16,64,1K,1M" -> sizes; "16..1M" -> powers of four from 16 to 1 MiB.
inline size_t parse_bytes(const std::string& s) {
    size_t pos = 0;
    unsigned long long v = std::stoull(s, &pos);
    std::string suf = s.substr(pos);
    if (suf == "K" || suf == "k") v <<= 10;
    else if (suf == "M" || suf == "m") v <<= 20;
    else if (!suf.empty()) throw std::invalid_argument(s);
    return v;
}

inline std::vector<size_t> parse_sizes(const std::string& s) {
    std::vector<size_t> out;
    auto dots = s.find("..");
    if (dots != std::string::npos) {
        size_t lo = parse_bytes(s.substr(0, dots)), hi = parse_bytes(s.substr(dots + 2));
        for (size_t v = lo; v <= hi && v > 0; v *= 4) out.push_back(v);
        return out;
    }
    std::stringstream in(s);
    std::string f;
    while (std::getline(in, f, ',')) out.push_back(parse_bytes(f));
    return out;
}

// Parses "--key value" pairs from argv[from]; keys a program handles itself go to extra.
inline Options parse_options(int argc, char** argv, int from, const std::vector<std::string>& own_keys) {
    Options o;
    for (int i = from; i < argc; i += 2) {
        std::string k = argv[i];
        if (i + 1 >= argc) die_msg("option " + k + " needs a value");
        std::string v = argv[i + 1];
        try {
            if (k == "--size" || k == "--sizes") o.sizes = parse_sizes(v);
            else if (k == "--iters") o.iters = std::stoul(v);
            else if (k == "--warmup") o.warmup = std::stoul(v);
            else if (k == "--warmup-ms") o.warmup_ms = static_cast<unsigned>(std::stoul(v));
            else if (k == "--budget") o.budget = parse_bytes(v);
            else if (k == "--min-iters") o.min_iters = std::stoul(v);
            else if (k == "--modes") o.modes = v;
            else if (k == "--csv") o.csv = v;
            else if (k == "--host") o.host = v;
            else if (std::find(own_keys.begin(), own_keys.end(), k) != own_keys.end()) {
                o.extra.push_back(k);
                o.extra.push_back(v);
            } else {
                die_msg("unknown option " + k);
            }
        } catch (const std::exception&) {
            die_msg("bad value '" + v + "' for " + k);
        }
    }
    if (o.sizes.empty() || o.iters == 0) die_msg("--size and --iters must be positive");
    for (size_t s : o.sizes)
        if (s == 0 || s > (64u << 20)) die_msg("sizes must be 1 B .. 64 MiB");
    return o;
}

inline std::string extra_option(const Options& o, const std::string& key, const std::string& def) {
    for (size_t i = 0; i + 1 < o.extra.size(); i += 2)
        if (o.extra[i] == key) return o.extra[i + 1];
    return def;
}

inline std::vector<std::string> split_modes(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    std::string m;
    while (std::getline(in, m, ',')) out.push_back(m);
    return out;
}

// ---------------------------------------------------------------- sockets

inline void full_write(int fd, const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    while (n > 0) {
        ssize_t w = ::write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("write");
        b += w;
        n -= static_cast<size_t>(w);
    }
}

// PINGPONG_WAIT=poll: every read waits in poll() first, as libpq does
// (pqSocketPoll); epoll: in epoll_wait on a set holding the socket, as an event
// loop does. Unset: the read itself waits.
enum class WaitBy { read, poll, epoll };
inline WaitBy wait_by() {
    static const WaitBy w = [] {
        const char* e = std::getenv("PINGPONG_WAIT");
        if (!e || !*e || std::strcmp(e, "read") == 0) return WaitBy::read;
        if (std::strcmp(e, "poll") == 0) return WaitBy::poll;
        if (std::strcmp(e, "epoll") == 0) return WaitBy::epoll;
        std::fprintf(stderr, "PINGPONG_WAIT=%s: expected read, poll or epoll\n", e);
        std::exit(2);
    }();
    return w;
}

inline void wait_readable(int fd) {
    if (wait_by() == WaitBy::poll) {
        pollfd p{fd, POLLIN, 0};
        while (poll(&p, 1, -1) < 0 && errno == EINTR) {
        }
        return;
    }
    static int ep = -1, ep_fd = -1;  // one connection per process in every mode
    if (ep_fd != fd) {
        if (ep < 0) ep = epoll_create1(EPOLL_CLOEXEC);
        epoll_event ev{EPOLLIN, {}};
        ev.data.fd = fd;
        if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll");
        ep_fd = fd;
    }
    epoll_event got;
    while (epoll_wait(ep, &got, 1, -1) < 0 && errno == EINTR) {
    }
}

inline bool full_read(int fd, void* p, size_t n) {
    auto* b = static_cast<uint8_t*>(p);
    while (n > 0) {
        if (wait_by() != WaitBy::read) wait_readable(fd);
        ssize_t r = ::read(fd, b, n);
        if (r == 0) return false;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) die("read");
        b += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

inline void echo_fd(int fd, size_t size) {
    std::vector<uint8_t> buf(size);
    while (full_read(fd, buf.data(), size)) full_write(fd, buf.data(), size);
}

inline void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

inline int tcp_listen(uint16_t port, uint16_t* bound) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0) die("socket");
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

// Retries for a few seconds: the server may still be starting.
inline int tcp_connect(const std::string& host, uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) die_msg("not an IPv4 address: " + host);
    for (int i = 0;; ++i) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (c < 0) die("socket");
        if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
            set_nodelay(c);
            return c;
        }
        close(c);
        if (i > 500) die("connect");
        usleep(10000);
    }
}

inline int tcp_accept(int l) {
    int s = accept(l, nullptr, nullptr);
    if (s < 0) die("accept");
    set_nodelay(s);
    return s;
}

// A port that was free a moment ago (for a server in another process).
inline uint16_t free_port() {
    uint16_t port = 0;
    close(tcp_listen(0, &port));
    return port;
}

// ---------------------------------------------------------------- timing

inline Cpu cpu_of(const rusage& r) {
    return {static_cast<double>(r.ru_utime.tv_sec) + static_cast<double>(r.ru_utime.tv_usec) / 1e6,
            static_cast<double>(r.ru_stime.tv_sec) + static_cast<double>(r.ru_stime.tv_usec) / 1e6};
}

inline Cpu self_cpu() {
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return cpu_of(r);
}

// Warm-up, then `iters` timed round trips: per-trip nanoseconds, wall time and
// this process's CPU time over the timed part.
struct Timed {
    size_t warmed = 0;  // warm-up round trips made (more than asked with warmup_ms)
    std::vector<double> ns;
    double wall = 0;
    Cpu cpu;
};

inline Timed time_round_trips(size_t iters, size_t warmup, const std::function<void()>& rt, unsigned warmup_ms = 0) {
    const auto warm_until = Clock::now() + std::chrono::milliseconds(warmup_ms);
    Timed t;
    for (; t.warmed < warmup || Clock::now() < warm_until; ++t.warmed) rt();
    t.ns.resize(iters);
    Cpu before = self_cpu();
    auto start = Clock::now();
    for (size_t i = 0; i < iters; ++i) {
        auto t0 = Clock::now();
        rt();
        t.ns[i] = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    }
    t.wall = std::chrono::duration<double>(Clock::now() - start).count();
    Cpu after = self_cpu();
    t.cpu = {after.user - before.user, after.sys - before.sys};
    return t;
}

// The peer's CPU covers its setup and the warm-up too: count the timed share only.
inline Cpu add_peer_cpu(Cpu self, Cpu peer, size_t iters, size_t warmup) {
    double share = static_cast<double>(iters) / static_cast<double>(iters + warmup);
    return {self.user + peer.user * share, self.sys + peer.sys * share};
}

// The two ends of one ping-pong in two processes: `echo` runs in a forked child
// (which dies with us), `setup` then the timed `client_rt` here, `finish` tells
// the child to stop. Returns a failed row when the child did not exit cleanly.
struct PairRun {
    std::function<void()> echo;
    std::function<void()> setup;
    std::function<void()> client_rt;
    std::function<void()> finish;
};

inline Summary measure(const std::string& mode, size_t size, size_t iters, size_t warmup, const PairRun& p) {
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        p.echo();
        _exit(0);
    }
    if (p.setup) p.setup();
    Timed t = time_round_trips(iters, warmup, p.client_rt);
    if (p.finish) p.finish();
    int status = 0;
    rusage child{};
    wait4(pid, &status, 0, &child);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "pingpong: %s: the echo process failed (status %d)\n", mode.c_str(), status);
        return failed(mode, size);
    }
    return summarize(mode, size, std::move(t.ns), t.wall, add_peer_cpu(t.cpu, cpu_of(child), iters, warmup));
}

// ---------------------------------------------------------------- preloaded runs

// Descriptors of this process that are open on /dev/infiniband/* (rsocket holds some).
inline int infiniband_fds() {
    int n = 0;
    DIR* d = opendir("/proc/self/fd");
    if (!d) return 0;
    while (dirent* e = readdir(d)) {
        char link[512] = {};
        std::string p = std::string("/proc/self/fd/") + e->d_name;
        if (readlink(p.c_str(), link, sizeof link - 1) > 0 && std::strncmp(link, "/dev/infiniband/", 16) == 0) ++n;
    }
    closedir(d);
    return n;
}

// `prog serve PORT SIZE`: a plain TCP echo server (for runs under LD_PRELOAD).
inline int serve_main(int argc, char** argv) {
    if (argc < 4) die_msg("usage: serve PORT SIZE");
    int l = tcp_listen(static_cast<uint16_t>(std::stoi(argv[2])), nullptr);
    int s = tcp_accept(l);
    close(l);
    echo_fd(s, std::stoul(argv[3]));
    close(s);
    return 0;
}

// `prog connect HOST PORT --size N --iters N --warmup N --label L`: a plain TCP
// client; prints one CSV line (csv_line) and "ibfds,N".
inline int connect_main(int argc, char** argv) {
    if (argc < 4) die_msg("usage: connect HOST PORT [options]");
    Options o = parse_options(argc, argv, 4, {"--label"});
    std::string label = extra_option(o, "--label", "tcp");
    size_t size = o.sizes.front();
    int c = tcp_connect(argv[2], static_cast<uint16_t>(std::stoi(argv[3])));
    std::vector<uint8_t> buf(size, 'x');
    auto rt = [&] {
        full_write(c, buf.data(), size);
        if (!full_read(c, buf.data(), size)) die_msg("peer closed");
    };
    Timed t = time_round_trips(o.iters, o.warmup, rt, o.warmup_ms);
    int ib = infiniband_fds();
    close(c);
    auto s = summarize(label, size, std::move(t.ns), t.wall, t.cpu);
    std::printf("%sibfds,%d\nwarmed,%zu\n", csv_line(s).c_str(), ib, t.warmed);
    return 0;
}

// Checks on a preloaded run: a substring its stderr must hold (e.g. the shim's
// "transport=shm" stats line), and whether it must hold /dev/infiniband fds.
struct PreloadCheck {
    std::string stderr_must_hold;
    bool needs_infiniband = false;
};

// The same program's serve/connect pair, both under LD_PRELOAD=lib (plus `env`,
// "K=V" entries; `client_env` for the client only), as an unmodified program
// would run. CPU: both processes.

inline Summary run_preloaded(const std::string& self, const std::string& lib, const std::string& label,
                             const std::string& host, size_t size, size_t iters, size_t warmup,
                             const std::vector<std::string>& env, const std::vector<std::string>& client_env,
                             const PreloadCheck& check) {
    std::string port = std::to_string(free_port());
    std::string sz = std::to_string(size);
    auto child_env = [&] {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        setenv("LD_PRELOAD", lib.c_str(), 1);
        for (const auto& kv : env) putenv(strdup(kv.c_str()));
    };
    std::fflush(nullptr);
    pid_t server = fork();
    if (server < 0) die("fork");
    if (server == 0) {
        child_env();
        execl(self.c_str(), self.c_str(), "serve", port.c_str(), sz.c_str(), nullptr);
        _exit(127);
    }
    char errpath[] = "/tmp/pingpong-stderr.XXXXXX";
    int errfd = mkstemp(errpath);
    int out[2];
    if (errfd < 0 || pipe(out) != 0) die("mkstemp/pipe");
    pid_t client = fork();
    if (client < 0) die("fork");
    if (client == 0) {
        child_env();
        for (const auto& kv : client_env) putenv(strdup(kv.c_str()));
        dup2(out[1], 1);
        dup2(errfd, 2);
        close(out[0]);
        std::string it = std::to_string(iters), wu = std::to_string(warmup), wms = std::to_string(kShimWarmupMs);
        execl(self.c_str(), self.c_str(), "connect", host.c_str(), port.c_str(), "--size", sz.c_str(), "--iters",
              it.c_str(), "--warmup", wu.c_str(), "--warmup-ms", wms.c_str(), "--label", label.c_str(), nullptr);
        _exit(127);
    }
    close(out[1]);
    std::string text;
    char buf[1024];
    for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
    close(out[0]);
    int cst = 0, sst = 0;
    rusage srv{};
    waitpid(client, &cst, 0);
    if (!WIFEXITED(cst) || WEXITSTATUS(cst) != 0) kill(server, SIGKILL);
    wait4(server, &sst, 0, &srv);
    std::ifstream ef(errpath);
    std::string errtext((std::istreambuf_iterator<char>(ef)), std::istreambuf_iterator<char>());
    unlink(errpath);
    close(errfd);

    Summary s;
    std::string problem;
    auto nl = text.find('\n');
    int ib = 0;
    if (!WIFEXITED(cst) || WEXITSTATUS(cst) != 0 || nl == std::string::npos || !parse_csv_line(text.substr(0, nl), s))
        problem = "the client failed";
    else if (std::sscanf(text.c_str() + nl + 1, "ibfds,%d", &ib) != 1)
        problem = "no ibfds line from the client";
    else if (!check.stderr_must_hold.empty() && errtext.find(check.stderr_must_hold) == std::string::npos)
        problem = "the client's stderr lacks '" + check.stderr_must_hold + "' (fell back?)";
    else if (check.needs_infiniband && ib == 0)
        problem = "the client held no /dev/infiniband descriptor: " + lib + " fell back to kernel TCP";
    if (!problem.empty()) {
        std::fprintf(stderr, "pingpong: %s: %s; its stderr:\n%s", label.c_str(), problem.c_str(), errtext.c_str());
        return failed(label, size);
    }
    // The wait policy's decision (cpu_load.hpp): waits that slept at once on a busy machine.
    if (auto at = errtext.rfind("busy_skips="); at != std::string::npos)
        std::fprintf(stderr, "pingpong: %s: client waits that skipped the spin (more runnable threads than CPUs): %s\n",
                     label.c_str(), errtext.substr(at + 11, errtext.find_first_not_of("0123456789", at + 11) - at - 11).c_str());
    Cpu client_cpu{s.cpu_user_us_per_rt * static_cast<double>(s.iters) / 1e6,
                   s.cpu_sys_us_per_rt * static_cast<double>(s.iters) / 1e6};
    // The server echoed every warm-up round trip the client made, not only those asked.
    size_t warmed = warmup;
    if (auto at = text.find("warmed,"); at != std::string::npos) warmed = std::strtoul(text.c_str() + at + 7, nullptr, 10);
    Cpu both = add_peer_cpu(client_cpu, cpu_of(srv), iters, warmed);
    s.cpu_user_us_per_rt = both.user * 1e6 / static_cast<double>(s.iters);
    s.cpu_sys_us_per_rt = both.sys * 1e6 / static_cast<double>(s.iters);
    return s;
}

// Absolute path of `name` next to this program, or "" when absent.
inline std::string next_to_self(const char* argv0, const std::string& name) {
    std::string s = argv0;
    auto slash = s.rfind('/');
    std::string dir = slash == std::string::npos ? "." : s.substr(0, slash);
    char buf[4096];
    return realpath((dir + "/" + name).c_str(), buf) ? buf : "";
}

inline std::string self_path() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) die("readlink /proc/self/exe");
    return std::string(buf, static_cast<size_t>(n));
}

// Runs every (size, mode) point, printing progress on stderr; then the table and the CSV.
inline int run_points(const Options& o, const std::vector<std::string>& modes, const char* prog,
                      const std::function<Summary(const std::string&, size_t, size_t, size_t)>& one,
                      std::vector<Summary>* rows_out = nullptr) {
    std::vector<Summary> rows;
    const size_t total = modes.size() * o.sizes.size();
    size_t k = 0;
    for (size_t size : o.sizes) {
        for (const auto& m : modes) {
            size_t iters = iters_for(o, size), warmup = warmup_for(o, size);
            std::fprintf(stderr, "%s: [%zu/%zu] %s, %zu B: %zu round trips (+%zu warm-up)...", prog, ++k, total,
                         m.c_str(), size, iters, warmup);
            auto t0 = Clock::now();
            Summary s = one(m, size, iters, warmup);
            double secs = std::chrono::duration<double>(Clock::now() - t0).count();
            if (s.ok) std::fprintf(stderr, " p50 %.2f us (%.1f s)\n", s.p50_us, secs);
            else std::fprintf(stderr, " FAILED\n");
            rows.push_back(std::move(s));
        }
    }
    print_table(rows, "tcp");
    if (!o.csv.empty()) write_csv(rows, o.csv);
    int rc = 0;
    for (const auto& r : rows)
        if (!r.ok) rc = 1;
    if (rows_out) *rows_out = std::move(rows);
    return rc;
}

}  // namespace rdmasock::bench
