// What the transcript programs (tests/programs/*_check.cpp) share: how they
// fail (a line in the transcript, which then differs from TCP's) and their
// listener (127.0.0.1, a port the kernel picks, so runs never collide).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace check {

[[noreturn]] inline void die(const char* what) {
    std::printf("FAILED: %s (%s)\n", what, strerror(errno));
    std::fflush(stdout);
    _exit(2);
}

// A listening socket; `a` gets its address.
inline int listen_loopback(sockaddr_in& a, int backlog = 8) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    a = sockaddr_in{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, backlog) != 0 ||
        getsockname(l, reinterpret_cast<sockaddr*>(&a), &alen) != 0)
        die("listen");
    return l;
}

}  // namespace check
