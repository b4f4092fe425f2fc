#include "base/config.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "ring/ring_format.hpp"

namespace rdmasock {

namespace {

// Parses an unsigned decimal with an optional K/M/G suffix.
bool parse_size(const char* s, uint64_t& out) {
    if (!s || !*s || *s == '-' || *s == '+') return false;
    errno = 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (errno || end == s) return false;
    uint64_t mult = 1;
    if (*end == 'k' || *end == 'K') mult = 1ull << 10, ++end;
    else if (*end == 'm' || *end == 'M') mult = 1ull << 20, ++end;
    else if (*end == 'g' || *end == 'G') mult = 1ull << 30, ++end;
    if (*end != '\0' || v > UINT64_MAX / mult) return false;
    out = v * mult;
    return true;
}

bool parse_bool(const char* s, bool& out) {
    for (const char* t : {"1", "yes", "true", "on"})
        if (!strcasecmp(s, t)) return out = true, true;
    for (const char* f : {"0", "no", "false", "off", ""})
        if (!strcasecmp(s, f)) return out = false, true;
    return false;
}

}  // namespace

const char* to_string(TransportChoice t) {
    switch (t) {
        case TransportChoice::automatic: return "auto";
        case TransportChoice::shm: return "shm";
        case TransportChoice::rdma: return "rdma";
        case TransportChoice::tcp: return "tcp";
    }
    return "?";
}

Config parse_config(const std::function<const char*(const char*)>& getenv_fn, std::vector<std::string>& errors) {
    Config c;
    auto bad = [&](const char* var, const char* value, const char* expected, const char* fallback) {
        errors.push_back(std::string(var) + "='" + value + "' is invalid (expected " + expected + "); using " +
                         fallback);
    };
    if (const char* v = getenv_fn("RDMASOCK_TRANSPORT")) {
        if (!strcasecmp(v, "auto")) c.transport = TransportChoice::automatic;
        else if (!strcasecmp(v, "shm")) c.transport = TransportChoice::shm;
        else if (!strcasecmp(v, "rdma")) c.transport = TransportChoice::rdma;
        else if (!strcasecmp(v, "tcp")) c.transport = TransportChoice::tcp;
        else {
            c.transport = TransportChoice::tcp;  // an unknown wish is safest served by plain TCP
            bad("RDMASOCK_TRANSPORT", v, "auto, shm, rdma or tcp", "tcp");
        }
    }
    if (const char* v = getenv_fn("RDMASOCK_RING_SIZE")) {
        uint64_t n = 0;
        if (!parse_size(v, n) || !ring::valid_capacity(n))
            bad("RDMASOCK_RING_SIZE", v, "a power of two from 1K to 1G", "1M");
        else c.ring_bytes = n;
    }
    if (const char* v = getenv_fn("RDMASOCK_RING_MEMORY")) {
        uint64_t n = 0;
        if (!strcasecmp(v, "auto")) c.ring_memory = Config::kRingMemoryAuto;
        else if (!parse_size(v, n) || n == Config::kRingMemoryAuto)
            bad("RDMASOCK_RING_MEMORY", v, "auto or a size in bytes (K, M, G suffixes)", "auto");
        else c.ring_memory = n;
    }
    if (const char* v = getenv_fn("RDMASOCK_SPIN_US")) {
        uint64_t n = 0;
        if (!parse_size(v, n) || n > 1000000) bad("RDMASOCK_SPIN_US", v, "microseconds from 0 to 1000000", "20");
        else c.spin_us = static_cast<uint32_t>(n);
    }
    if (const char* v = getenv_fn("RDMASOCK_SPIN_MAX_US")) {
        uint64_t n = 0;
        if (!parse_size(v, n) || n > 1000000) bad("RDMASOCK_SPIN_MAX_US", v, "microseconds from 0 to 1000000", "200");
        else c.spin_max_us = static_cast<uint32_t>(n);
    }
    if (const char* v = getenv_fn("RDMASOCK_SHM_AFTER_US")) {
        uint64_t n = 0;
        if (!parse_size(v, n) || n > 60000000) bad("RDMASOCK_SHM_AFTER_US", v, "microseconds from 0 to 60000000",
                "the default (2000 without an RDMA device, 0 with one)");
        else c.shm_after_us = static_cast<uint32_t>(n);
    }
    if (const char* v = getenv_fn("RDMASOCK_LOG")) {
        static const char* names[] = {"off", "error", "warn", "info", "debug"};
        bool found = false;
        for (int i = 0; i < 5; ++i)
            if (!strcasecmp(v, names[i])) c.log_level = static_cast<LogLevel>(i), found = true;
        if (!found) bad("RDMASOCK_LOG", v, "off, error, warn, info or debug", "warn");
    }
    if (const char* v = getenv_fn("RDMASOCK_STATS")) {
        if (!parse_bool(v, c.stats)) bad("RDMASOCK_STATS", v, "0 or 1", "0");
    }
    if (const char* v = getenv_fn("RDMASOCK_HANDSHAKE_TIMEOUT_MS")) {
        uint64_t n = 0;
        if (!parse_size(v, n) || n == 0 || n > 600000)
            bad("RDMASOCK_HANDSHAKE_TIMEOUT_MS", v, "milliseconds from 1 to 600000", "10000");
        else c.handshake_timeout_ms = static_cast<uint32_t>(n);
    }
    if (const char* v = getenv_fn("RDMASOCK_SHM_USERS")) {
        if (!strcasecmp(v, "any")) c.shm_same_user_only = false;
        else if (!strcasecmp(v, "same")) c.shm_same_user_only = true;
        else bad("RDMASOCK_SHM_USERS", v, "any or same", "any");
    }
    if (const char* v = getenv_fn("RDMASOCK_FAULT")) c.fault = v;
    if (const char* v = getenv_fn("RDMASOCK_DEVICE")) {
        bool ok = *v && std::strlen(v) < 64;
        for (const char* p = v; ok && *p; ++p) ok = isalnum(static_cast<unsigned char>(*p)) || *p == '_' || *p == '-' || *p == '.';
        if (!ok) bad("RDMASOCK_DEVICE", v, "a verbs device name such as mlx5_0 or rxe0", "the first active device");
        else c.rdma_device = v;
    }
    if (const char* v = getenv_fn("RDMASOCK_GID_INDEX")) {
        uint64_t n = 0;
        if (!strcasecmp(v, "auto")) c.gid_index = -1;
        else if (!parse_size(v, n) || n > 255 || !isdigit(static_cast<unsigned char>(v[strlen(v) - 1])))
            bad("RDMASOCK_GID_INDEX", v, "auto or an index from 0 to 255", "auto");
        else c.gid_index = static_cast<int>(n);
    }
    if (const char* v = getenv_fn("RDMASOCK_RDMA_SIGNAL_EVERY")) {
        uint64_t n = 0;
        if (!parse_size(v, n) || n < 1 || n > 1024 || !isdigit(static_cast<unsigned char>(v[strlen(v) - 1])))
            bad("RDMASOCK_RDMA_SIGNAL_EVERY", v, "a count from 1 to 1024", "64");
        else c.rdma_signal_every = static_cast<uint32_t>(n);
    }
    if (const char* v = getenv_fn("RDMASOCK_RDMA_INLINE")) {
        if (!parse_bool(v, c.rdma_inline) || !*v) {
            c.rdma_inline = true;
            bad("RDMASOCK_RDMA_INLINE", v, "0 or 1", "1");
        }
    }
    if (const char* v = getenv_fn("RDMASOCK_PEERS")) {
        std::string why;
        if (!parse_peer_rules(v, c.peers, why))
            errors.push_back(std::string("RDMASOCK_PEERS='") + v + "' is invalid (" + why +
                             "; expected addresses or CIDR prefixes separated by commas); offering RDMA to no other host");
    }
    return c;
}

}  // namespace rdmasock
