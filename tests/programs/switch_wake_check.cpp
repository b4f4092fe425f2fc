// A thread asleep waiting to read a socket while another thread of the same
// process makes the call that completes the same-host switch to the rings;
// the peer's next bytes then arrive on the ring (issue 36). Over TCP the
// waiter wakes at once; before the fix a waiter that began under the
// rendezvous slept on the TCP socket alone and never woke.
//
//   switch_wake_check [ITERATIONS [SIDE MODE]]   (SIDE, MODE: run only that case)
//
// Each case is one connection (a forked server process, this process the
// client). The waiter waits with one of: poll(-1), ppoll, select, epoll_wait(-1)
// level, edge and oneshot, poll with a timeout then recv (Python's settimeout),
// SO_RCVTIMEO, a plain blocking recv. It sits either in the client (the other
// thread's send hands the rings over; the server answers on the ring) or in the
// server (the other thread's send completes the server's switch; the client's
// request comes on the ring). Prints one line per case; a waiter that does not
// wake within a generous bound (a liveness bound, not a timing check) ends the
// run with a FAILED line.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check_common.hpp"

namespace {

constexpr int kMsg = 16;             // every message: 16 bytes, zero padded
constexpr int kLivenessSec = 30;     // a waiter that slept this long never woke
constexpr int kPings = 3;            // after the case: the connection goes on (and ends on the ring)
constexpr useconds_t kSettleUs = 30000;  // lets the waiter fall asleep first (the bug's window)

const char* const kModes[] = {"poll", "ppoll", "select", "epoll-lt", "epoll-et", "epoll-oneshot", "epoll-polled",
                              "timed-poll", "rcvtimeo", "recv"};
const char* const kSides[] = {"client", "server"};

std::string msg(const char* tag, int i) {
    char b[kMsg + 1] = {};
    std::snprintf(b, sizeof b, "%s-%d", tag, i);
    return std::string(b, kMsg);
}

std::string shown(const std::string& s) { return std::string(s.c_str()); }

void send_all(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n <= 0) check::die("send");
        off += static_cast<size_t>(n);
    }
}

std::string recv_exact(int fd) {
    std::string s(kMsg, '\0');
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = recv(fd, &s[off], s.size() - off, 0);
        if (n <= 0) check::die("recv");
        off += static_cast<size_t>(n);
    }
    return s;
}

void pipe_put(int fd) {
    char c = 'x';
    if (write(fd, &c, 1) != 1) check::die("pipe write");
}

void pipe_get(int fd) {
    char c;
    if (read(fd, &c, 1) != 1) check::die("pipe read");
}

// ---------------------------------------------------------------- the waiter

struct Waiter {
    int fd;
    std::string mode;
    std::string got;
    std::string error;
    bool done = false;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
};

// Waits with the mode's call until the socket is readable; "" or what failed.
std::string wait_readable(Waiter& w, int ep) {
    const int fd = w.fd;
    const std::string& m = w.mode;
    if (m == "poll" || m == "timed-poll") {
        pollfd p{fd, POLLIN, 0};
        int rc = poll(&p, 1, m == "poll" ? -1 : kLivenessSec * 2 * 1000);
        if (rc == 0) return "poll timed out";
        return rc == 1 && (p.revents & POLLIN) ? "" : "poll failed";
    }
    if (m == "ppoll") {
        pollfd p{fd, POLLIN, 0};
        int rc = ppoll(&p, 1, nullptr, nullptr);
        return rc == 1 && (p.revents & POLLIN) ? "" : "ppoll failed";
    }
    if (m == "select") {
        fd_set r;
        FD_ZERO(&r);
        FD_SET(fd, &r);
        int rc = select(fd + 1, &r, nullptr, nullptr, nullptr);
        return rc == 1 && FD_ISSET(fd, &r) ? "" : "select failed";
    }
    if (m.rfind("epoll", 0) == 0) {
        // epoll-polled: the set's own fd waited on with poll, as an event loop
        // nests a set (the shim exposes the set first), then asked without waiting.
        if (m == "epoll-polled") {
            pollfd p{ep, POLLIN, 0};
            if (poll(&p, 1, -1) != 1 || !(p.revents & POLLIN)) return "poll of the epoll fd failed";
        }
        epoll_event ev{};
        int rc = epoll_wait(ep, &ev, 1, m == "epoll-polled" ? 0 : -1);
        if (rc != 1 || !(ev.events & EPOLLIN) || ev.data.u32 != 7) return "epoll_wait failed";
        if (m == "epoll-oneshot") {
            epoll_event again{EPOLLIN | EPOLLONESHOT, {}};
            again.data.u32 = 7;
            if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &again) != 0) return "epoll_ctl MOD failed";
        }
        return "";
    }
    return "";  // rcvtimeo, recv: the recv itself waits
}

void* waiter_main(void* arg) {
    auto& w = *static_cast<Waiter*>(arg);
    int ep = -1;
    if (w.mode.rfind("epoll", 0) == 0) {
        ep = epoll_create1(0);
        epoll_event ev{EPOLLIN, {}};
        if (w.mode == "epoll-et") ev.events |= EPOLLET;
        if (w.mode == "epoll-oneshot") ev.events |= EPOLLONESHOT;
        ev.data.u32 = 7;
        if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, w.fd, &ev) != 0) w.error = "epoll setup failed";
    }
    if (w.mode == "rcvtimeo") {
        timeval tv{kLivenessSec * 2, 0};
        if (setsockopt(w.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) w.error = "SO_RCVTIMEO failed";
    }
    std::string got;
    const bool waits_in_recv = w.mode == "rcvtimeo" || w.mode == "recv";
    while (w.error.empty() && got.size() < kMsg) {
        std::string e = wait_readable(w, ep);
        if (!e.empty()) {
            w.error = e;
            break;
        }
        char b[kMsg];
        ssize_t n = recv(w.fd, b, kMsg - got.size(), waits_in_recv ? 0 : MSG_DONTWAIT);
        if (n > 0) {
            got.append(b, static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            // Edge-triggered: only new bytes wake it again, and there are none here.
            if (w.mode == "epoll-et") continue;
            if (waits_in_recv) w.error = "recv timed out";
            continue;
        }
        w.error = n == 0 ? "EOF" : std::string("recv: ") + strerror(errno);
    }
    if (ep >= 0) close(ep);
    pthread_mutex_lock(&w.mu);
    w.got = got;
    w.done = true;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    return nullptr;
}

// Waits for the waiter, at most kLivenessSec; a waiter that never woke ends the run.
std::string join_waiter(Waiter& w, pthread_t t, const char* where) {
    timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += kLivenessSec;
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        if (pthread_cond_timedwait(&w.cv, &w.mu, &until) == ETIMEDOUT) break;
    const bool done = w.done;
    pthread_mutex_unlock(&w.mu);
    if (!done) {
        std::printf("FAILED: %s: the %s waiter never woke\n", where, w.mode.c_str());
        std::fflush(stdout);
        _exit(3);
    }
    pthread_join(t, nullptr);
    if (!w.error.empty()) return "error " + w.error;
    return shown(w.got);
}

void ping_pong_client(int fd) {
    for (int i = 0; i < kPings; ++i) {
        send_all(fd, msg("ping", i));
        if (recv_exact(fd) != msg("pong", i)) check::die("pong");
    }
}

void ping_pong_server(int fd) {
    for (int i = 0;; ++i) {
        char b[kMsg];
        size_t off = 0;
        while (off < kMsg) {
            ssize_t n = recv(fd, b + off, kMsg - off, 0);
            if (n == 0 && off == 0) return;
            if (n <= 0) check::die("server ping");
            off += static_cast<size_t>(n);
        }
        send_all(fd, msg("pong", i));
    }
}

// ---------------------------------------------------------------- the two roles

// Waiter in the client: the server offers first (a recv that finds nothing), so
// the client's send hands the rings over; the server answers on the ring.
void server_for_client_waiter(int c, int to_client, int i) {
    char b;
    if (recv(c, &b, 1, MSG_DONTWAIT) != -1 || (errno != EAGAIN && errno != EWOULDBLOCK)) check::die("first recv");
    pipe_put(to_client);
    if (recv_exact(c) != msg("request", i)) check::die("request");
    send_all(c, msg("answer", i));
    ping_pong_server(c);
}

std::string client_waiter(int s, const std::string& mode, int from_server, int i) {
    Waiter w{s, mode};
    pthread_t t;
    pthread_create(&t, nullptr, waiter_main, &w);
    pipe_get(from_server);  // the server has offered
    usleep(kSettleUs);
    send_all(s, msg("request", i));
    std::string got = join_waiter(w, t, "client");
    if (got.rfind("error ", 0) == 0) return got;  // the answer may be unread: no ping-pong, the transcript says why
    ping_pong_client(s);
    return got;
}

// Waiter in the server: the server's greeting offers, the client's read of it
// hands the rings over, and the server's next send (another thread's) switches;
// the client's request then comes on the ring.
void server_waiter(int c, const std::string& mode, int from_client, int i) {
    Waiter w{c, mode};
    pthread_t t;
    pthread_create(&t, nullptr, waiter_main, &w);
    send_all(c, msg("greeting", i));
    pipe_get(from_client);  // the client has read it
    usleep(kSettleUs);
    send_all(c, msg("go", i));
    std::string got = join_waiter(w, t, "server");
    std::string g = ("got " + got).substr(0, kMsg);
    g.resize(kMsg, '\0');
    send_all(c, g);
    ping_pong_server(c);
}

std::string client_for_server_waiter(int s, int to_server, int i) {
    if (recv_exact(s) != msg("greeting", i)) check::die("greeting");
    pipe_put(to_server);
    if (recv_exact(s) != msg("go", i)) check::die("go");
    send_all(s, msg("request", i));
    std::string got = shown(recv_exact(s));
    ping_pong_client(s);
    return got;
}

}  // namespace

int main(int argc, char** argv) {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 3;
    auto wanted = [&](const char* side, const char* mode) {
        return argc < 4 || (std::strcmp(argv[2], side) == 0 && std::strcmp(argv[3], mode) == 0);
    };
    signal(SIGPIPE, SIG_IGN);
    int s2c[2], c2s[2], port_pipe[2];
    if (pipe(s2c) != 0 || pipe(c2s) != 0 || pipe(port_pipe) != 0) check::die("pipe");
    std::fflush(stdout);
    pid_t server = fork();
    if (server < 0) check::die("fork");
    if (server == 0) {
        sockaddr_in a;
        int l = check::listen_local(a);
        if (write(port_pipe[1], &a, sizeof a) != sizeof a) check::die("port");
        for (const char* side : kSides)
            for (const char* mode : kModes)
                for (int i = 0; i < iterations && wanted(side, mode); ++i) {
                    int c = accept(l, nullptr, nullptr);
                    if (c < 0) check::die("accept");
                    if (std::strcmp(side, "client") == 0) server_for_client_waiter(c, s2c[1], i);
                    else server_waiter(c, mode, c2s[0], i);
                    close(c);
                }
        close(l);
        _exit(0);
    }
    sockaddr_in a;
    if (read(port_pipe[0], &a, sizeof a) != sizeof a) check::die("port");
    for (const char* side : kSides)
        for (const char* mode : kModes)
            for (int i = 0; i < iterations && wanted(side, mode); ++i) {
                int s = socket(AF_INET, SOCK_STREAM, 0);
                if (s < 0 || connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) check::die("connect");
                std::string got = std::strcmp(side, "client") == 0 ? client_waiter(s, mode, s2c[0], i)
                                                                   : client_for_server_waiter(s, c2s[1], i);
                std::printf("waiter in %s, %s, #%d: %s\n", side, mode, i, got.c_str());
                std::fflush(stdout);
                close(s);
            }
    int st = 0;
    waitpid(server, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        std::printf("FAILED: the server exited with status %d\n", st);
        return 1;
    }
    std::printf("done\n");
    return 0;
}
