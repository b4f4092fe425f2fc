#include "rdma/rdma_qp.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rdmasock {

RdmaParams local_rc_params(const RdmaDevice& dev, const ibv_qp* qp, uint32_t psn, const void* ring, const ibv_mr* ring_mr,
                           uint64_t ring_bytes, const void* ctrl, const ibv_mr* ctrl_mr) {
    RdmaParams p;
    std::memcpy(p.gid, dev.gid().raw, 16);
    p.qpn = qp->qp_num;
    p.psn = psn;
    p.mtu = dev.active_mtu();
    p.ring_addr = reinterpret_cast<uint64_t>(ring);
    p.ring_rkey = ring_mr->rkey;
    p.ring_bytes = ring_bytes;
    p.ctrl_addr = reinterpret_cast<uint64_t>(ctrl);
    p.ctrl_rkey = ctrl_mr->rkey;
    p.lid = dev.is_roce() ? 0 : dev.lid();
    return p;
}

bool rc_qp_connect(const RdmaDevice& dev, ibv_qp* qp, const RdmaParams& remote, const RcQpSettings& settings,
                   uint32_t& path_mtu, std::string& err) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = dev.port();
    a.qp_access_flags = settings.remote_access;
    if (int rc = dev.api().modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        err = "ibv_modify_qp(INIT) failed: " + errno_text(rc);
        return false;
    }

    path_mtu = std::min<uint32_t>(dev.active_mtu(), remote.mtu);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(path_mtu);
    a.dest_qp_num = remote.qpn;
    a.rq_psn = remote.psn;
    a.max_dest_rd_atomic = 1;  // the peer has at most one READ/atomic outstanding (its max_rd_atomic)
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = dev.port();
    a.ah_attr.sl = 0;
    a.ah_attr.src_path_bits = 0;
    if (dev.is_roce()) {
        // RoCE: every packet carries a GRH (RoCE v2: the IP header), addressed by GID.
        a.ah_attr.is_global = 1;
        std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
        a.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev.gid_index());
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.grh.traffic_class = 0;
        a.ah_attr.grh.flow_label = 0;
    } else {
        a.ah_attr.is_global = 0;  // InfiniBand, same subnet: LID routed (untested here)
        a.ah_attr.dlid = remote.lid;
    }
    int rc = settings.fail_rtr ? EINVAL : 0;
    if (!rc)
        rc = dev.api().modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc) {
        err = "ibv_modify_qp(RTR) failed: " + errno_text(rc) + (settings.fail_rtr ? " [fault injection rdma-qp-rtr]" : "");
        return false;
    }

    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;    // 4.096 us * 2^14 = 67 ms per transport retry
    a.retry_cnt = 7;
    a.rnr_retry = 7;   // no receives are posted, so RNR never happens; 7 = retry forever
    a.sq_psn = settings.local_psn;
    a.max_rd_atomic = 1;
    if ((rc = dev.api().modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                IBV_QP_MAX_QP_RD_ATOMIC))) {
        err = "ibv_modify_qp(RTS) failed: " + errno_text(rc);
        return false;
    }
    return true;
}

}  // namespace rdmasock
