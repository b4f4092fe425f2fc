// Bringing a reliable-connected queue pair from RESET to RTS against a peer
// (INIT -> RTR -> RTS): shared by the RDMA transport and the benchmarks' basic
// mode, so both run the same addressing, timeouts and retry settings.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "rdma/rdma_device.hpp"
#include "rdma/rdma_params.hpp"

namespace rdmasock {

struct RcQpSettings {
    unsigned remote_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;  // what the peer may do to us
    uint32_t local_psn = 0;
    bool fail_rtr = false;  // fault injection: the RTR transition fails with EINVAL
};

// What this side tells the peer: its port's addressing, the queue pair, and
// the registered ring and control page the peer may write into.
RdmaParams local_rc_params(const RdmaDevice& dev, const ibv_qp* qp, uint32_t psn, const void* ring, const ibv_mr* ring_mr,
                           uint64_t ring_bytes, const void* ctrl, const ibv_mr* ctrl_mr);

// False with a reason naming the failed transition. path_mtu receives the
// negotiated MTU (enum ibv_mtu): the smaller of ours and the peer's.
bool rc_qp_connect(const RdmaDevice& dev, ibv_qp* qp, const RdmaParams& remote, const RcQpSettings& settings,
                   uint32_t& path_mtu, std::string& err);

}  // namespace rdmasock
