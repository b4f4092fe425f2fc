#include "basic_qp.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "rdma/rdma_qp.hpp"
#include "ring/ring_format.hpp"

namespace rdmasock::bench {

namespace {

constexpr size_t kPage = 4096;
constexpr uint32_t kDepth = 64;

uint8_t* map(uint64_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

// The exchange reuses RdmaParams, whose ring size must be a valid ring capacity.
uint64_t buffer_bytes(uint64_t want) {
    uint64_t b = ring::kMinCapacity;
    while (b < want || b < kPage) b <<= 1;
    return b;
}

}  // namespace

std::unique_ptr<BasicQp> BasicQp::create(RdmaDevice& dev, uint64_t bytes, std::string& err) {
    if (!dev.usable(err)) return nullptr;
    if (dev.attr().atomic_cap == IBV_ATOMIC_NONE) {
        err = dev.name() + " has no atomic operations (atomic_cap NONE)";
        return nullptr;
    }
    std::unique_ptr<BasicQp> q(new BasicQp(dev));
    q->bytes_ = buffer_bytes(bytes);
    if (!(q->recv_ = map(q->bytes_)) || !(q->send_ = map(q->bytes_)) || !(q->words_ = map(kPage))) {
        err = "mmap failed: " + errno_text(errno);
        return nullptr;
    }
    ibv_pd* pd = dev.pd();
    q->recv_mr_ = ibv_reg_mr(pd, q->recv_, q->bytes_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    q->send_mr_ = ibv_reg_mr(pd, q->send_, q->bytes_, IBV_ACCESS_LOCAL_WRITE);
    q->words_mr_ = ibv_reg_mr(pd, q->words_, kPage,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
    if (!q->recv_mr_ || !q->send_mr_ || !q->words_mr_) {
        err = "ibv_reg_mr failed: " + errno_text(errno);
        return nullptr;
    }
    q->depth_ = std::min<uint32_t>(kDepth, dev.attr().max_qp_wr > 0 ? dev.attr().max_qp_wr : kDepth);
    if (!(q->cq_ = ibv_create_cq(dev.context(), static_cast<int>(q->depth_ + 8), nullptr, nullptr, 0))) {
        err = "ibv_create_cq failed: " + errno_text(errno);
        return nullptr;
    }
    ibv_qp_init_attr ia{};
    ia.send_cq = q->cq_;
    ia.recv_cq = q->cq_;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = q->depth_;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 0;  // no inline: the unoptimized baseline
    if (!(q->qp_ = ibv_create_qp(pd, &ia))) {
        err = "ibv_create_qp failed: " + errno_text(errno);
        return nullptr;
    }
    q->psn_ = static_cast<uint32_t>(getpid() * 2654435761u) & 0xffffff;
    return q;
}

BasicQp::~BasicQp() {
    if (qp_) ibv_destroy_qp(qp_);
    if (cq_) ibv_destroy_cq(cq_);
    for (ibv_mr* mr : {recv_mr_, send_mr_, words_mr_})
        if (mr) ibv_dereg_mr(mr);
    if (recv_) munmap(recv_, bytes_);
    if (send_) munmap(send_, bytes_);
    if (words_) munmap(words_, kPage);
}

RdmaParams BasicQp::local_params() const {
    return local_rc_params(dev_, qp_, psn_, recv_, recv_mr_, bytes_, words_, words_mr_);
}

bool BasicQp::connect(const RdmaParams& remote, std::string& err) {
    RcQpSettings qs;
    qs.remote_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
    qs.local_psn = psn_;
    uint32_t path_mtu = 0;
    if (!rc_qp_connect(dev_, qp_, remote, qs, path_mtu, err)) return false;
    remote_ = remote;
    return true;
}

bool BasicQp::reap(std::string& err) {
    ibv_wc wc[8];
    int n = ibv_poll_cq(cq_, 8, wc);
    if (n < 0) {
        err = "ibv_poll_cq failed";
        return false;
    }
    for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) {
            err = std::string("completion error: ") + ibv_wc_status_str(wc[i].status);
            return false;
        }
        outstanding_ -= std::min<uint32_t>(outstanding_, 2);  // the signaled atomic retires its WRITE too
    }
    return true;
}

bool BasicQp::send(uint32_t len, std::string& err) {
    if (len > bytes_ || len > remote_.ring_bytes) {
        err = "message larger than the receive buffer";
        return false;
    }
    while (outstanding_ + 2 > depth_)
        if (!reap(err)) return false;
    ibv_sge data{reinterpret_cast<uint64_t>(send_), len, send_mr_->lkey};
    ibv_sge old{reinterpret_cast<uint64_t>(words_ + 64), 8, words_mr_->lkey};
    ibv_send_wr add{};
    add.wr_id = 1;
    add.sg_list = &old;
    add.num_sge = 1;
    add.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    add.send_flags = IBV_SEND_SIGNALED;
    add.wr.atomic.remote_addr = remote_.ctrl_addr;
    add.wr.atomic.rkey = remote_.ctrl_rkey;
    add.wr.atomic.compare_add = 1;
    ibv_send_wr write{};
    write.sg_list = &data;
    write.num_sge = 1;
    write.opcode = IBV_WR_RDMA_WRITE;
    write.wr.rdma.remote_addr = remote_.ring_addr;
    write.wr.rdma.rkey = remote_.ring_rkey;
    write.next = &add;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp_, &write, &bad)) {
        err = "ibv_post_send failed: " + errno_text(rc);
        return false;
    }
    outstanding_ += 2;
    return true;
}

bool BasicQp::wait_count(uint64_t count, std::string& err) {
    std::atomic_ref<uint64_t> counter(*reinterpret_cast<uint64_t*>(words_));
    while (counter.load(std::memory_order_acquire) < count)
        if (!reap(err)) return false;
    return true;
}

}  // namespace rdmasock::bench
