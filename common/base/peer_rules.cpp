#include "base/peer_rules.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>

namespace rdmasock {

namespace {

bool parse_one(std::string item, PeerRule& rule, std::string& err) {
    std::string bits;
    const auto slash = item.find('/');
    if (slash != std::string::npos) {
        bits = item.substr(slash + 1);
        item.resize(slash);
    }
    unsigned max_bits;
    if (inet_pton(AF_INET, item.c_str(), rule.addr) == 1) rule.family = AF_INET, max_bits = 32;
    else if (inet_pton(AF_INET6, item.c_str(), rule.addr) == 1) rule.family = AF_INET6, max_bits = 128;
    else {
        err = "'" + item + "' is not an IPv4 or IPv6 address";
        return false;
    }
    rule.prefix_bits = max_bits;
    if (slash != std::string::npos) {
        char* end = nullptr;
        unsigned long n = std::strtoul(bits.c_str(), &end, 10);
        if (bits.empty() || *end != '\0' || n > max_bits || bits[0] == '-' || bits[0] == '+') {
            err = "'/" + bits + "' is not a prefix length from 0 to " + std::to_string(max_bits);
            return false;
        }
        rule.prefix_bits = static_cast<unsigned>(n);
    }
    return true;
}

bool prefix_equal(const uint8_t* a, const uint8_t* b, unsigned bits) {
    unsigned whole = bits / 8, rest = bits % 8;
    if (std::memcmp(a, b, whole) != 0) return false;
    if (rest == 0) return true;
    uint8_t mask = static_cast<uint8_t>(0xFF << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

}  // namespace

bool parse_peer_rules(const std::string& text, std::vector<PeerRule>& out, std::string& err) {
    std::vector<PeerRule> rules;
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        std::string item = text.substr(start, comma - start);
        while (!item.empty() && item.front() == ' ') item.erase(item.begin());
        while (!item.empty() && item.back() == ' ') item.pop_back();
        if (item.empty()) {
            err = "empty entry";
            return false;
        }
        PeerRule r;
        if (!parse_one(item, r, err)) return false;
        rules.push_back(r);
        start = comma + 1;
    }
    out = std::move(rules);
    return true;
}

bool peer_matches(const std::vector<PeerRule>& rules, const sockaddr* addr, socklen_t len) {
    if (!addr || rules.empty()) return false;
    uint8_t v4[4], v6[16];
    bool have4 = false, have6 = false;
    if (addr->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
        std::memcpy(v4, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, 4);
        have4 = true;
    } else if (addr->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
        const auto* a6 = &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
        std::memcpy(v6, a6, 16);
        have6 = true;
        if (IN6_IS_ADDR_V4MAPPED(a6)) std::memcpy(v4, v6 + 12, 4), have4 = true;
    }
    for (const PeerRule& r : rules) {
        if (r.family == AF_INET && have4 && prefix_equal(r.addr, v4, r.prefix_bits)) return true;
        if (r.family == AF_INET6 && have6 && prefix_equal(r.addr, v6, r.prefix_bits)) return true;
    }
    return false;
}

}  // namespace rdmasock
