// epoll reports a registered fd at most once per call (issue 36). A client
// registers its connection (EPOLLIN, level- or edge-triggered), sends a
// request, reads the answer, sends a second one; the server (a forked process
// or a thread of this one) answers with three 300-byte sends 20 ms apart while
// the client is not reading (it waits on a pipe the server writes when done).
// Then the client looks with epoll_wait(..., 0), with maxevents 2 beside an
// always-readable pipe (a duplicate would take the pipe's slot), and with
// timeout -1. Every entry of every call is printed (fd names, not numbers);
// any fd twice in one call is a FAILED line. Run over plain TCP and shimmed,
// the transcripts must be equal.
#include <cstdlib>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "check_common.hpp"

namespace {

constexpr int kConns = 8;
constexpr int kChunk = 300;
constexpr int kChunks = 3;

void read_full(int fd, void* p, size_t n) {
    auto* b = static_cast<char*>(p);
    while (n > 0) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) check::die("read");
        b += r, n -= static_cast<size_t>(r);
    }
}

void write_full(int fd, const void* p, size_t n) {
    auto* b = static_cast<const char*>(p);
    while (n > 0) {
        ssize_t r = write(fd, b, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) check::die("write");
        b += r, n -= static_cast<size_t>(r);
    }
}

// The server: per connection, first a burst if `speaks_first`, then per
// 4-byte command: "req1" is answered "ans1", "burs" with three 300-byte sends
// 20 ms apart and a byte to `done` after them, "nop1" with nothing. (The gaps
// shape the traffic; nothing measures them.)
void burst(int s, int done) {
    for (int c = 0; c < kChunks; ++c) {
        if (c) usleep(20000);
        char chunk[kChunk];
        std::memset(chunk, 'a' + c, sizeof chunk);
        if (send(s, chunk, sizeof chunk, 0) != kChunk) check::die("server send");
    }
    write_full(done, "d", 1);
}

// The server's `done` byte leaves after its last send returned, which is not
// when that send's bytes reached us: on a busy machine loopback delivers them
// later (softirq), and over TCP that late arrival is one more edge than the
// transcript of an idle machine shows. So every look waits until all `n` are here.
void wait_arrived(int c, int n) {
    for (int i = 0; i < 60000; ++i) {
        int q = 0;
        if (ioctl(c, FIONREAD, &q) == 0 && q >= n) return;
        usleep(1000);
    }
    check::die("the burst did not arrive");
}

void serve(int l, int done, bool speaks_first) {
    for (int i = 0; i < kConns; ++i) {
        int s = accept(l, nullptr, nullptr);
        if (s < 0) check::die("accept");
        if (speaks_first) burst(s, done);
        for (;;) {
            char req[4];
            ssize_t r = recv(s, req, 4, MSG_WAITALL);
            if (r == 0) break;
            if (r != 4) check::die("server recv");
            if (!std::memcmp(req, "req1", 4)) write_full(s, "ans1", 4);
            else if (!std::memcmp(req, "burs", 4)) burst(s, done);
        }
        close(s);
    }
}

struct ServerArgs {
    int l, done;
    bool speaks_first;
};

void* server_thread(void* p) {
    auto* a = static_cast<ServerArgs*>(p);
    serve(a->l, a->done, a->speaks_first);
    return nullptr;
}

// One call's entries, by name, sorted (the kernel's order is not the contract);
// an fd twice is a failure line of its own.
std::string look(int ep, int max, int timeout, int conn, int extra) {
    std::vector<epoll_event> ev(static_cast<size_t>(max));
    int n;
    do n = epoll_wait(ep, ev.data(), max, timeout);
    while (n < 0 && errno == EINTR);
    if (n < 0) check::die("epoll_wait");
    std::vector<std::string> names;
    std::vector<int> seen;
    std::string dup;
    for (int i = 0; i < n; ++i) {
        int fd = ev[static_cast<size_t>(i)].data.fd;
        if (std::count(seen.begin(), seen.end(), fd)) dup += " FAILED: fd listed twice in one call";
        seen.push_back(fd);
        std::string name = fd == conn ? "conn" : fd == extra ? "pipe" : "other";
        uint32_t e = ev[static_cast<size_t>(i)].events;
        name += e & EPOLLIN ? ":IN" : "";
        name += e & EPOLLOUT ? ":OUT" : "";
        name += e & EPOLLHUP ? ":HUP" : "";
        name += e & EPOLLERR ? ":ERR" : "";
        names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    std::string out = "[";
    for (auto& s : names) out += (out.size() > 1 ? " " : "") + s;
    return out + "]" + dup;
}

void client(int port, bool et, bool speaks_first, int done, const char* label) {
    int extra[2];
    if (pipe(extra) != 0) check::die("pipe");
    write_full(extra[1], "x", 1);  // always readable
    for (int i = 0; i < kConns; ++i) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (const char* addr = std::getenv("CHECK_ADDR"); addr && *addr) inet_pton(AF_INET, addr, &a.sin_addr);
        if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) check::die("connect");
        int ep = epoll_create1(0);
        epoll_event e{};
        e.events = EPOLLIN | (et ? EPOLLET : 0u);
        e.data.fd = c;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &e) != 0) check::die("epoll_ctl");
        std::string t = std::string(label) + " conn " + std::to_string(i) + ":";
        char d;
        if (!speaks_first) {
            write_full(c, "req1", 4);
            t += " answer " + look(ep, 8, -1, c, extra[0]);
            char ans[4];
            read_full(c, ans, 4);
            // The burst, while this side does not read.
            write_full(c, "burs", 4);
            read_full(done, &d, 1);
            wait_arrived(c, kChunk * kChunks);
        } else {
            // The server's burst came first (the same-host switch may still be under
            // way); this side sends before it reads.
            read_full(done, &d, 1);
            wait_arrived(c, kChunk * kChunks);
            write_full(c, "nop1", 4);
        }
        // Odd connections look first with maxevents 2 beside the readable pipe: a
        // duplicate of the connection would take the pipe's slot.
        const bool pipe_first = i % 2;
        if (!pipe_first) t += " wait0 " + look(ep, 8, 0, c, extra[0]);
        e.events = EPOLLIN;  // the pipe is level-triggered in both modes
        e.data.fd = extra[0];
        if (epoll_ctl(ep, EPOLL_CTL_ADD, extra[0], &e) != 0) check::die("epoll_ctl pipe");
        t += " max2 " + look(ep, 2, 0, c, extra[0]);
        if (epoll_ctl(ep, EPOLL_CTL_DEL, extra[0], nullptr) != 0) check::die("epoll_ctl del");
        if (pipe_first) t += " wait0 " + look(ep, 8, 0, c, extra[0]);
        if (!et) {
            t += " wait-1 " + look(ep, 8, -1, c, extra[0]);
        } else {
            // Edge-triggered: -1 needs a new edge; a second burst brings it.
            write_full(c, "burs", 4);
            t += " wait-1 " + look(ep, 8, -1, c, extra[0]);
            read_full(done, &d, 1);
        }
        std::vector<char> got(static_cast<size_t>(kChunk * kChunks * (et ? 2 : 1)));
        read_full(c, got.data(), got.size());
        for (size_t k = 0; k < got.size(); ++k)
            if (got[k] != 'a' + static_cast<int>(k / kChunk) % kChunks) check::die("wrong bytes");
        t += " read " + std::to_string(got.size());
        // Two more exchanges: both ends finish the switch to the rings, so the
        // shimmed run can show that it ran on shm.
        for (int r = 0; r < 2; ++r) {
            char ans[4];
            write_full(c, "req1", 4);
            read_full(c, ans, 4);
        }
        std::printf("%s\n", t.c_str());
        std::fflush(stdout);
        close(ep);
        close(c);
    }
    close(extra[0]);
    close(extra[1]);
}

}  // namespace

int main() {
    for (bool speaks_first : {false, true})
    for (bool et : {false, true}) {
        // Server first with EPOLLET: the second burst lands in the ring while the
        // reader is still behind the first one's TCP bytes; over TCP that is an
        // edge, and so it must be here (Connection::arrivals).
        for (bool forked : {true, false}) {
            std::string label = std::string(speaks_first ? "server first, " : "client first, ") + (et ? "ET" : "LT") +
                                (forked ? " forked" : " thread");
            sockaddr_in a;
            int l = check::listen_local(a);
            int port = ntohs(a.sin_port);
            int done[2];
            if (pipe(done) != 0) check::die("pipe");
            if (forked) {
                std::fflush(stdout);
                pid_t pid = fork();
                if (pid < 0) check::die("fork");
                if (pid == 0) {
                    close(done[0]);
                    serve(l, done[1], speaks_first);
                    _exit(0);
                }
                close(l);
                close(done[1]);
                client(port, et, speaks_first, done[0], label.c_str());
                int st = 0;
                waitpid(pid, &st, 0);
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) std::printf("FAILED: server exited %d\n", st);
                close(done[0]);
            } else {
                ServerArgs args{l, done[1], speaks_first};
                pthread_t th;
                if (pthread_create(&th, nullptr, server_thread, &args) != 0) check::die("pthread_create");
                client(port, et, speaks_first, done[0], label.c_str());
                pthread_join(th, nullptr);
                close(l);
                close(done[0]);
                close(done[1]);
            }
        }
    }
    std::printf("done\n");
    return 0;
}
