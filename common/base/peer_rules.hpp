// Which remote peers get a HELLO offering RDMA. A HELLO sent to a program that
// does not run the shim would reach it as application bytes, so other hosts are
// only offered RDMA when configured: RDMASOCK_PEERS, a comma-separated list of
// IPv4/IPv6 addresses or CIDR prefixes ("10.99.1.0/24,fd00::7"). Same-host
// peers are found through the registry instead (common/registry.hpp).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rdmasock {

struct PeerRule {
    int family = 0;           // AF_INET or AF_INET6
    uint8_t addr[16] = {};    // network byte order (first 4 bytes for IPv4)
    unsigned prefix_bits = 0;  // 0..32 or 0..128
};

// Parses the list; false with a reason naming the bad entry.
bool parse_peer_rules(const std::string& text, std::vector<PeerRule>& out, std::string& err);

// True when `addr` (AF_INET or AF_INET6; IPv4-mapped IPv6 matches IPv4 rules)
// falls inside one of the rules.
bool peer_matches(const std::vector<PeerRule>& rules, const sockaddr* addr, socklen_t len);

}  // namespace rdmasock
