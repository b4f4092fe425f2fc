// A signal handler that uses the socket its own thread is blocked on: sends
// on it, shuts it down or closes it, while the thread waits in recv, send,
// poll or epoll_wait; and a close from another thread while a recv waits.
// The kernel runs a handler only once the interrupted system call has left
// the socket, so none of this can deadlock over TCP, and a restarted call
// looks its fd number up again. Prints what the program saw; the
// integration test (signal_handler_io.sh) requires the same output over
// plain TCP and with the shim.
//
// Each case: a fresh connection to a forked server, two round trips (onto
// the shim's transport), then a timer fires SIGALRM 0.3 s into the wait.
// With HANDLER_IO_FIRST=1 in the environment, no round trips: the wait is the connection's first, while
// the shim still carries its bytes over TCP (before the switch to the rings).
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "check_common.hpp"

namespace {

int g_fd = -1;
int g_prelude = 2;  // round trips before the case (0: HANDLER_IO_FIRST=1)
char g_act = 0;  // what the handler does: s(end 2 bytes), S(end 10), h(shut both), w(shut wr), c(lose), j(ump)
volatile sig_atomic_t g_handler_rc = 0;
sigjmp_buf g_jump;

void on_alarm(int) {
    const int saved = errno;
    ssize_t r = 0;
    switch (g_act) {
        case 's': r = send(g_fd, "hb", 2, MSG_NOSIGNAL); break;
        case 'S': r = send(g_fd, "XXXXXXXXXX", 10, MSG_NOSIGNAL); break;
        case 'h': r = shutdown(g_fd, SHUT_RDWR); break;
        case 'w': r = shutdown(g_fd, SHUT_WR); break;
        case 'c': r = close(g_fd); break;
        case 'j': siglongjmp(g_jump, 1);
    }
    g_handler_rc = static_cast<sig_atomic_t>(r);
    errno = saved;
}

void arm(char act, bool restart) {
    g_act = act;
    struct sigaction sa{};
    sa.sa_handler = on_alarm;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGALRM, &sa, nullptr);
    itimerval it{};
    it.it_value.tv_usec = 300000;
    setitimer(ITIMER_REAL, &it, nullptr);
}

bool read_exactly(int fd, char* b, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t r = recv(fd, b + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += static_cast<size_t>(r);
    }
    return true;
}

// The server of one case: echo the prelude; then 'D': read nothing for 2 s,
// then count every byte to EOF and send the count; 'I': after 2 s say
// whether the client's end already ended, send "late", wait for EOF; else
// answer "ack" to each message until EOF ('M': from 1 s on, so that in the
// connection's first wait the shim's handshake is answered only after the
// handler's send began it).
void serve(int fd, char mode) {
    char buf[64];
    for (int i = 0; i < g_prelude; ++i) {
        if (!read_exactly(fd, buf, sizeof buf)) _exit(1);
        send(fd, buf, sizeof buf, MSG_NOSIGNAL);
    }
    if (mode == 'D') {
        sleep(2);
        long long n = 0;
        static char big[65536];
        for (ssize_t r; (r = recv(fd, big, sizeof big, 0)) > 0;) n += r;
        std::string s = std::to_string(n);
        send(fd, s.data(), s.size(), MSG_NOSIGNAL);
        return;
    }
    if (mode == 'N') {
        sleep(1);
        send(fd, "late", 4, MSG_NOSIGNAL);
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        send(fd, "more", 4, MSG_NOSIGNAL);
        while (k > 0) k = recv(fd, buf, sizeof buf, 0);
        return;
    }
    if (mode == 'I') {
        sleep(2);
        ssize_t k = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        std::printf("  server: before its late answer the client's end is %s\n",
                    k == 0 ? "closed" : k < 0 && errno == EAGAIN ? "open" : "odd");
        std::fflush(stdout);
        send(fd, "late", 4, MSG_NOSIGNAL);
        while (recv(fd, buf, sizeof buf, 0) > 0) {
        }
        return;
    }
    if (mode == 'M') sleep(1);
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) return;
        send(fd, "ack", 3, MSG_NOSIGNAL);
    }
}

std::string result(ssize_t r, int e) { return r < 0 ? std::string("-1 ") + strerrorname_np(e) : std::to_string(r); }

struct Case {
    char mode;
    const char* what;
};
constexpr Case kCases[] = {
    {'A', "recv waits, the handler (SA_RESTART) sends on the socket"},
    {'B', "recv waits, the handler (SA_RESTART) shuts the socket down"},
    {'C', "recv waits, the handler (no SA_RESTART) shuts the socket down"},
    {'D', "send waits on a full connection, the handler (SA_RESTART) sends 10 bytes on it"},
    {'E', "poll waits, the handler sends on the socket"},
    {'F', "recv waits, the handler (SA_RESTART) closes the socket"},
    {'G', "epoll_wait waits, the handler sends on the socket"},
    {'H', "recv waits, the handler (SA_RESTART) shuts the socket for writing"},
    {'I', "recv waits, another thread closes the socket"},
    {'J', "recv waits, the handler (no SA_RESTART) closes the socket"},
    {'K', "epoll_wait waits, the handler closes the socket"},
    {'L', "poll waits, the handler closes the socket"},
    {'M', "epoll_wait waits, the handler sends on the socket, the server reads 1 s late"},
    {'N', "recv waits, the handler siglongjmps out (a timeout); then the socket is used again"},
};

std::string run_case(int fd, char mode) {
    char buf[64];
    ssize_t r = 0;
    switch (mode) {
        case 'A': {
            arm('s', true);
            r = recv(fd, buf, sizeof buf, 0);
            const int e = errno;
            return "recv " + result(r, e) + (r > 0 ? " \"" + std::string(buf, static_cast<size_t>(r)) + "\"" : "");
        }
        case 'B': arm('h', true); r = recv(fd, buf, sizeof buf, 0); return "recv " + result(r, errno);
        case 'C': arm('h', false); r = recv(fd, buf, sizeof buf, 0); return "recv " + result(r, errno);
        case 'H': arm('w', true); r = recv(fd, buf, sizeof buf, 0); return "recv " + result(r, errno);
        case 'F': arm('c', true); r = recv(fd, buf, sizeof buf, 0); return "recv " + result(r, errno);
        case 'J': arm('c', false); r = recv(fd, buf, sizeof buf, 0); return "recv " + result(r, errno);
        case 'D': {
            arm('S', true);
            static char big[16 << 20];
            size_t total = 0;
            while (total < sizeof big) {
                ssize_t k = send(fd, big + total, sizeof big - total, 0);
                if (k < 0 && errno == EINTR) continue;
                if (k <= 0) break;
                total += static_cast<size_t>(k);
            }
            shutdown(fd, SHUT_WR);
            char count[32];
            ssize_t k = recv(fd, count, sizeof count, 0);
            return "sent " + std::to_string(total) + ", the server counted " + (k > 0 ? std::string(count, static_cast<size_t>(k)) : result(k, errno));
        }
        case 'E':
        case 'L': {
            arm(mode == 'E' ? 's' : 'c', true);
            pollfd p{fd, POLLIN, 0};
            r = poll(&p, 1, 5000);
            std::string out = "poll " + result(r, errno);
            if (mode == 'E') {
                r = recv(fd, buf, sizeof buf, 0);
                return out + ", then recv " + result(r, errno) + (r > 0 ? " \"" + std::string(buf, static_cast<size_t>(r)) + "\"" : "");
            }
            r = poll(&p, 1, 500);
            return out + ", then poll " + result(r, errno) + " revents " + std::to_string(p.revents);
        }
        case 'G':
        case 'M':
        case 'K': {
            arm(mode == 'K' ? 'c' : 's', true);
            int ep = epoll_create1(0);
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.fd = fd;
            epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
            epoll_event got{};
            r = epoll_wait(ep, &got, 1, 5000);
            std::string out = "epoll_wait " + result(r, errno);
            r = epoll_wait(ep, &got, 1, mode == 'K' ? 500 : 5000);
            out += ", then epoll_wait " + result(r, errno);
            if (mode != 'K') {
                r = recv(fd, buf, sizeof buf, 0);
                out += ", recv " + result(r, errno) + (r > 0 ? " \"" + std::string(buf, static_cast<size_t>(r)) + "\"" : "");
            }
            close(ep);
            return out;
        }
        case 'N': {
            std::string out;
            if (sigsetjmp(g_jump, 1) == 0) {
                arm('j', true);
                r = recv(fd, buf, sizeof buf, 0);
                out = "recv " + result(r, errno);
            } else {
                out = "the handler jumped out of recv";
            }
            r = recv(fd, buf, sizeof buf, 0);
            out += "; recv " + result(r, errno) + (r > 0 ? " \"" + std::string(buf, static_cast<size_t>(r)) + "\"" : "");
            r = send(fd, "x", 1, 0);
            out += "; send " + result(r, errno);
            r = recv(fd, buf, sizeof buf, 0);
            return out + "; recv " + result(r, errno) + (r > 0 ? " \"" + std::string(buf, static_cast<size_t>(r)) + "\"" : "");
        }
        case 'I': {
            std::thread t([fd] {
                usleep(300000);
                std::printf("  other thread: close %d\n", close(fd));
                std::fflush(stdout);
            });
            r = recv(fd, buf, sizeof buf, 0);
            const int e = errno;
            t.join();
            return "recv " + result(r, e) + (r > 0 ? " \"" + std::string(buf, static_cast<size_t>(r)) + "\"" : "");
        }
    }
    return "unknown case";
}

}  // namespace

int main(int argc, char** argv) {
    sockaddr_in a;
    int l = check::listen_local(a);
    if (const char* f = std::getenv("HANDLER_IO_FIRST"); f && std::strcmp(f, "1") == 0) g_prelude = 0;
    const std::string only = argc > 1 ? argv[1] : "";
    for (const Case& c : kCases) {
        if (!only.empty() && only.find(c.mode) == std::string::npos) continue;
        std::printf("%c: %s\n", c.mode, c.what);
        std::fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) check::die("fork");
        if (pid == 0) {
            int fd = accept(l, nullptr, nullptr);
            close(l);
            if (fd < 0) _exit(1);
            serve(fd, c.mode);
            _exit(0);
        }
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) check::die("connect");
        char buf[64] = {1};
        for (int i = 0; i < g_prelude; ++i)
            if (send(fd, buf, sizeof buf, 0) != static_cast<ssize_t>(sizeof buf) || !read_exactly(fd, buf, sizeof buf))
                check::die("prelude");
        g_fd = fd;
        g_handler_rc = 0;
        const std::string saw = run_case(fd, c.mode);
        const bool closed = std::strchr("FIJKL", c.mode) != nullptr;
        std::printf("  client: %s; the handler's call returned %d\n", saw.c_str(), static_cast<int>(g_handler_rc));
        std::fflush(stdout);
        if (!closed) close(fd);
        int status = 0;
        waitpid(pid, &status, 0);  // every server ends at the client's EOF
        signal(SIGALRM, SIG_DFL);
    }
    return 0;
}
