// Readiness semantics probe: runs poll/ppoll/select/epoll scenarios on one end
// of a TCP connection while a forked peer writes, shuts down and closes on
// command, and prints what a program would observe. The integration test runs
// it on plain TCP and under LD_PRELOAD and requires identical output.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int g_cmd = -1, g_ack = -1;  // pipes to and from the peer process

int connect_to(int port) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) _exit(3);
    return c;
}

// Peer side: 'w' + count writes that many bytes, 's' shutdown(SHUT_WR), 'c' close,
// 'n' a new connection (the old one is closed first).
[[noreturn]] void peer(int port, int cmd, int ack) {
    int c = connect_to(port);
    char op;
    while (read(cmd, &op, 1) == 1) {
        if (op == 'n') {
            close(c);
            c = connect_to(port);
        } else if (op == 'w') {
            unsigned char n;
            if (read(cmd, &n, 1) != 1) break;
            char buf[256];
            memset(buf, 'a', n);
            if (send(c, buf, n, 0) != n) _exit(4);
        } else if (op == 'r') {  // read back exactly the count that follows
            uint32_t want = 0;
            if (read(cmd, &want, sizeof want) != sizeof want) break;
            static char sink[65536];
            for (uint32_t got = 0; got < want;) {
                ssize_t n = recv(c, sink, std::min<uint32_t>(sizeof sink, want - got), 0);
                if (n <= 0) _exit(7);
                got += static_cast<uint32_t>(n);
            }
        } else if (op == 's') {
            shutdown(c, SHUT_WR);
        } else if (op == 'c') {
            close(c);
        } else if (op == 'q') {
            break;
        }
        if (write(ack, "k", 1) != 1) break;
    }
    _exit(0);
}

void tell(char op, unsigned char n = 0) {
    char m[2] = {op, static_cast<char>(n)};
    if (write(g_cmd, m, op == 'w' ? 2 : 1) < 0) exit(5);
    char k;
    if (read(g_ack, &k, 1) != 1) exit(6);
    usleep(20000);  // let the bytes land (kernel or ring) before we look
}

void out(const char* scenario, const std::string& what) { printf("%-28s %s\n", scenario, what.c_str()); }

std::string poll_once(int fd, short events, int timeout) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, timeout);
    char b[64];
    snprintf(b, sizeof b, "rc=%d revents=0x%x", rc, rc > 0 ? p.revents : 0);
    return b;
}

std::string epoll_once(int ep, int timeout) {
    epoll_event ev[4];
    int n = epoll_wait(ep, ev, 4, timeout);
    char b[64];
    snprintf(b, sizeof b, "n=%d events=0x%x data=%llu", n, n > 0 ? ev[0].events : 0,
             n > 0 ? static_cast<unsigned long long>(ev[0].data.u64) : 0ull);
    return b;
}

std::string pwait2_once(int ep, const timespec* ts) {
    epoll_event ev[4];
    int n = epoll_pwait2(ep, ev, 4, ts, nullptr);
    char b[96];
    snprintf(b, sizeof b, "n=%d events=0x%x data=%llu errno=%s", n, n > 0 ? ev[0].events : 0,
             n > 0 ? static_cast<unsigned long long>(ev[0].data.u64) : 0ull, n < 0 ? strerrorname_np(errno) : "-");
    return b;
}

std::string drain(int fd) {
    char buf[512];
    ssize_t total = 0, n;
    while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) total += n;
    char b[64];
    snprintf(b, sizeof b, "read=%zd last=%zd errno=%s", total, n, n < 0 ? strerrorname_np(errno) : "-");
    return b;
}

std::string select_once(int fd, int timeout_ms) {
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(fd, &rs);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    int rc = select(fd + 1, &rs, nullptr, nullptr, &tv);
    char b[64];
    snprintf(b, sizeof b, "rc=%d set=%d", rc, rc > 0 ? FD_ISSET(fd, &rs) : 0);
    return b;
}

// The peer writes n bytes 50 ms from now, while we block; collect_later()
// takes its ack afterwards.
void write_later(unsigned char n) {
    if (fork() == 0) {
        usleep(50000);
        char m[2] = {'w', static_cast<char>(n)};
        if (write(g_cmd, m, 2) < 0) _exit(1);
        _exit(0);
    }
}

void collect_later() {
    char k;
    if (read(g_ack, &k, 1) != 1) exit(3);
    wait(nullptr);
}

void on_alarm(int) {}

// One byte settles the negotiation under the shim. The peer's first send waits
// for our side to answer the handshake, so read before the ack.
void warm_up(int s) {
    char w1[2] = {'w', 1}, x;
    if (write(g_cmd, w1, 2) != 2) exit(2);
    out("warmup", recv(s, &x, 1, 0) == 1 ? "ok" : "failed");
    if (read(g_ack, &x, 1) != 1) exit(2);
}

}  // namespace

int main() {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(l, 1)) return 2;
    getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
    int cmd[2], ack[2];
    if (pipe(cmd) || pipe(ack)) return 2;
    pid_t pid = fork();
    if (pid == 0) {
        close(l);
        peer(ntohs(a.sin_port), cmd[0], ack[1]);
    }
    g_cmd = cmd[1];
    g_ack = ack[0];
    int s = accept(l, nullptr, nullptr);
    char x;
    warm_up(s);

    out("poll0 empty", poll_once(s, POLLIN, 0));
    out("nonblocking read empty", drain(s));
    tell('w', 10);
    out("poll0 after 10", poll_once(s, POLLIN, 0));
    int avail = -1;
    ioctl(s, FIONREAD, &avail);
    out("FIONREAD", std::to_string(avail));
    char peek[4];
    out("MSG_PEEK", std::to_string(recv(s, peek, 4, MSG_PEEK)));
    out("read 4", std::to_string(recv(s, peek, 4, 0)));
    out("poll0 still (LT)", poll_once(s, POLLIN | POLLOUT, 0));
    out("drain", drain(s));
    out("poll0 drained", poll_once(s, POLLIN, 0));

    auto t0 = std::chrono::steady_clock::now();
    std::string r = poll_once(s, POLLIN, 100);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    out("poll 100ms empty", r + (ms >= 90 ? " waited" : " EARLY"));

    int ep = epoll_create1(0);
    epoll_event ev{EPOLLIN, {}};
    ev.data.u64 = 42;
    epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
    out("epoll LT empty", epoll_once(ep, 0));
    tell('w', 5);
    out("epoll LT data", epoll_once(ep, 0));
    out("epoll LT again", epoll_once(ep, 0));
    out("drain", drain(s));
    out("epoll LT drained", epoll_once(ep, 0));

    ev.events = EPOLLIN | EPOLLET;
    epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
    tell('w', 5);
    out("epoll ET data", epoll_once(ep, 0));
    out("epoll ET no new data", epoll_once(ep, 0));
    tell('w', 5);
    out("epoll ET new data", epoll_once(ep, 0));
    out("read 3", std::to_string(recv(s, peek, 3, 0)));
    out("epoll ET after partial", epoll_once(ep, 0));
    out("drain", drain(s));

    // EPOLLET on both directions: the edge of new data carries the full current mask.
    ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
    epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
    out("epoll ET in+out first", epoll_once(ep, 0));
    out("epoll ET in+out idle", epoll_once(ep, 0));
    tell('w', 5);
    out("epoll ET in+out new data", epoll_once(ep, 0));
    out("drain", drain(s));

    ev.events = EPOLLIN | EPOLLONESHOT;
    epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
    tell('w', 5);
    out("oneshot first", epoll_once(ep, 0));
    out("oneshot disabled", epoll_once(ep, 0));
    epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
    out("oneshot rearmed", epoll_once(ep, 0));
    out("drain", drain(s));

    ev.events = EPOLLOUT;
    epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
    out("epoll OUT", epoll_once(ep, 0));

    // Edge-triggered EPOLLOUT: a send that hits a full buffer makes freed space a new edge.
    ev.events = EPOLLOUT | EPOLLET;
    epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
    out("epoll ET OUT", epoll_once(ep, 0));
    out("epoll ET OUT no edge", epoll_once(ep, 0));
    static char fill[65536];
    uint32_t filled = 0;
    for (ssize_t n; (n = send(s, fill, sizeof fill, MSG_DONTWAIT | MSG_NOSIGNAL)) > 0;) filled += static_cast<uint32_t>(n);
    out("fill until", errno == EAGAIN ? "EAGAIN" : strerrorname_np(errno));
    out("epoll ET OUT full", epoll_once(ep, 0));
    char rd[1 + sizeof filled] = {'r'};
    memcpy(rd + 1, &filled, sizeof filled);
    if (write(g_cmd, rd, sizeof rd) != sizeof rd || read(g_ack, &x, 1) != 1) return 3;
    out("epoll ET OUT drained", epoll_once(ep, 2000));

    // Blocking waits that data ends: the peer writes while we sleep.
    ev.events = EPOLLIN;
    epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
    write_later(7);
    out("epoll blocking wakes", epoll_once(ep, 2000));
    collect_later();
    out("drain", drain(s));

    // epoll_pwait2: nanosecond timeouts, validated before anything else.
    timespec zero{0, 0}, sub_ms{0, 500000}, bad{0, 1000000000L}, two_s{2, 0};
    out("pwait2 zero empty", pwait2_once(ep, &zero));
    t0 = std::chrono::steady_clock::now();
    r = pwait2_once(ep, &sub_ms);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    out("pwait2 500us empty", r + (us >= 450 ? " waited" : " EARLY"));
    out("pwait2 bad timespec", pwait2_once(ep, &bad));
    tell('w', 6);
    out("pwait2 data", pwait2_once(ep, &two_s));
    out("drain", drain(s));
    write_later(9);
    out("pwait2 blocking wakes", pwait2_once(ep, &two_s));
    collect_later();
    out("drain", drain(s));

    // Two sets watching one socket, and a pipe mixed in.
    int ep2 = epoll_create1(0);
    ev.data.u64 = 7;
    epoll_ctl(ep2, EPOLL_CTL_ADD, s, &ev);
    int pp[2];
    if (pipe(pp)) return 2;
    if (write(pp[1], "p", 1) != 1) return 2;
    pollfd mixed[2] = {{s, POLLIN, 0}, {pp[0], POLLIN, 0}};
    int rc = poll(mixed, 2, 0);
    out("poll mixed", "rc=" + std::to_string(rc) + " sock=" + std::to_string(mixed[0].revents) + " pipe=" +
                          std::to_string(mixed[1].revents));
    tell('w', 3);
    out("set 1", epoll_once(ep, 0));
    out("set 2", epoll_once(ep2, 0));
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(s, &rs);
    FD_SET(pp[0], &rs);
    timeval tv{0, 0};
    rc = select(std::max(s, pp[0]) + 1, &rs, nullptr, nullptr, &tv);
    out("select", "rc=" + std::to_string(rc) + " sock=" + std::to_string(FD_ISSET(s, &rs)));
    // One slot per call (PostgreSQL's backend waits so), the socket and the pipe
    // both ready and left unread: the kernel takes turns, so both are reported
    // within a few calls; neither may starve the other.
    int ep3 = epoll_create1(0);
    epoll_event e3{EPOLLIN, {}};
    e3.data.u64 = 1;
    epoll_ctl(ep3, EPOLL_CTL_ADD, s, &e3);
    e3.data.u64 = 2;
    epoll_ctl(ep3, EPOLL_CTL_ADD, pp[0], &e3);
    bool saw_sock = false, saw_pipe = false;
    for (int i = 0; i < 6; ++i) {
        epoll_event got{};
        if (epoll_wait(ep3, &got, 1, 2000) == 1) (got.data.u64 == 1 ? saw_sock : saw_pipe) = true;
    }
    out("epoll 1 slot, both ready", std::string("sock=") + (saw_sock ? "seen" : "STARVED") + " pipe=" + (saw_pipe ? "seen" : "STARVED"));
    out("drain", drain(s));
    // The socket drained, the pipe still ready: a blocking wait reports the pipe.
    out("epoll 1 slot, pipe ready", epoll_once(ep3, 2000));
    close(ep3);
    timespec ts{0, 30 * 1000000};
    pollfd pp1{s, POLLIN, 0};
    out("ppoll 30ms empty", "rc=" + std::to_string(ppoll(&pp1, 1, &ts, nullptr)));

    // Sets inside sets: an epoll fd watched by another set, by poll or by select
    // reads ready while a socket inside it is (and not once it is drained).
    int outer = epoll_create1(0), top = epoll_create1(0);
    epoll_event oe{EPOLLIN, {}};
    oe.data.u64 = 99;
    epoll_ctl(outer, EPOLL_CTL_ADD, ep, &oe);
    oe.data.u64 = 100;
    epoll_ctl(top, EPOLL_CTL_ADD, outer, &oe);
    out("nested empty", epoll_once(outer, 0));
    out("nested poll empty", poll_once(ep, POLLIN, 0));
    tell('w', 5);
    out("nested data", epoll_once(outer, 0));
    out("nested again (LT)", epoll_once(outer, 0));
    out("nested poll data", poll_once(ep, POLLIN, 0));
    out("nested select data", select_once(ep, 0));
    out("nested three deep", epoll_once(top, 0));
    out("nested inner set", epoll_once(ep, 0));
    out("drain", drain(s));
    out("nested drained", epoll_once(outer, 0));
    out("nested poll drained", poll_once(ep, POLLIN, 0));
    out("nested three deep drained", epoll_once(top, 0));
    write_later(4);
    out("nested blocking wakes", epoll_once(outer, 2000));
    collect_later();
    out("drain", drain(s));
    write_later(4);
    out("nested poll blocking wakes", poll_once(ep, POLLIN, 2000));
    collect_later();
    out("drain", drain(s));
    write_later(4);
    out("nested select blocking wakes", select_once(ep, 2000));
    collect_later();
    out("drain", drain(s));
    write_later(4);
    out("three deep blocking wakes", epoll_once(top, 2000));
    collect_later();
    out("drain", drain(s));
    // Held edge-triggered: new data on a member is a new edge, a wait on the inner
    // set is not. (An edge is waited for: a busy machine may deliver late.)
    int edge = epoll_create1(0);
    oe.events = EPOLLIN | EPOLLET;
    oe.data.u64 = 101;
    epoll_ctl(edge, EPOLL_CTL_ADD, ep, &oe);
    out("nested ET empty", epoll_once(edge, 0));
    tell('w', 3);
    out("nested ET data", epoll_once(edge, 2000));
    out("nested ET no new data", epoll_once(edge, 0));
    tell('w', 3);
    out("nested ET new data", epoll_once(edge, 2000));
    out("nested inner set", epoll_once(ep, 0));
    out("nested ET after inner wait", epoll_once(edge, 0));
    out("drain", drain(s));
    write_later(2);
    out("nested ET blocking wakes", epoll_once(edge, 2000));
    collect_later();
    out("drain", drain(s));
    close(edge);
    close(top);
    close(outer);

    // Signals interrupt waits with EINTR.
    struct sigaction sa{};
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, nullptr);
    itimerval it{{0, 0}, {0, 50000}};
    setitimer(ITIMER_REAL, &it, nullptr);
    pollfd pe{s, POLLIN, 0};
    rc = poll(&pe, 1, 5000);
    out("poll EINTR", "rc=" + std::to_string(rc) + " errno=" + (rc < 0 ? strerrorname_np(errno) : "-"));
    setitimer(ITIMER_REAL, &it, nullptr);
    epoll_event evs[2];
    rc = epoll_wait(ep, evs, 2, 5000);
    out("epoll EINTR", "rc=" + std::to_string(rc) + " errno=" + (rc < 0 ? strerrorname_np(errno) : "-"));
    setitimer(ITIMER_REAL, &it, nullptr);
    timespec five_s{5, 0};
    out("pwait2 EINTR", pwait2_once(ep, &five_s));

    // Half close: EOF after the data, EPOLLRDHUP, and our direction still works.
    ev.events = EPOLLIN | EPOLLRDHUP;
    epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
    tell('w', 4);
    tell('s');
    out("epoll RDHUP", epoll_once(ep, 0));
    out("poll RDHUP", poll_once(s, POLLIN | POLLRDHUP, 0));
    out("read data then EOF", drain(s));
    out("recv after EOF", std::to_string(recv(s, peek, 4, 0)));
    out("send after peer SHUT_WR", std::to_string(send(s, "z", 1, MSG_NOSIGNAL)));

    // Closing an fd removes it from its epoll sets.
    int d = dup(s);
    close(s);
    epoll_ctl(ep2, EPOLL_CTL_DEL, d, nullptr);
    out("closed fd epoll", epoll_once(ep2, 0));
    close(d);

    // Edge-triggered EOF on a second connection: a FIN that lands after the data
    // was drained is an edge of its own (no EPOLLRDHUP asked for).
    if (write(g_cmd, "n", 1) != 1 || read(g_ack, &x, 1) != 1) return 3;
    s = accept(l, nullptr, nullptr);
    close(l);
    warm_up(s);
    ev.events = EPOLLIN | EPOLLET;
    epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
    tell('w', 4);
    out("epoll ET data before FIN", epoll_once(ep, 0));
    out("drain", drain(s));
    out("epoll ET drained", epoll_once(ep, 0));
    tell('s');
    out("epoll ET FIN after drain", epoll_once(ep, 0));
    out("epoll ET FIN no new edge", epoll_once(ep, 0));
    out("read EOF", drain(s));
    close(s);
    tell('c');
    if (write(g_cmd, "q", 1) != 1) return 3;
    waitpid(pid, nullptr, 0);
    out("done", "ok");
    return 0;
}
