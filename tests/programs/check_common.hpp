// What the transcript programs (tests/programs/*_check.cpp) share: how they
// fail (a line in the transcript, which then differs from TCP's) and their
// listener (a port the kernel picks, so runs never collide; on 127.0.0.1, or
// on $CHECK_ADDR, which tests/rdma/compare_rdma.sh sets to the RDMA VM's
// address so that the same program runs over rdma).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace check {

[[noreturn]] inline void die(const char* what) {
    std::printf("FAILED: %s (%s)\n", what, strerror(errno));
    std::fflush(stdout);
    _exit(2);
}

// A listening socket; `a` gets its address.
inline int listen_local(sockaddr_in& a, int backlog = 8) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    a = sockaddr_in{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const char* addr = std::getenv("CHECK_ADDR");
    if (addr && *addr && inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
        errno = EINVAL;
        die("CHECK_ADDR is not an IPv4 address");
    }
    socklen_t alen = sizeof a;
    if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, backlog) != 0 ||
        getsockname(l, reinterpret_cast<sockaddr*>(&a), &alen) != 0)
        die("listen");
    return l;
}

}  // namespace check
