#include "rdma/rdma_work_request.hpp"

#include <arpa/inet.h>

namespace rdmasock {

namespace {

int post_one(ibv_qp* qp, ibv_wr_opcode opcode, const LocalBuffer& local, const RemoteBuffer& remote,
             unsigned flags, uint64_t wr_id, uint32_t imm = 0) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uint64_t>(local.addr);
    sge.length = local.length;
    sge.lkey = local.lkey;
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = flags;
    wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = remote.addr;
    wr.wr.rdma.rkey = remote.rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

}  // namespace

int post_write(ibv_qp* qp, const RdmaWrite& w) {
    unsigned flags = 0;
    if (w.inline_data) flags |= IBV_SEND_INLINE;
    if (w.signaled) flags |= IBV_SEND_SIGNALED;
    return post_one(qp, w.with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, w.from, w.to, flags, w.wr_id,
                    w.imm);
}

int post_read(ibv_qp* qp, const RdmaRead& r) {
    const unsigned flags = r.signaled ? static_cast<unsigned>(IBV_SEND_SIGNALED) : 0u;
    return post_one(qp, IBV_WR_RDMA_READ, r.to, r.from, flags, r.wr_id);
}

int post_receive(ibv_qp* qp, uint64_t wr_id) {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = nullptr;
    wr.num_sge = 0;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &wr, &bad);
}

}  // namespace rdmasock
