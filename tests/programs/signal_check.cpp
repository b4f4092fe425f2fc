// A signal that arrives while a program waits on a socket, for every kind of
// wait (and a socket timeout over a call that waits several times): recv, poll, select, epoll_wait, ppoll and epoll_pwait with a signal
// mask, a handler with and without SA_RESTART, a socket with SO_RCVTIMEO. The
// kernel sleeps through the whole wait and ends it with EINTR (or restarts a
// recv after SA_RESTART); under the shim the wait first spins in user space,
// where the handler runs without the wait being told (run it with a long
// RDMASOCK_SPIN_US to put every signal there). Prints what the program saw;
// the integration test requires the same output over plain TCP and the shim.
//
// Each case: a fresh connection to a forked server, two round trips (onto the
// shim's transport), then the server either stays silent or answers 1.5 s
// later; a timer sends SIGALRM 0.3 s into the wait.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

volatile sig_atomic_t g_handled = 0;
volatile sig_atomic_t g_info_code = 0;

void on_alarm(int) { g_handled = g_handled + 1; }
void on_alarm_info(int sig, siginfo_t* si, void*) {
    g_handled = g_handled + 1;
    g_info_code = si && si->si_signo == sig ? si->si_code : -1;
}

int g_listener = -1;
sockaddr_in g_addr{};

bool read_exactly(int fd, char* buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += static_cast<size_t>(r);
    }
    return true;
}

// The server side of one case: echo the prelude, then obey one command byte:
// 'i' stay silent, 'l' send "late" after 1.5 s. Then wait for the client to go.
void serve(int fd) {
    char buf[64];
    for (int i = 0; i < 2; ++i) {
        if (!read_exactly(fd, buf, sizeof buf)) _exit(1);
        if (send(fd, buf, sizeof buf, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof buf)) _exit(1);
    }
    char cmd = 0;
    if (!read_exactly(fd, &cmd, 1)) _exit(1);
    if (cmd == 'l') {
        usleep(1500 * 1000);
        send(fd, "late", 4, MSG_NOSIGNAL);
    } else if (cmd == 'd') {  // dribble: 10 bytes every 300 ms
        for (int i = 0; i < 10; ++i) {
            usleep(300 * 1000);
            send(fd, "0123456789", 10, MSG_NOSIGNAL);
        }
    }
    while (recv(fd, buf, sizeof buf, 0) > 0) {
    }
    _exit(0);
}

struct Peer {
    int fd = -1;
    pid_t pid = -1;
};

Peer open_case(char cmd) {
    Peer p;
    p.pid = fork();
    if (p.pid == 0) {
        int fd = accept(g_listener, nullptr, nullptr);
        if (fd < 0) _exit(1);
        serve(fd);
    }
    p.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(p.fd, reinterpret_cast<sockaddr*>(&g_addr), sizeof g_addr) != 0) {
        perror("connect");
        _exit(2);
    }
    char buf[64];
    std::memset(buf, 'p', sizeof buf);
    for (int i = 0; i < 2; ++i) {
        if (send(p.fd, buf, sizeof buf, 0) != static_cast<ssize_t>(sizeof buf) || !read_exactly(p.fd, buf, sizeof buf)) {
            std::puts("prelude failed");
            _exit(2);
        }
    }
    send(p.fd, &cmd, 1, 0);
    return p;
}

void close_case(Peer& p) {
    close(p.fd);
    int st = 0;
    waitpid(p.pid, &st, 0);
}

void install(bool restart, bool siginfo) {
    struct sigaction sa{};
    if (siginfo) sa.sa_sigaction = on_alarm_info;
    else sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = (restart ? SA_RESTART : 0) | (siginfo ? SA_SIGINFO : 0);
    sigaction(SIGALRM, &sa, nullptr);
    // What the program reads back must be what it set.
    struct sigaction back{};
    sigaction(SIGALRM, nullptr, &back);
    const bool same = siginfo ? back.sa_sigaction == on_alarm_info && (back.sa_flags & SA_SIGINFO)
                              : back.sa_handler == on_alarm && !(back.sa_flags & SA_SIGINFO);
    if (!same || ((back.sa_flags & SA_RESTART) != 0) != restart) std::puts("sigaction reads back something else");
}

void arm_timer() {
    g_handled = 0;
    itimerval t{{0, 0}, {0, 300 * 1000}};
    setitimer(ITIMER_REAL, &t, nullptr);
}

std::string outcome(long rc, int err) {
    char line[128];
    if (rc < 0) std::snprintf(line, sizeof line, "-1 %s", strerrorname_np(err));
    else std::snprintf(line, sizeof line, "%ld", rc);
    return line;
}

void report(const char* name, long rc, int err, const char* extra = "") {
    std::printf("%-44s %-8s handler ran %d time(s)%s\n", name, outcome(rc, err).c_str(), static_cast<int>(g_handled), extra);
    std::fflush(stdout);
}

sigset_t only_alarm() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGALRM);
    return s;
}

void recv_case(const char* name, char cmd, bool restart, bool siginfo, bool rcvtimeo) {
    install(restart, siginfo);
    Peer p = open_case(cmd);
    if (rcvtimeo) {
        timeval tv{20, 0};
        setsockopt(p.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    arm_timer();
    char buf[16] = {};
    g_info_code = 0;
    long rc = recv(p.fd, buf, sizeof buf, 0);
    int err = errno;
    std::string extra = rc > 0 ? std::string(", read \"") + std::string(buf, static_cast<size_t>(rc)) + "\"" : "";
    if (siginfo) extra += ", si_code " + std::to_string(static_cast<int>(g_info_code));
    report(name, rc, err, extra.c_str());
    close_case(p);
}

template <class Wait>
void wait_case(const char* name, char cmd, bool restart, Wait wait) {
    install(restart, false);
    Peer p = open_case(cmd);
    arm_timer();
    long rc = wait(p.fd);
    int err = errno;
    report(name, rc, err);
    close_case(p);
}

// Two threads read one socket: the first sleeps in recv, the second waits
// behind it; a signal to the second ends its call, the first gets the data.
void two_readers_case() {
    install(false, false);
    Peer p = open_case('l');
    g_handled = 0;
    struct Reader {
        int fd;
        long rc = 0;
        int err = 0;
        char buf[16] = {};
        static void* run(void* a) {
            auto* r = static_cast<Reader*>(a);
            r->rc = recv(r->fd, r->buf, sizeof r->buf, 0);
            r->err = errno;
            return nullptr;
        }
    } first{p.fd}, second{p.fd};
    pthread_t t1, t2;
    pthread_create(&t1, nullptr, Reader::run, &first);
    usleep(100 * 1000);
    pthread_create(&t2, nullptr, Reader::run, &second);
    usleep(300 * 1000);
    pthread_kill(t2, SIGALRM);
    pthread_join(t2, nullptr);
    pthread_join(t1, nullptr);
    std::printf("%-44s %-8s %-8s handler ran %d time(s)%s\n", "two readers, the second signalled",
                outcome(first.rc, first.err).c_str(), outcome(second.rc, second.err).c_str(), static_cast<int>(g_handled),
                first.rc > 0 ? (std::string(", first read \"") + std::string(first.buf, static_cast<size_t>(first.rc)) + "\"").c_str() : "");
    std::fflush(stdout);
    close_case(p);
}

// SO_RCVTIMEO bounds the whole call, not each of its sleeps: a MSG_WAITALL
// recv of 100 bytes that arrive 10 every 300 ms ends after 1 s with what came.
void timeout_whole_call_case() {
    install(false, false);
    Peer p = open_case('d');
    timeval tv{1, 0};
    setsockopt(p.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[100];
    g_handled = 0;
    long rc = recv(p.fd, buf, sizeof buf, MSG_WAITALL);
    int err = errno;
    const std::string what = rc <= 0 ? outcome(rc, err) : rc < 100 ? "part" : "all 100";  // how much varies with timing
    std::printf("%-44s %s\n", "recv WAITALL, SO_RCVTIMEO 1 s, slow peer", what.c_str());
    std::fflush(stdout);
    close_case(p);
}

}  // namespace

int main() {
    g_listener = socket(AF_INET, SOCK_STREAM, 0);
    g_addr.sin_family = AF_INET;
    g_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof g_addr;
    if (bind(g_listener, reinterpret_cast<sockaddr*>(&g_addr), sizeof g_addr) != 0 || listen(g_listener, 8) != 0 ||
        getsockname(g_listener, reinterpret_cast<sockaddr*>(&g_addr), &len) != 0) {
        perror("listen");
        return 2;
    }

    recv_case("recv, no SA_RESTART, silent peer", 'i', false, false, false);
    recv_case("recv, SA_SIGINFO, no SA_RESTART, silent peer", 'i', false, true, false);
    recv_case("recv, SA_RESTART, peer answers late", 'l', true, false, false);
    recv_case("recv, SA_RESTART, SO_RCVTIMEO, silent peer", 'i', true, false, true);

    auto poll_in = [](int fd) {
        pollfd p{fd, POLLIN, 0};
        return static_cast<long>(poll(&p, 1, -1));
    };
    auto select_in = [](int fd) {
        fd_set r;
        FD_ZERO(&r);
        FD_SET(fd, &r);
        return static_cast<long>(select(fd + 1, &r, nullptr, nullptr, nullptr));
    };
    auto epoll_in = [](int fd) {
        int ep = epoll_create1(0);
        epoll_event ev{EPOLLIN, {}};
        ev.data.fd = fd;
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        epoll_event out{};
        long rc = epoll_wait(ep, &out, 1, -1);
        int err = errno;
        close(ep);
        errno = err;
        return rc;
    };
    wait_case("poll, SA_RESTART, silent peer", 'i', true, poll_in);
    wait_case("select, SA_RESTART, silent peer", 'i', true, select_in);
    wait_case("epoll_wait, SA_RESTART, silent peer", 'i', true, epoll_in);

    // A mask that holds SIGALRM back for the call: the wait ends with the
    // data, and the handler runs as the call returns.
    wait_case("ppoll, mask holds SIGALRM, peer answers late", 'l', false, [](int fd) {
        pollfd p{fd, POLLIN, 0};
        sigset_t m = only_alarm();
        return static_cast<long>(ppoll(&p, 1, nullptr, &m));
    });
    wait_case("epoll_pwait, mask holds SIGALRM, late peer", 'l', false, [](int fd) {
        int ep = epoll_create1(0);
        epoll_event ev{EPOLLIN, {}};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        epoll_event out{};
        sigset_t m = only_alarm();
        long rc = epoll_pwait(ep, &out, 1, -1, &m);
        int err = errno;
        close(ep);
        errno = err;
        return rc;
    });
    // SIGALRM blocked by the thread, let through only by the call's mask.
    wait_case("pselect, mask lets blocked SIGALRM in", 'i', false, [](int fd) {
        sigset_t block = only_alarm(), none, old;
        sigemptyset(&none);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        fd_set r;
        FD_ZERO(&r);
        FD_SET(fd, &r);
        long rc = pselect(fd + 1, &r, nullptr, nullptr, nullptr, &none);
        int err = errno;
        const int before = g_handled;
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        errno = err;
        if (before != 1) std::puts("the handler did not run inside pselect");
        return rc;
    });
    two_readers_case();
    timeout_whole_call_case();
    std::puts("done");
    return 0;
}
