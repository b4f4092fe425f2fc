// "RDMA without optimizations" for the rdma-basic ping-pong mode: a message is an
// RDMA WRITE of the payload into the peer's receive buffer followed by a separate
// atomic fetch-and-add on the peer's message counter; the receiver polls the
// counter. No ring, no inline, one signaled completion per message. Uses
// RdmaDevice for the device and port; the queue pair is its own (it needs
// REMOTE_ATOMIC access, which RdmaTransport never grants).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rdma/rdma_device.hpp"
#include "rdma/rdma_params.hpp"

namespace rdmasock::bench {

class BasicQp {
public:
    // Registers a receive buffer of at least `bytes`, a send buffer of the same
    // size and the counter; creates the RC queue pair. nullptr + err on failure.
    static std::unique_ptr<BasicQp> create(RdmaDevice& dev, uint64_t bytes, std::string& err);
    ~BasicQp();
    BasicQp(const BasicQp&) = delete;
    BasicQp& operator=(const BasicQp&) = delete;

    // Our receive buffer goes in ring_addr/ring_rkey, the counter in ctrl_addr/ctrl_rkey.
    RdmaParams local_params() const;
    bool connect(const RdmaParams& remote, std::string& err);

    uint8_t* send_buf() { return send_; }
    const uint8_t* recv_buf() const { return recv_; }
    // WRITE send_buf()[0, len) to the peer's receive buffer, then fetch-and-add 1
    // on its counter. False + err on a post or completion error.
    bool send(uint32_t len, std::string& err);
    // Spins (reaping our completions) until our counter reaches `count`.
    bool wait_count(uint64_t count, std::string& err);

private:
    explicit BasicQp(RdmaDevice& dev) : dev_(dev) {}
    bool reap(std::string& err);

    RdmaDevice& dev_;
    uint64_t bytes_ = 0;
    uint8_t* recv_ = nullptr;
    uint8_t* send_ = nullptr;
    uint8_t* words_ = nullptr;  // page: [0] our counter (peer adds), [64] fetch-and-add result
    ibv_mr* recv_mr_ = nullptr;
    ibv_mr* send_mr_ = nullptr;
    ibv_mr* words_mr_ = nullptr;
    ibv_cq* cq_ = nullptr;
    ibv_qp* qp_ = nullptr;
    uint32_t psn_ = 0;
    uint32_t depth_ = 0;
    uint32_t outstanding_ = 0;  // posted work requests not yet known complete
    RdmaParams remote_{};
};

}  // namespace rdmasock::bench
