// RDMASOCK_* environment configuration. Every variable is validated; a bad value
// produces a message naming the variable and the default is kept, so the
// program carries on (over TCP when the transport setting itself is bad).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "base/peer_rules.hpp"

namespace rdmasock {

enum class TransportChoice { automatic, shm, rdma, tcp };

struct Config {
    TransportChoice transport = TransportChoice::automatic;
    uint64_t ring_bytes = 1 << 20;     // RDMASOCK_RING_SIZE: per direction, power of two
    static constexpr uint64_t kRingMemoryAuto = UINT64_MAX;
    uint64_t ring_memory = kRingMemoryAuto;  // RDMASOCK_RING_MEMORY: most ring memory this process holds (memory_budget.hpp)
    uint32_t spin_us = 20;              // RDMASOCK_SPIN_US: busy-poll before sleeping (chosen by measurement: docs/waiting.md)
    uint32_t spin_max_us = 200;         // RDMASOCK_SPIN_MAX_US: cap of the learned spin (spin_policy.hpp); <= spin_us: fixed spin
    // RDMASOCK_SHM_AFTER_US: a same-host connection switches only once it has lived this
    // long (and made a few calls); one that ends sooner never pays for rings, and on a host
    // without RDMA looks nothing up either (docs/protocol.md, "Deferred discovery"). 0: at
    // once. Unset: kShmAfterDefaultUs on a host without RDMA, 0 on one with a device, where
    // discovery runs at connect anyway (Connection::shm_after_us resolves it).
    static constexpr uint32_t kShmAfterAuto = UINT32_MAX;
    static constexpr uint32_t kShmAfterDefaultUs = 2000;
    uint32_t shm_after_us = kShmAfterAuto;
    LogLevel log_level = LogLevel::warn;  // RDMASOCK_LOG
    bool stats = false;                 // RDMASOCK_STATS
    uint32_t handshake_timeout_ms = 10000;  // RDMASOCK_HANDSHAKE_TIMEOUT_MS
    bool shm_same_user_only = false;    // RDMASOCK_SHM_USERS=same: shared memory only between processes of one user
    std::string fault;                  // RDMASOCK_FAULT: test-only fault injection point
    std::string rdma_device;            // RDMASOCK_DEVICE: verbs device name; empty = first active port
    int gid_index = -1;                 // RDMASOCK_GID_INDEX: -1 = prefer a RoCE v2 IPv4-mapped GID
    std::vector<PeerRule> peers;        // RDMASOCK_PEERS: other hosts offered RDMA (peer_rules.hpp)
    // Send-queue discipline (issue #14 item 2), kept as knobs so a benchmark can
    // measure each choice against its alternative in one run (docs/rdma-transport.md).
    uint32_t rdma_signal_every = 64;    // RDMASOCK_RDMA_SIGNAL_EVERY: one signaled WRITE per N (capped at depth/4)
    bool rdma_inline = true;            // RDMASOCK_RDMA_INLINE: inline records that fit max_inline_data
};

// getenv is injected so tests can feed arbitrary values. Returns messages for
// every rejected variable (empty when all is well).
Config parse_config(const std::function<const char*(const char*)>& getenv_fn, std::vector<std::string>& errors);

const char* to_string(TransportChoice t);

}  // namespace rdmasock
