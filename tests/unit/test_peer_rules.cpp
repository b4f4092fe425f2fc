// RDMASOCK_PEERS: which other hosts are sent a HELLO offering RDMA.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <catch2/catch.hpp>

#include "base/peer_rules.hpp"

using namespace rdmasock;

namespace {
bool matches(const std::vector<PeerRule>& rules, const char* ip) {
    sockaddr_storage ss{};
    if (inet_pton(AF_INET, ip, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr) == 1) {
        ss.ss_family = AF_INET;
        return peer_matches(rules, reinterpret_cast<sockaddr*>(&ss), sizeof(sockaddr_in));
    }
    REQUIRE(inet_pton(AF_INET6, ip, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr) == 1);
    ss.ss_family = AF_INET6;
    return peer_matches(rules, reinterpret_cast<sockaddr*>(&ss), sizeof(sockaddr_in6));
}
}  // namespace

TEST_CASE("addresses and prefixes match what they cover and nothing else") {
    std::vector<PeerRule> rules;
    std::string err;
    REQUIRE(parse_peer_rules("10.99.1.0/24,192.168.7.9,fd00::/16,11.0.0.0/9", rules, err));
    CHECK(matches(rules, "10.99.1.2"));
    CHECK(matches(rules, "10.99.1.255"));
    CHECK_FALSE(matches(rules, "10.99.2.1"));
    CHECK(matches(rules, "192.168.7.9"));
    CHECK_FALSE(matches(rules, "192.168.7.8"));
    CHECK(matches(rules, "11.127.255.255"));  // /9
    CHECK_FALSE(matches(rules, "11.128.0.0"));
    CHECK(matches(rules, "fd00:1::2"));
    CHECK_FALSE(matches(rules, "fe80::1"));
    CHECK(matches(rules, "::ffff:10.99.1.7"));  // IPv4-mapped matches the IPv4 rule
    CHECK_FALSE(matches({}, "10.99.1.2"));
}

TEST_CASE("a /0 prefix matches every address of its family") {
    std::vector<PeerRule> rules;
    std::string err;
    REQUIRE(parse_peer_rules("0.0.0.0/0", rules, err));
    CHECK(matches(rules, "1.2.3.4"));
    CHECK_FALSE(matches(rules, "2001:db8::1"));
}

TEST_CASE("bad lists are refused whole, with the bad entry named") {
    std::string err;
    std::vector<PeerRule> rules;
    for (const char* bad : {"", ",", "10.0.0.1,", "10.0.0.1/-1", "10.0.0.1/+8", "10.0.0.1/x", "::1/129", "host.example"}) {
        INFO(bad);
        CHECK_FALSE(parse_peer_rules(bad, rules, err));
        CHECK_FALSE(err.empty());
        CHECK(rules.empty());
    }
}
