// fork() while another thread is blocked on a connection (recv on an empty
// ring, send on a full one, poll, epoll_wait), and the child uses the
// connection (send, close) while that thread sleeps on in the parent. Over TCP
// the child's calls return at once and the parent's thread wakes for the next
// bytes. The shim's child copies the parent's memory: the sleeping thread's
// locks and doorbell drain (held, in the copy, by nobody) and its epoll arms
// (which the child's close must not undo: they are the parent's). Prints what
// a program sees; tests/integration/fork_wait.sh requires the same output over
// plain TCP and under the shim.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check_common.hpp"

namespace {

constexpr size_t kBig = 8u << 20;  // more than any ring or socket buffer holds

int g_listener = -1;
int C = -1, S = -1, EP = -1;
std::string g_block;

using check::die;

void connect_pair() {
    sockaddr_in a{};
    socklen_t alen = sizeof a;
    if (getsockname(g_listener, reinterpret_cast<sockaddr*>(&a), &alen) != 0) die("getsockname");
    C = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(C, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
    S = accept(g_listener, nullptr, nullptr);
    if (S < 0) die("accept");
    char c;
    for (int i = 0; i < 3; ++i) {  // under the shim: on the rings from here on
        if (send(S, "s", 1, 0) != 1 || recv(C, &c, 1, MSG_WAITALL) != 1) die("settle s->c");
        if (send(C, "c", 1, 0) != 1 || recv(S, &c, 1, MSG_WAITALL) != 1) die("settle c->s");
    }
    EP = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = C;
    if (epoll_ctl(EP, EPOLL_CTL_ADD, C, &ev) != 0) die("epoll_ctl");
}

std::string g_result;

void* blocked(void*) {
    char b[64];
    long r = 0;
    if (g_block == "recv") {
        r = recv(C, b, sizeof b, 0);
    } else if (g_block == "poll") {
        pollfd p{C, POLLIN, 0};
        r = poll(&p, 1, -1);
    } else if (g_block == "epoll_wait") {
        epoll_event e{};
        r = epoll_wait(EP, &e, 1, -1);
    } else if (g_block == "send") {
        std::vector<char> big(kBig, 'a');
        size_t off = 0;
        while (off < big.size()) {
            ssize_t n = send(C, big.data() + off, big.size() - off, 0);
            if (n <= 0) break;
            off += static_cast<size_t>(n);
        }
        r = static_cast<long>(off);
    }
    g_result = r < 0 ? std::string("-1 ") + strerrorname_np(errno) : std::to_string(r);
    return nullptr;
}

void child(const std::string& act) {
    if (act == "send" && g_block == "send") {
        // The buffers are full: this send waits for the parent to drain the server end.
        ssize_t n = send(C, "from child", 10, 0);
        std::printf("  child: send %zd\n", n);
    } else if (act == "send") {
        ssize_t n = send(C, "from child", 10, 0);
        char b[16];
        ssize_t m = recv(S, b, 10, MSG_WAITALL);
        std::printf("  child: send %zd, the server end reads %zd\n", n, m);
    } else if (act == "close") {
        std::printf("  child: close %d %d %d\n", close(C), close(S), close(EP));
    }
    std::fflush(stdout);
    _exit(0);
}

void run(const char* block, const char* act) {
    std::printf("a thread in %s, the child does %s:\n", block, act);
    g_block = block;
    connect_pair();
    pthread_t t;
    pthread_create(&t, nullptr, blocked, nullptr);
    usleep(200000);  // asleep by now (or about to be: the same transcript)
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) child(act);
    if (g_block == "send") {
        // The server end reads everything: the blocked send's bytes, and the child's.
        std::vector<char> b(1 << 16);
        size_t got = 0;
        const size_t want = kBig + (std::string(act) == "send" ? 10 : 0);
        while (got < want) {
            ssize_t n = recv(S, b.data(), b.size(), 0);
            if (n <= 0) die("recv of the blocked send's bytes");
            got += static_cast<size_t>(n);
        }
    }
    int st = 0;
    waitpid(pid, &st, 0);
    std::printf("  the child exited %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    if (g_block != "send" && send(S, "to A", 4, 0) != 4) die("send to A");
    pthread_join(t, nullptr);
    std::printf("  the parent's thread: %s returned %s\n", block, g_result.c_str());
    char b[16];
    if (send(C, "again", 5, 0) != 5) die("send again");
    ssize_t n = recv(S, b, 5, MSG_WAITALL);
    std::printf("  and the connection goes on: %zd \"%.*s\"\n", n, static_cast<int>(n > 0 ? n : 0), b);
    close(EP);
    close(C);
    close(S);
}

// A child whose first call on the connection is shutdown(SHUT_WR): the socket
// is both processes', so the server end reads the bytes before it, then EOF,
// and still sends to the parent's end.
void child_shuts_down() {
    std::printf("no thread blocked, the child's first call is shutdown(SHUT_WR):\n");
    connect_pair();
    if (send(C, "pending", 7, 0) != 7) die("send pending");
    const pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        std::printf("  child: shutdown %d\n", shutdown(C, SHUT_WR));
        std::fflush(stdout);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    char b[16];
    ssize_t n = recv(S, b, sizeof b, MSG_WAITALL);
    ssize_t eof = recv(S, b, sizeof b, 0);
    std::printf("  the server end reads %zd, then %zd\n", n, eof);
    if (send(S, "reply", 5, 0) != 5) die("send reply");
    n = recv(C, b, 5, MSG_WAITALL);
    std::printf("  and the parent's end still reads: %zd \"%.*s\"\n", n, static_cast<int>(n > 0 ? n : 0), b);
    close(EP);
    close(C);
    close(S);
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    sockaddr_in a{};
    g_listener = check::listen_local(a);
    for (const char* block : {"recv", "send", "poll", "epoll_wait"})
        for (const char* act : {"send", "close"}) run(block, act);
    child_shuts_down();
    return 0;
}
