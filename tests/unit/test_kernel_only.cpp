// Which socket options keep a connection on TCP (kernel_only.hpp).
#include <catch2/catch.hpp>

#include "connection/kernel_only.hpp"

using namespace rdmasock;

namespace {
std::optional<KernelOnly> set_int(int level, int name, int v) { return kernel_only_option(level, name, &v, sizeof v); }
}  // namespace

TEST_CASE("options the rings do not model keep the connection on TCP (by value)") {
    CHECK(set_int(SOL_SOCKET, SO_RCVLOWAT, 2));
    CHECK_FALSE(set_int(SOL_SOCKET, SO_RCVLOWAT, 1));  // one byte is what every read needs anyway
    CHECK(set_int(SOL_SOCKET, SO_ZEROCOPY, 1));
    CHECK_FALSE(set_int(SOL_SOCKET, SO_ZEROCOPY, 0));
    CHECK(set_int(SOL_SOCKET, SO_PEEK_OFF, 0));
    CHECK_FALSE(set_int(SOL_SOCKET, SO_PEEK_OFF, -1));  // -1 turns peek offsets off
    CHECK(set_int(SOL_SOCKET, SO_TIMESTAMP_OLD, 1));
    CHECK(set_int(SOL_SOCKET, SO_TIMESTAMPNS_NEW, 1));
    CHECK(set_int(SOL_SOCKET, SO_TIMESTAMPING_OLD, 1));
    CHECK_FALSE(set_int(SOL_SOCKET, SO_TIMESTAMP_OLD, 0));
    CHECK(set_int(IPPROTO_TCP, TCP_INQ, 1));
    CHECK(set_int(IPPROTO_TCP, TCP_REPAIR, 1));
    CHECK_FALSE(set_int(IPPROTO_TCP, TCP_NODELAY, 1));
    CHECK_FALSE(set_int(SOL_SOCKET, SO_KEEPALIVE, 1));
    CHECK_FALSE(set_int(SOL_SOCKET, SO_RCVBUF, 1 << 20));
}

TEST_CASE("kernel TLS goes back before the option takes effect") {
    const char tls[] = "tls";
    auto k = kernel_only_option(IPPROTO_TCP, TCP_ULP, tls, sizeof tls);
    REQUIRE(k);
    CHECK(k->before_the_call);
    CHECK(std::string(k->option) == "TCP_ULP");
    CHECK_FALSE(set_int(SOL_SOCKET, SO_RCVLOWAT, 4)->before_the_call);
}

TEST_CASE("a value too short or missing reads as zero") {
    char one = 1;
    CHECK_FALSE(kernel_only_option(SOL_SOCKET, SO_ZEROCOPY, &one, 1));
    CHECK_FALSE(kernel_only_option(SOL_SOCKET, SO_ZEROCOPY, nullptr, 4));
    CHECK(kernel_only_option(SOL_SOCKET, SO_PEEK_OFF, nullptr, 0));  // reads 0: peek offsets on
}
