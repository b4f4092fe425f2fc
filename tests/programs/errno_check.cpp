// errno after a call that succeeded: the kernel's socket calls leave it as it
// was, and programs read it afterwards (nginx logs it after a recv that
// returned 0; code that sets errno = 0 before a call and tests it after). The
// shim makes calls of its own on the way (a side-channel send to a peer that
// left, a doorbell read that finds nothing): none of their errnos may leak.
//
// A client (this process) and an echo server (a forked child) set errno to a
// sentinel before every call and check it after each success, through the
// switch onto the shim's transport, waits that spin and waits that sleep,
// poll/select/epoll, EOF and close. Prints what a program would see; the
// integration test requires the same output over plain TCP and the shim.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

constexpr int kSentinel = EDOM;  // no socket call sets it
constexpr int kRounds = 300;

struct Checker {
    const char* side;
    int calls = 0;
    std::string first_bad;  // each call that changed errno once, with what it set
    // Runs a call with errno set to the sentinel; a success must leave it so.
    template <class F>
    long operator()(const char* name, F&& f) {
        errno = kSentinel;
        const long r = static_cast<long>(f());
        const int e = errno;
        ++calls;
        if (r >= 0 && e != kSentinel) {
            const std::string what = std::string(name) + " (to " + strerrorname_np(e) + ")";
            if (first_bad.find(what) == std::string::npos) first_bad += (first_bad.empty() ? "" : ", ") + what;
        }
        errno = e;
        return r;
    }
    std::string summary() const {
        return std::string(side) + ": " + (first_bad.empty() ? "errno kept by every call that succeeded" : "errno changed by calls that succeeded: " + first_bad);
    }
};

// One message of `n` bytes each way, through the call pair chosen by `round`.
// What the client does between its send and its read when `waits` says so.
using Waits = void (*)(Checker&, int fd);

bool exchange(Checker& ck, int fd, int round, bool echo, Waits waits = nullptr) {
    char out[256], in[256];
    const size_t n = 1 + static_cast<size_t>(round * 37 % 200);
    std::memset(out, 'a' + round % 26, n);
    auto put = [&](const char* buf) {
        switch (round % 4) {
            case 0: return ck("send", [&] { return send(fd, buf, n, MSG_NOSIGNAL); }) == static_cast<long>(n);
            case 1: return ck("write", [&] { return write(fd, buf, n); }) == static_cast<long>(n);
            case 2: {
                iovec v[2] = {{const_cast<char*>(buf), n / 2}, {const_cast<char*>(buf) + n / 2, n - n / 2}};
                return ck("writev", [&] { return writev(fd, v, 2); }) == static_cast<long>(n);
            }
            default: {
                iovec v{const_cast<char*>(buf), n};
                msghdr m{};
                m.msg_iov = &v;
                m.msg_iovlen = 1;
                return ck("sendmsg", [&] { return sendmsg(fd, &m, MSG_NOSIGNAL); }) == static_cast<long>(n);
            }
        }
    };
    auto take = [&](char* buf) {
        size_t got = 0;
        while (got < n) {
            long r;
            switch (round % 4) {
                case 0: r = ck("recv", [&] { return recv(fd, buf + got, n - got, 0); }); break;
                case 1: r = ck("read", [&] { return read(fd, buf + got, n - got); }); break;
                case 2: {
                    iovec v{buf + got, n - got};
                    r = ck("readv", [&] { return readv(fd, &v, 1); });
                    break;
                }
                default: {
                    iovec v{buf + got, n - got};
                    msghdr m{};
                    m.msg_iov = &v;
                    m.msg_iovlen = 1;
                    r = ck("recvmsg", [&] { return recvmsg(fd, &m, 0); });
                }
            }
            if (r <= 0) return false;
            got += static_cast<size_t>(r);
        }
        return true;
    };
    if (echo) {
        if (!take(in)) return false;
        if (round % 10 == 9) usleep(3000);  // the client's wait ends asleep, not in the spin
        return put(in);
    }
    if (!put(out)) return false;
    if (waits) waits(ck, fd);
    return take(in) && std::memcmp(in, out, n) == 0;
}

int g_epoll = -1;

// The echo on its way: each wait call reports it readable.
void wait_calls(Checker& ck, int fd) {
    pollfd p{fd, POLLIN, 0};
    std::printf("poll: %ld\n", ck("poll", [&] { return poll(&p, 1, 10000); }));
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(fd, &rs);
    timeval tv{10, 0};
    std::printf("select: %ld\n", ck("select", [&] { return select(fd + 1, &rs, nullptr, nullptr, &tv); }));
    epoll_event got[2];
    std::printf("epoll_wait: %ld\n", ck("epoll_wait", [&] { return epoll_wait(g_epoll, got, 2, 10000); }));
    int q = -1;
    ck("ioctl FIONREAD", [&] { return ioctl(fd, FIONREAD, &q); });
    std::printf("FIONREAD > 0: %d\n", q > 0);
    char b[256];
    std::printf("recv MSG_PEEK > 0: %d\n", ck("recv MSG_PEEK", [&] { return recv(fd, b, sizeof b, MSG_PEEK); }) > 0);
}

int serve(int ls) {
    Checker ck{"server"};
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    int fd = static_cast<int>(ck("accept", [&] { return accept(ls, reinterpret_cast<sockaddr*>(&peer), &len); }));
    if (fd < 0) return 2;
    close(ls);
    int round = 0;
    while (round < kRounds && exchange(ck, fd, round, true)) ++round;
    char b;
    const long eof = ck("recv at EOF", [&] { return recv(fd, &b, 1, 0); });
    ck("close", [&] { return close(fd); });
    std::printf("server: %d rounds echoed, then recv returned %ld\n%s\n", round, eof, ck.summary().c_str());
    return 0;
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    Checker ck{"client"};
    int ls = static_cast<int>(ck("socket", [&] { return socket(AF_INET, SOCK_STREAM, 0); }));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (ck("bind", [&] { return bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a); }) != 0 ||
        ck("listen", [&] { return listen(ls, 1); }) != 0 ||
        ck("getsockname", [&] { return getsockname(ls, reinterpret_cast<sockaddr*>(&a), &alen); }) != 0) {
        std::perror("listen");
        return 2;
    }
    const pid_t child = fork();
    if (child == 0) _exit(serve(ls));
    close(ls);

    int fd = static_cast<int>(ck("socket", [&] { return socket(AF_INET, SOCK_STREAM, 0); }));
    if (ck("connect", [&] { return connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a); }) != 0) {
        std::perror("connect");
        return 2;
    }
    int one = 1, err = -1;
    socklen_t elen = sizeof err;
    ck("setsockopt", [&] { return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); });
    ck("getsockopt", [&] { return getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen); });
    ck("fcntl", [&] { return fcntl(fd, F_GETFL); });

    int round = 0;
    while (round < kRounds / 2 && exchange(ck, fd, round, false)) ++round;

    // Readiness: nothing to read yet, then one byte that the server echoes.
    pollfd p{fd, POLLIN, 0};
    std::printf("poll, nothing to read: %ld\n", ck("poll", [&] { return poll(&p, 1, 0); }));
    const int ep = g_epoll = static_cast<int>(ck("epoll_create1", [&] { return epoll_create1(0); }));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ck("epoll_ctl", [&] { return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev); });
    epoll_event got[2];
    std::printf("epoll_wait, nothing to read: %ld\n", ck("epoll_wait", [&] { return epoll_wait(ep, got, 2, 0); }));
    char b[256];
    const long none = ck("recv", [&] { return recv(fd, b, 1, MSG_DONTWAIT); });
    std::printf("recv MSG_DONTWAIT, nothing to read: %ld %s\n", none, strerrorname_np(errno));
    while (round < kRounds && exchange(ck, fd, round, false, round % 50 == 0 ? wait_calls : nullptr)) ++round;
    std::printf("client: %d rounds\n", round);
    ck("shutdown", [&] { return shutdown(fd, SHUT_WR); });
    const long eof = ck("recv", [&] { return recv(fd, b, 1, 0); });
    ck("close", [&] { return close(ep); });
    ck("close", [&] { return close(fd); });
    int st = 0;
    waitpid(child, &st, 0);  // the server prints its lines first
    std::printf("recv at EOF: %ld\n%s\n", eof, ck.summary().c_str());
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
