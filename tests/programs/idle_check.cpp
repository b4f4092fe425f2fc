// An idle connection, for tests/integration/idle_cpu.sh: a plain TCP program
// (no shim code) run under LD_PRELOAD on both ends.
//
//   idle_check serve PORT WAIT      accept, take two pings, then block in WAIT
//   idle_check connect PORT WAIT    connect, ping twice, then block in WAIT
//
// WAIT is recv, poll or epoll. After the ping exchange (which settles the
// negotiation) each side prints "idle" and blocks with an infinite timeout.
// A line on the client's stdin ends it: the client sends "bye", the server
// wakes, answers "bye" and exits; the client wakes on that answer and exits.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

[[noreturn]] void die(const char* what) {
    perror(what);
    exit(2);
}

int open_connection(bool server, int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (server) {
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(s, 1)) die("listen");
        printf("listening\n");
        int c = accept(s, nullptr, nullptr);
        if (c < 0) die("accept");
        close(s);
        return c;
    }
    for (int i = 0; connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0; ++i) {
        if (i > 300) die("connect");
        usleep(10000);
    }
    return s;
}

// Blocks until the socket is readable, the way WAIT says, with no timeout.
void wait_readable(int fd, const std::string& how) {
    if (how == "poll") {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, -1) != 1) die("poll");
    } else if (how == "epoll") {
        int ep = epoll_create1(0);
        epoll_event ev{EPOLLIN, {}};
        epoll_event got{};
        if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) || epoll_wait(ep, &got, 1, -1) != 1) die("epoll");
        close(ep);
    }  // recv: the read below blocks
}

bool expect(int fd, const char* word) {
    char buf[16] = {};
    size_t n = strlen(word), got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0) return false;
        got += static_cast<size_t>(r);
    }
    return memcmp(buf, word, n) == 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: idle_check serve|connect PORT recv|poll|epoll\n");
        return 2;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const bool server = std::string(argv[1]) == "serve";
    const std::string how = argv[3];
    int fd = open_connection(server, atoi(argv[2]));
    if (server) {
        // Two exchanges: a same-host connection is on the rings once each side has
        // seen the other's next call (the side-channel rendezvous).
        for (int i = 0; i < 2; ++i)
            if (!expect(fd, "ping") || send(fd, "pong", 4, 0) != 4) die("ping");
        printf("idle\n");
        wait_readable(fd, how);
        if (!expect(fd, "bye") || send(fd, "bye", 3, 0) != 3) die("bye");
    } else {
        for (int i = 0; i < 2; ++i)
            if (send(fd, "ping", 4, 0) != 4 || !expect(fd, "pong")) die("ping");
        std::thread stopper([fd] {  // sleeps in read(2) on stdin: no CPU until told
            char line[64];
            if (!fgets(line, sizeof line, stdin) || send(fd, "bye", 3, 0) != 3) die("stop");
        });
        printf("idle\n");
        wait_readable(fd, how);
        if (!expect(fd, "bye")) die("bye");
        stopper.join();
    }
    close(fd);
    printf("done\n");
    return 0;
}
