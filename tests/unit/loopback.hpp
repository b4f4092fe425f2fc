// A TCP listener on 127.0.0.1 for the unit tests that need a real loopback connection.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

namespace rdmasock::test {

// Listening on an ephemeral port (the kernel's choice); `a` gets its address.
inline int loopback_listener(sockaddr_in& a, int backlog = 1) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(l >= 0);
    a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(l, backlog) == 0);
    REQUIRE(getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    return l;
}

}  // namespace rdmasock::test
