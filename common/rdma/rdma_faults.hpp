// Fault injection points of the RDMA layers (RDMASOCK_FAULT, tests only), parsed
// once per setup into a bit set: the verbs code tests bits, never strings.
//
//   rdma-no-device  the device list comes back empty
//   rdma-open       ibv_open_device fails (as without permission)
//   rdma-qp-create  ibv_create_qp fails
//   rdma-qp-rtr     the queue pair's transition to RTR fails
//   rdma-bad-gid    the client aims its QP at a GID nobody holds (the probe READ
//                   goes unanswered)
//   rdma-dontfork   not a failure: MADV_DONTFORK even on a copy-on-fork kernel
//   rdma-qp-error   the queue pair is forced into the error state mid-stream,
//                   after a random 1 B..4 MiB of records (the connection goes
//                   back to TCP: docs/protocol.md, "Downgrade over RDMA")
//
// The value may list several, separated by commas. Names of other layers
// (client-hello, shm-create, ...) are not RDMA faults and are ignored here.
#pragma once

#include <cstdint>
#include <string_view>

namespace rdmasock {

enum class RdmaFault : uint32_t {
    no_device = 1u << 0,
    open = 1u << 1,
    qp_create = 1u << 2,
    qp_rtr = 1u << 3,
    bad_gid = 1u << 4,
    dontfork = 1u << 5,
    qp_error = 1u << 6,
};

class RdmaFaults {
public:
    RdmaFaults() = default;
    static RdmaFaults parse(std::string_view spec);
    bool has(RdmaFault f) const { return bits_ & static_cast<uint32_t>(f); }
    RdmaFaults& add(RdmaFault f) { bits_ |= static_cast<uint32_t>(f); return *this; }
    bool any() const { return bits_ != 0; }

private:
    uint32_t bits_ = 0;
};

}  // namespace rdmasock
