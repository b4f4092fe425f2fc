// Work requests with named parameters: one RDMA WRITE (optionally inline) or
// one RDMA READ, one scatter/gather entry, never chained (the latency path
// posts one request at a time). What to post, when to signal and how to
// account for completions is the transport's business (rdma_transport.cpp);
// this layer only turns a description into an ibv_send_wr and posts it.
//
//   post_write(qp, {.from = {buf, len, mr->lkey}, .to = {addr, rkey}, .inline_data = true});
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace rdmasock {

// Registered local memory.
struct LocalBuffer {
    const void* addr = nullptr;
    uint32_t length = 0;
    uint32_t lkey = 0;
};

// Memory of the peer, as its RdmaParams announced it.
struct RemoteBuffer {
    uint64_t addr = 0;
    uint32_t rkey = 0;
};

struct RdmaWrite {
    LocalBuffer from;
    RemoteBuffer to;
    bool inline_data = false;  // IBV_SEND_INLINE: the caller checked length <= max_inline_data
    bool signaled = false;     // a completion is generated (and wr_id reported)
    uint64_t wr_id = 0;
    // IBV_WR_RDMA_WRITE_WITH_IMM: besides placing the data, consumes one receive
    // WR of the peer and raises a completion on its receive CQ carrying `imm`
    // (generated after the data is placed). The peer's doorbell (docs/waiting.md).
    bool with_imm = false;
    uint32_t imm = 0;
};

struct RdmaRead {
    RemoteBuffer from;
    LocalBuffer to;
    bool signaled = true;  // a READ is awaited: normally signaled
    uint64_t wr_id = 0;
};

// 0, or the error ibv_post_send returned (an errno value). ibv_post_send is an
// inline call through the QP's context ops: no libibverbs symbol is needed.
int post_write(ibv_qp* qp, const RdmaWrite& w);
int post_read(ibv_qp* qp, const RdmaRead& r);
// One receive WR without scatter/gather entries (the WRITE_WITH_IMMs it will
// match carry their data to a remote address, not into the WR). ibv_post_recv
// is inline too.
int post_receive(ibv_qp* qp, uint64_t wr_id);

}  // namespace rdmasock
