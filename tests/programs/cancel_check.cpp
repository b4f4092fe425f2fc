// pthread_cancel of a thread blocked on a socket, as glibc and the kernel
// answer it: recv, read, poll, select, epoll_wait and send are cancellation
// points, so the thread ends (PTHREAD_CANCELED) and the connection stays
// whole (nothing read by the cancelled call, the stream in order after a
// cancelled send); with cancellation disabled the call goes on to its normal
// result (no EINTR) and the request waits for the next cancellation point; a
// request made before the call acts at the call's entry, even with bytes
// queued (close() too: nothing is closed). Prints what a program sees; tests/integration/thread_cancel.sh
// requires the same output over plain TCP and under the shim (whose waits
// sleep in system calls of their own, which glibc's cancellation never sees).
// One case waits before anything was sent (the shim's bytes still on TCP).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check_common.hpp"

namespace {

int g_listener = -1;

struct Pair {
    int client = -1, server = -1;
};

using check::die;

void settle(const Pair& p) {
    char c;
    for (int i = 0; i < 3; ++i) {
        if (send(p.server, "s", 1, 0) != 1 || recv(p.client, &c, 1, MSG_WAITALL) != 1) die("settle s->c");
        if (send(p.client, "c", 1, 0) != 1 || recv(p.server, &c, 1, MSG_WAITALL) != 1) die("settle c->s");
    }
}

Pair connect_pair(bool settled = true) {
    sockaddr_in a{};
    socklen_t alen = sizeof a;
    if (getsockname(g_listener, reinterpret_cast<sockaddr*>(&a), &alen) != 0) die("getsockname");
    Pair p;
    p.client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(p.client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
    p.server = accept(g_listener, nullptr, nullptr);
    if (p.server < 0) die("accept");
    if (settled) settle(p);
    return p;
}

void close_pair(const Pair& p) {
    close(p.client);
    close(p.server);
}

// The pair still carries bytes both ways, nothing lost or left behind.
void check_pair(const char* label, const Pair& p) {
    char b[32];
    if (send(p.server, "hello", 5, 0) != 5) die("send hello");
    ssize_t n = recv(p.client, b, sizeof b, 0);
    std::printf("%s: after the cancel the client reads %zd \"%.*s\"\n", label, n, static_cast<int>(n > 0 ? n : 0), b);
    if (send(p.client, "world", 5, 0) != 5) die("send world");
    n = recv(p.server, b, sizeof b, 0);
    std::printf("%s: and the server reads %zd \"%.*s\"\n", label, n, static_cast<int>(n > 0 ? n : 0), b);
}

struct Blocked {
    const char* call;
    int fd;
    std::string result = "(nothing: cancelled inside the call)";
};

void* block_in(void* arg) {
    auto* b = static_cast<Blocked*>(arg);
    char buf[64];
    long r = 0;
    const std::string call = b->call;
    if (call == "recv") {
        r = recv(b->fd, buf, sizeof buf, 0);
    } else if (call == "recv of 0 bytes") {
        r = recv(b->fd, buf, 0, 0);  // waits once in the kernel too
    } else if (call == "read") {
        r = read(b->fd, buf, sizeof buf);
    } else if (call == "poll") {
        pollfd p{b->fd, POLLIN, 0};
        r = poll(&p, 1, -1);
    } else if (call == "select") {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(b->fd, &rd);
        r = select(b->fd + 1, &rd, nullptr, nullptr, nullptr);
    } else if (call == "epoll_wait") {
        int ep = epoll_create1(EPOLL_CLOEXEC);
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = b->fd;
        epoll_ctl(ep, EPOLL_CTL_ADD, b->fd, &ev);
        pthread_cleanup_push([](void* e) { close(static_cast<int>(reinterpret_cast<intptr_t>(e))); },
                             reinterpret_cast<void*>(static_cast<intptr_t>(ep)));
        epoll_event out{};
        r = epoll_wait(ep, &out, 1, -1);
        pthread_cleanup_pop(1);
    }
    b->result = r < 0 ? std::string("-1 ") + strerrorname_np(errno) : std::to_string(r);
    return nullptr;
}

void join_and_show(const char* label, pthread_t t, const Blocked& b) {
    void* rv = nullptr;
    if (pthread_join(t, &rv) != 0) die("pthread_join");
    std::printf("%s: the thread %s; its call returned %s\n", label,
                rv == PTHREAD_CANCELED ? "was cancelled" : "returned", b.result.c_str());
}

// A thread asleep in `call` on the client's socket is cancelled.
void cancel_asleep(const char* call) {
    Pair p = connect_pair();
    Blocked b{call, p.client};
    pthread_t t;
    pthread_create(&t, nullptr, block_in, &b);
    usleep(200000);  // asleep by now (or not yet in the call: cancelled at its entry, the same)
    pthread_cancel(t);
    join_and_show(call, t, b);
    check_pair(call, p);
    close_pair(p);
}

// The connection's first wait, on either end: nothing was sent yet, so the
// shim still carries it over TCP (before its switch to the rings).
void cancel_first_wait() {
    for (bool server_end : {false, true}) {
        const char* label = server_end ? "the server's first recv" : "the client's first recv";
        Pair p = connect_pair(false);
        Blocked b{"recv", server_end ? p.server : p.client};
        pthread_t t;
        pthread_create(&t, nullptr, block_in, &b);
        usleep(200000);
        pthread_cancel(t);
        join_and_show(label, t, b);
        check_pair(label, p);
        close_pair(p);
    }
}

// A blocking send of more than the peer will take is cancelled; whatever part
// of it went out is a prefix of the pattern, and the stream goes on after it.
unsigned char pattern(size_t i) { return static_cast<unsigned char>((i * 7 + 3) % 251); }

struct Sender {
    int fd;
    std::vector<unsigned char> data;
};

void* send_all(void* arg) {
    auto* s = static_cast<Sender*>(arg);
    size_t off = 0;
    while (off < s->data.size()) {
        ssize_t n = send(s->fd, s->data.data() + off, s->data.size() - off, 0);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
    }
    return nullptr;
}

void cancel_sender() {
    Pair p = connect_pair();
    Sender s{p.client, std::vector<unsigned char>(64u << 20)};
    for (size_t i = 0; i < s.data.size(); ++i) s.data[i] = pattern(i);
    pthread_t t;
    pthread_create(&t, nullptr, send_all, &s);
    usleep(300000);
    pthread_cancel(t);
    void* rv = nullptr;
    pthread_join(t, &rv);
    std::printf("send: the thread %s\n", rv == PTHREAD_CANCELED ? "was cancelled" : "returned");
    // The server drains while END goes out: the buffers are full.
    struct Drain {
        int fd;
        std::vector<unsigned char> got;
        bool failed = false;
    } d{p.server, {}};
    pthread_t reader;
    pthread_create(&reader, nullptr, [](void* arg) -> void* {
        auto* dr = static_cast<Drain*>(arg);
        unsigned char buf[65536];
        for (;;) {
            ssize_t n = recv(dr->fd, buf, sizeof buf, 0);
            if (n <= 0) {
                dr->failed = n < 0;
                return nullptr;
            }
            dr->got.insert(dr->got.end(), buf, buf + n);
        }
    }, &d);
    if (send(p.client, "END", 3, 0) != 3) die("send END");
    shutdown(p.client, SHUT_WR);
    pthread_join(reader, nullptr);
    if (d.failed) die("recv after the cancelled send");
    const std::vector<unsigned char>& got = d.got;
    bool ok = got.size() >= 3 && std::memcmp(got.data() + got.size() - 3, "END", 3) == 0;
    for (size_t i = 0; ok && i + 3 < got.size(); ++i) ok = got[i] == pattern(i);
    std::printf("send: the server reads a prefix of the pattern, then END, then EOF: %s\n", ok ? "yes" : "NO");
    close_pair(p);
}

// Cancellation disabled: the request waits, the calls return as they would.
struct Disabled {
    int fd;
    std::string recv_result, poll_result;
};

void* disabled_reader(void* arg) {
    auto* d = static_cast<Disabled*>(arg);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
    char buf[64];
    ssize_t n = recv(d->fd, buf, sizeof buf, 0);
    d->recv_result = n < 0 ? std::string("-1 ") + strerrorname_np(errno) : std::to_string(n) + " " + std::string(buf, static_cast<size_t>(n));
    pollfd p{d->fd, POLLIN, 0};
    int r = poll(&p, 1, -1);
    d->poll_result = r < 0 ? std::string("-1 ") + strerrorname_np(errno) : std::to_string(r);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);
    pthread_testcancel();
    d->poll_result += " (and not cancelled at the test)";
    return nullptr;
}

void cancel_disabled() {
    Pair p = connect_pair();
    Disabled d{p.client, "", ""};
    pthread_t t;
    pthread_create(&t, nullptr, disabled_reader, &d);
    usleep(200000);
    pthread_cancel(t);
    usleep(300000);  // the request must not end the recv
    if (send(p.server, "late", 4, 0) != 4) die("send late");
    usleep(300000);  // nor the poll
    if (send(p.server, "more", 4, 0) != 4) die("send more");
    void* rv = nullptr;
    pthread_join(t, &rv);
    std::printf("disabled: recv returned %s, poll returned %s, the thread %s at pthread_testcancel\n",
                d.recv_result.c_str(), d.poll_result.c_str(), rv == PTHREAD_CANCELED ? "was cancelled" : "returned");
    char buf[16];
    ssize_t n = recv(p.client, buf, sizeof buf, 0);
    std::printf("disabled: the bytes the poll saw are still there: %zd \"%.*s\"\n", n, static_cast<int>(n > 0 ? n : 0), buf);
    check_pair("disabled", p);
    close_pair(p);
}

// A request made while the thread runs acts at its next cancellation point's
// entry, bytes queued or not: the recv takes nothing.
struct Pending {
    int fd;
    std::atomic<bool> go{false};
    std::string result = "(nothing: cancelled at the call's entry)";
};

void* pending_reader(void* arg) {
    auto* d = static_cast<Pending*>(arg);
    while (!d->go.load()) {}
    char buf[64];
    ssize_t n = recv(d->fd, buf, sizeof buf, 0);
    d->result = std::to_string(n);
    return nullptr;
}

void cancel_pending() {
    Pair p = connect_pair();
    Pending d{p.client};
    pthread_t t;
    pthread_create(&t, nullptr, pending_reader, &d);
    pthread_cancel(t);
    if (send(p.server, "queued", 6, 0) != 6) die("send queued");
    usleep(100000);
    d.go.store(true);
    void* rv = nullptr;
    pthread_join(t, &rv);
    std::printf("pending: the thread %s; its recv: %s\n", rv == PTHREAD_CANCELED ? "was cancelled" : "returned",
                d.result.c_str());
    char buf[16];
    ssize_t n = recv(p.client, buf, sizeof buf, 0);
    std::printf("pending: the queued bytes are still there: %zd \"%.*s\"\n", n, static_cast<int>(n > 0 ? n : 0), buf);
    close_pair(p);
}

// close() is a cancellation point too: with a request pending it acts at the
// entry, and nothing is closed (the connection goes on).
struct Closer {
    int fd;
    std::atomic<bool> go{false};
    std::string result = "(nothing: cancelled at the call's entry)";
};

void* pending_closer(void* arg) {
    auto* d = static_cast<Closer*>(arg);
    while (!d->go.load()) {}
    d->result = std::to_string(close(d->fd));
    return nullptr;
}

void cancel_close() {
    Pair p = connect_pair();
    Closer d{p.client};
    pthread_t t;
    pthread_create(&t, nullptr, pending_closer, &d);
    pthread_cancel(t);
    d.go.store(true);
    void* rv = nullptr;
    pthread_join(t, &rv);
    std::printf("close: the thread %s; its close: %s\n", rv == PTHREAD_CANCELED ? "was cancelled" : "returned",
                d.result.c_str());
    check_pair("close", p);
    close_pair(p);
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    sockaddr_in a{};
    g_listener = check::listen_local(a);
    for (const char* call : {"recv", "recv of 0 bytes", "read", "poll", "select", "epoll_wait"}) cancel_asleep(call);
    cancel_first_wait();
    cancel_sender();
    cancel_disabled();
    cancel_pending();
    cancel_close();
    close(g_listener);
    return 0;
}
