#include "sys/raw_syscall.hpp"
#include "sys/kernel_calls.hpp"
#include "rdma/rdma_transport.hpp"

#include "wait/wait_engine.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "shm/memory_budget.hpp"
#include "sys/own_fd.hpp"
#include "sys/process_id.hpp"
#include "rdma/rdma_qp.hpp"
#include "rdma/rdma_work_request.hpp"

namespace rdmasock {

namespace {

constexpr size_t kPage = 4096;
// Scratch page: constant words used as the source of flag writes (so a flag write
// that is not inline never sees its source change), and one READ destination per kind.
constexpr size_t kScratchOne = 0;
constexpr size_t scratch_read_dst(uint64_t kind) { return 64 * kind; }


uint64_t make_wr_id(uint64_t kind, uint32_t covered, uint64_t seq) { return covered | kind << 16 | seq << 20; }
uint32_t wr_covered(uint64_t id) { return static_cast<uint32_t>(id & 0xffff); }
uint64_t wr_kind(uint64_t id) { return (id >> 16) & 3; }
uint64_t wr_seq(uint64_t id) { return id >> 20; }

using wait::cpu_relax;

template <class T>
std::atomic_ref<T> at(uint8_t* p) {
    return std::atomic_ref<T>(*reinterpret_cast<T*>(p));
}

}  // namespace

// ---------------------------------------------------------------- setup

std::unique_ptr<RdmaTransport> RdmaTransport::create(RdmaDevice& dev, uint64_t ring_bytes, RdmaFaults faults,
                                                     std::string& err, uint32_t inline_wanted) {
    if (!dev.usable(err)) return nullptr;
    if (!ring::valid_capacity(ring_bytes)) {
        err = "invalid ring size " + std::to_string(ring_bytes);
        return nullptr;
    }
    std::unique_ptr<RdmaTransport> t(new RdmaTransport(dev));
    t->faults_ = faults;
    t->dontfork_ = !dev.kernel_copies_on_fork() || faults.has(RdmaFault::dontfork);
    t->pid_ = getpid();
    if (faults.has(RdmaFault::qp_error)) {
        uint32_t r = 0;
        if (getrandom(&r, sizeof r, 0) != sizeof r) r = static_cast<uint32_t>(t->pid_) * 2654435761u;
        t->qp_error_at_ = 1 + r % (4u << 20);
    }
    t->ring_bytes_ = ring_bytes;
    t->sink_.t = t.get();
    t->publisher_.t = t.get();

    // Every object below has an owner in *t: an early return releases what exists.
    // The registrations pin the ring, the ctrl and scratch blocks and, once
    // connected, a send mirror as large as the peer's ring, which we expect to
    // be as large as ours: all taken now (RLIMIT_MEMLOCK), so that connections
    // set up together see each other's mirrors; connect() settles the mirror's part.
    if (!memory_budget::take_pinned(pins_for(ring_bytes))) {
        err = memory_budget::kMemlockShort;
        return nullptr;
    }
    t->pinned_held_ = pins_for(ring_bytes);
    if (!t->ring_.map(ring_bytes, t->dontfork_, "receive ring", err)) return nullptr;
    memory_budget::hold(ring_bytes);
    t->budget_held_ = ring_bytes;
    if (!t->ctrl_.map(kPage, t->dontfork_, "ctrl block", err)) return nullptr;
    if (!t->scratch_.map(kPage, t->dontfork_, "scratch block", err)) return nullptr;
    if (!t->back_page_.map(sizeof(BackState), false, "way-back state", err, /*shared=*/true)) return nullptr;
    t->back_ = new (t->back_page_.data()) BackState();
    new (t->ctrl(RdmaCtrl::consumed)) std::atomic<uint64_t>(0);  // RingWriter's view of the peer's consumed
    new (t->ctrl(RdmaCtrl::consumed_copy)) std::atomic<uint64_t>(0);
    at<uint32_t>(t->scratch_.data() + kScratchOne).store(1, std::memory_order_relaxed);

    // A protection domain per connection: an rkey works only on QPs of its own PD,
    // so a peer can reach this connection's ring and ctrl block and nothing of the
    // process's other connections (rkeys are small and guessable: rxe hands out
    // 0x526, 0x6d0, ...).
    const VerbsApi& api = dev.api();
    t->pd_ = ProtectionDomain(api, api.alloc_pd(dev.context()));
    ibv_pd* pd = t->pd_.get();
    if (!pd) {
        err = "ibv_alloc_pd failed: " + errno_text(errno);
        return nullptr;
    }
    t->ring_mr_ = register_memory(api, pd, t->ring_.data(), ring_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                  "receive ring", err);
    if (!t->ring_mr_) return nullptr;
    t->ctrl_mr_ = register_memory(api, pd, t->ctrl_.data(), RdmaCtrl::bytes,
                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, "ctrl block",
                                  err);
    if (!t->ctrl_mr_) return nullptr;
    t->scratch_mr_ = register_memory(api, pd, t->scratch_.data(), kPage, IBV_ACCESS_LOCAL_WRITE, "scratch block", err);
    if (!t->scratch_mr_) return nullptr;

    const ibv_device_attr& a = dev.attr();
    uint32_t depth = std::min<uint32_t>(kSqDepthWanted, a.max_qp_wr > 0 ? static_cast<uint32_t>(a.max_qp_wr) : 16);
    uint32_t cqe = std::min<uint32_t>(depth + 16, a.max_cqe > 0 ? static_cast<uint32_t>(a.max_cqe) : depth + 16);
    t->cq_ = CompletionQueue(api, api.create_cq(dev.context(), static_cast<int>(cqe), nullptr, nullptr, 0));
    if (!t->cq_) {
        err = "ibv_create_cq(" + std::to_string(cqe) + ") failed: " + errno_text(errno);
        return nullptr;
    }
    // The doorbell: a completion channel on the receive CQ (docs/waiting.md).
    t->channel_ = CompChannel(api, api.create_comp_channel(dev.context()));
    if (!t->channel_) {
        err = "ibv_create_comp_channel failed: " + errno_text(errno);
        return nullptr;
    }
    {
        // Non-blocking: drain_wake() must never block on a missing event. Not
        // inherited across exec (kernel_calls.hpp: the shim interposes fcntl).
        long fl = kernel::fcntl(t->channel_->fd, F_GETFL);
        if (fl < 0 || kernel::fcntl(t->channel_->fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
            kernel::fcntl(t->channel_->fd, F_SETFD, FD_CLOEXEC) < 0) {
            err = "fcntl(O_NONBLOCK) on the completion channel failed: " + errno_text(errno);
            return nullptr;
        }
        // Out of the program's way (own_fd.hpp); rdma-core reads the number from
        // this field, and the CQs below are made on it.
        t->channel_->fd = adopt_own_fd(t->channel_->fd);
    }
    // Our own sleepers' doorbell (shutdown from another thread, the way back):
    // nobody but the peer's NIC can raise an event on the channel.
    t->self_wake_ = adopt_own_fd(static_cast<int>(raw_syscall(SYS_eventfd2, 0, EFD_NONBLOCK | EFD_CLOEXEC)));
    if (t->self_wake_ < 0) {
        err = "eventfd failed: " + errno_text(errno);
        return nullptr;
    }
    // One fd for sleepers to wait on (wake_fd): both level-triggered, so the
    // epoll fd reads ready exactly while one of them does (the kernel looks at
    // its members again when asked). Raw calls: the shim interposes epoll_ctl.
    t->wake_ = adopt_own_fd(static_cast<int>(raw_syscall(SYS_epoll_create1, EPOLL_CLOEXEC)));
    for (int fd : {t->channel_->fd, t->self_wake_}) {
        epoll_event ev{EPOLLIN, {}};
        ev.data.fd = fd;
        if (t->wake_ < 0 || raw_syscall(SYS_epoll_ctl, t->wake_, EPOLL_CTL_ADD, fd, &ev) != 0) {
            err = "epoll for the doorbells failed: " + errno_text(errno);
            return nullptr;
        }
    }
    uint32_t rq = recv_depth_for(ring_bytes);
    if (a.max_qp_wr > 0) rq = std::min<uint32_t>(rq, static_cast<uint32_t>(a.max_qp_wr));
    if (a.max_cqe > 1) rq = std::min<uint32_t>(rq, static_cast<uint32_t>(a.max_cqe) - 1);
    t->rcq_ = CompletionQueue(api, api.create_cq(dev.context(), static_cast<int>(rq), nullptr, t->channel_.get(), 0));
    if (!t->rcq_) {
        err = "ibv_create_cq(" + std::to_string(rq) + ", completion channel) failed: " + errno_text(errno);
        return nullptr;
    }
    if (faults.has(RdmaFault::qp_create)) {
        err = "ibv_create_qp failed: " + errno_text(EINVAL) + " [fault injection rdma-qp-create]";
        return nullptr;
    }
    // Ask for 256 bytes of inline data; some devices refuse that, so step down,
    // never below the 16 of a publication (its value and copy must be taken at
    // post time, both from one store). What we got is read back below.
    int last_errno = 0;
    for (uint32_t want_inline : {std::max(inline_wanted, kInlineWanted), kInlineWanted, 128u, 64u, kPublicationBytes}) {
        ibv_qp_init_attr ia{};
        ia.send_cq = t->cq_.get();
        ia.recv_cq = t->rcq_.get();
        ia.qp_type = IBV_QPT_RC;
        ia.sq_sig_all = 0;
        ia.cap.max_send_wr = depth;
        ia.cap.max_recv_wr = rq;  // one per WRITE_WITH_IMM the peer may have in flight
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = 1;
        ia.cap.max_inline_data = want_inline;
        t->qp_ = QueuePair(api, api.create_qp(pd, &ia));
        if (t->qp_) break;
        last_errno = errno;
    }
    if (!t->qp_) {
        err = "ibv_create_qp(RC, " + std::to_string(depth) + " send WRs) failed: " + errno_text(last_errno);
        return nullptr;
    }
    ibv_qp_attr qa{};
    ibv_qp_init_attr qia{};
    if (api.query_qp(t->qp_.get(), &qa, IBV_QP_CAP, &qia) != 0) {
        err = "ibv_query_qp(IBV_QP_CAP) failed: " + errno_text(errno);
        return nullptr;
    }
    t->max_inline_ = qa.cap.max_inline_data;
    if (t->max_inline_ < kPublicationBytes) {
        err = "the device sends " + std::to_string(t->max_inline_) + " bytes inline, under the " +
              std::to_string(kPublicationBytes) + " of a consumed-counter publication";
        return nullptr;
    }
    t->sq_depth_ = std::min(depth, qa.cap.max_send_wr > 0 ? qa.cap.max_send_wr : depth);
    if (t->sq_depth_ < 8) {
        err = "send queue of " + std::to_string(t->sq_depth_) + " work requests is too small";
        return nullptr;
    }
    // N well under the depth: at most depth/4 unsignaled requests trail the last
    // signaled one, so a full queue always has a completion coming.
    t->set_signal_every(kSignalEvery);
    t->rq_depth_ = std::min(rq, qa.cap.max_recv_wr > 0 ? qa.cap.max_recv_wr : rq);
    t->max_msg_ = std::max<uint32_t>(dev.max_msg_sz() & ~(static_cast<uint32_t>(ring::kAlign) - 1), 4096);
    // A random first PSN (std::random_device may throw; getrandom does not).
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r)
        r = static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
            static_cast<uint32_t>(getpid()) * 2654435761u;
    t->psn_ = r & 0xffffff;
    return t;
}

RdmaParams RdmaTransport::local_params() const {
    return local_rc_params(dev_, qp_.get(), psn_, ring_.data(), ring_mr_.get(), ring_bytes_, ctrl_.data(), ctrl_mr_.get());
}

bool RdmaTransport::connect(const RdmaParams& remote, std::string& err) {
    if (!dev_.usable(err)) return false;
    if (connected_) {
        err = "RDMA transport already connected";
        return false;
    }
    if (!ring::valid_capacity(remote.ring_bytes) || remote.mtu < IBV_MTU_256 || remote.mtu > IBV_MTU_4096) {
        err = "invalid remote RDMA parameters";
        return false;
    }
    mirror_bytes_ = remote.ring_bytes;
    // create() took the pins of a mirror as large as our ring: settle the difference.
    if (mirror_bytes_ > ring_bytes_ && !memory_budget::take_pinned(mirror_bytes_ - ring_bytes_)) {
        err = std::string("the peer's ring of ") + std::to_string(mirror_bytes_ >> 10) +
              " KiB needs a send mirror as large: " + memory_budget::kMemlockShort;
        return false;
    }
    if (mirror_bytes_ < ring_bytes_) memory_budget::release_pinned(ring_bytes_ - mirror_bytes_);
    pinned_held_ = pinned_held_ - ring_bytes_ + mirror_bytes_;
    if (!mirror_.map(mirror_bytes_, dontfork_, "send mirror", err, /*shared=*/true)) return false;
    memory_budget::hold(mirror_bytes_);
    budget_held_ += mirror_bytes_;
    mirror_mr_ = register_memory(dev_.api(), pd_.get(), mirror_.data(), mirror_bytes_, IBV_ACCESS_LOCAL_WRITE, "send mirror", err);
    if (!mirror_mr_) return false;

    RcQpSettings qs;
    qs.remote_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    qs.local_psn = psn_;
    qs.fail_rtr = faults_.has(RdmaFault::qp_rtr);
    if (!rc_qp_connect(dev_, qp_.get(), remote, qs, path_mtu_, err)) return false;
    // Every receive WR before the handshake message that lets the peer write
    // (ACCEPT / READY), so its first WRITE_WITH_IMM finds one.
    for (uint32_t i = 0; i < rq_depth_; ++i)
        if (int rc = post_receive(qp_.get(), 0)) {
            err = "ibv_post_recv failed: " + errno_text(rc);
            return false;
        }
    // Armed from the start: a sleeper re-arms anyway, this only makes a stray
    // early wait safe.
    if (ibv_req_notify_cq(rcq_.get(), 0) != 0) {
        err = "ibv_req_notify_cq failed";
        return false;
    }
    remote_ = remote;
    const ring::ConsumedCounter consumed(reinterpret_cast<const std::atomic<uint64_t>*>(ctrl(RdmaCtrl::consumed)),
                                         reinterpret_cast<const std::atomic<uint64_t>*>(ctrl(RdmaCtrl::consumed_copy)));
    writer_ = std::make_unique<ring::RingWriter>(remote.ring_bytes, sink_, consumed);
    reader_ = std::make_unique<ring::RingReader>(ring_.data(), ring_bytes_, publisher_);
    connected_ = true;
    return true;
}

RdmaTransport::~RdmaTransport() {
    if (wake_ >= 0) close_own_fd(wake_);
    if (self_wake_ >= 0) close_own_fd(self_wake_);
    if (pid_ == getpid()) {
        memory_budget::release(budget_held_);
        memory_budget::release_pinned(pinned_held_);
    }
    if (pid_ != getpid()) {
        // A forked child: every verbs object belongs to the parent, leave them
        // alone. The pages are a private copy on copy-on-fork kernels (the owners
        // unmap it); with MADV_DONTFORK they are absent and the range may since
        // hold something else.
        qp_.abandon();
        cq_.abandon();
        rcq_.abandon();
        channel_.abandon();
        for (MemoryRegion* mr : {&ring_mr_, &mirror_mr_, &ctrl_mr_, &scratch_mr_}) mr->abandon();
        pd_.abandon();
        if (dontfork_)
            for (MappedPages* m : {&ring_, &ctrl_, &scratch_}) m->abandon();
        return;
    }
    // The owners release QP, CQ, MRs, PD and pages after this, in that order.
    if (connected_) flush(1000);
    if (channel_) unmark_own_fd(channel_->fd);  // rdma-core's close must reach the kernel
}

// ---------------------------------------------------------------- send queue

void RdmaTransport::fail_locked(std::string why) {
    if (broken_.load(std::memory_order_relaxed)) return;
    error_ = std::move(why);
    broken_.store(true, std::memory_order_release);
    // Take the QP down so that the peer's operations on it fail as well (its writer
    // and reader turn broken within the retry timeout instead of waiting on us).
    if (qp_) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_ERR;
        dev_.api().modify_qp(qp_.get(), &a, IBV_QP_STATE);
    }
}

std::string RdmaTransport::error() const {
    std::lock_guard<std::mutex> lk(sq_mu_);
    return error_;
}

RdmaTransport::Stats RdmaTransport::stats() const {
    Stats s;
    {
        std::lock_guard<std::mutex> lk(rq_mu_);
        s.arms = arms_;
        s.recv_completions = recv_completions_;
        s.cq_events = cq_events_;
    }
    std::lock_guard<std::mutex> lk(sq_mu_);
    Stats r = stats_;
    r.arms = s.arms;
    r.recv_completions = s.recv_completions;
    r.cq_events = s.cq_events;
    return r;
}

bool RdmaTransport::reap_locked() {
    ibv_wc wc[16];
    ++stats_.cq_polls;
    int n = ibv_poll_cq(cq_.get(), 16, wc);
    if (n < 0) {
        fail_locked("ibv_poll_cq failed");
        return false;
    }
    for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) {
            // wc.opcode is undefined on error; the wr_id says what it was (0: unsignaled WRITE).
            char vendor[16];
            snprintf(vendor, sizeof vendor, "0x%x", wc[i].vendor_err);
            fail_locked(std::string(wr_kind(wc[i].wr_id) == kWrite ? "RDMA WRITE" : "RDMA READ") +
                        " completed with error: " + dev_.api().wc_status_str(wc[i].status) + " (status " +
                        std::to_string(wc[i].status) + ", vendor error " + vendor + ")");
            continue;
        }
        const uint64_t id = wc[i].wr_id;
        const uint32_t covered = wr_covered(id);
        outstanding_ -= std::min(outstanding_, covered);
        if (signaled_inflight_) --signaled_inflight_;
        const uint64_t kind = wr_kind(id);
        if (kind != kWrite) read_done_[kind] = std::max(read_done_[kind], wr_seq(id));
    }
    return !broken_.load(std::memory_order_relaxed);
}

bool RdmaTransport::wait_room_locked() {
    ++stats_.sq_full_waits;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * read_timeout_ms_);
    for (unsigned spins = 0; outstanding_ + 1 >= sq_depth_; ++spins) {
        if (!reap_locked()) return false;
        if ((spins & 1023) == 1023 && std::chrono::steady_clock::now() > deadline) {
            fail_locked("send queue full for " + std::to_string(2 * read_timeout_ms_) + " ms (peer not acknowledging)");
            return false;
        }
        cpu_relax();
    }
    return true;
}

// Room for one more work request: false when broken or the queue stayed full.
bool RdmaTransport::reserve_locked() {
    if (broken_.load(std::memory_order_relaxed)) return false;
    return outstanding_ + 1 < sq_depth_ || wait_room_locked();
}

void RdmaTransport::posted_locked(bool signaled) {
    ++outstanding_;
    if (signaled) {
        pending_unsignaled_ = 0;
        ++signaled_inflight_;
        ++stats_.signaled;
    } else {
        ++pending_unsignaled_;
    }
}

// Unsignaled except every signal_every_-th. A signaled completion also retires
// every unsignaled request before it (RC completes in order), which is how
// `outstanding_` shrinks. Inline whenever the length fits max_inline_data.
bool RdmaTransport::write_locked(LocalBuffer from, RemoteBuffer to, bool with_imm, bool always_inline) {
    if (!reserve_locked()) return false;
    const bool signal = pending_unsignaled_ + 1 >= signal_every_;
    const uint64_t s = ++seq_;
    const int rc = post_write(qp_.get(), {.from = from,
                                          .to = to,
                                          .inline_data = always_inline || from.length <= max_inline_,
                                          .signaled = signal,
                                          .wr_id = signal ? make_wr_id(kWrite, pending_unsignaled_ + 1, s) : 0,
                                          .with_imm = with_imm});
    if (rc) {
        fail_locked("ibv_post_send(RDMA WRITE) failed: " + errno_text(rc));
        return false;
    }
    posted_locked(signal);
    return true;
}

// Always signaled: its answer is awaited (wait_read) or it marks a flush.
bool RdmaTransport::read_locked(RemoteBuffer from, LocalBuffer to, Kind kind, uint64_t* seq) {
    if (!reserve_locked()) return false;
    const uint64_t s = ++seq_;
    const int rc = post_read(qp_.get(), {.from = from,
                                         .to = to,
                                         .signaled = true,
                                         .wr_id = make_wr_id(kind, pending_unsignaled_ + 1, s)});
    if (rc) {
        fail_locked("ibv_post_send(RDMA READ) failed: " + errno_text(rc));
        return false;
    }
    posted_locked(true);
    if (seq) *seq = s;
    return true;
}

bool RdmaTransport::wait_read(Kind kind, uint64_t seq) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(read_timeout_ms_);
    for (unsigned spins = 0;; ++spins) {
        {
            std::lock_guard<std::mutex> lk(sq_mu_);
            if (read_done_[kind] >= seq) return true;
            if (!reap_locked()) return false;
            if (read_done_[kind] >= seq) return true;
            if ((spins & 255) == 255 && std::chrono::steady_clock::now() > deadline) {
                fail_locked("RDMA READ of the peer's progress counter unanswered after " +
                            std::to_string(read_timeout_ms_) + " ms");
                return false;
            }
        }
        if (spins < 4096) cpu_relax();
        else std::this_thread::yield();  // a slow peer (emulation): let the other threads run
    }
}

bool RdmaTransport::flush(int timeout_ms) {
    if (!connected_ || pid_ != current_pid()) return false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::lock_guard<std::mutex> lk(sq_mu_);
    if (broken_.load(std::memory_order_relaxed)) return false;
    if (outstanding_ == 0) return true;
    if (pending_unsignaled_ > 0) {
        // The tail is unsignaled: a signaled READ behind it completes only after
        // every earlier WRITE was executed by the peer.
        if (!read_locked(peer_ctrl(RdmaCtrl::written), scratch_buf(scratch_read_dst(kReadFlush), 8), kReadFlush, nullptr))
            return false;
    }
    while (outstanding_ > 0) {
        if (!reap_locked()) return false;
        if (std::chrono::steady_clock::now() > deadline) return false;
        cpu_relax();
    }
    return true;
}

// ---------------------------------------------------------------- data path

uint8_t* RdmaTransport::Sink::stage(uint64_t offset, uint64_t) { return t->mirror_.data() + offset; }

bool RdmaTransport::Sink::post(uint64_t offset, uint64_t bytes) { return t->post_record(offset, bytes); }

bool RdmaTransport::Publisher::publish_consumed(uint64_t consumed) { return t->publish(consumed); }

bool RdmaTransport::post_record(uint64_t offset, uint64_t bytes) {
    if (offset + bytes > mirror_bytes_ || bytes > UINT32_MAX) {
        std::lock_guard<std::mutex> lk(sq_mu_);
        fail_locked("record outside the ring");
        return false;
    }
    const uint64_t end = sink_pos_ + bytes;
    if (qp_error_at_ && end >= qp_error_at_) {
        std::lock_guard<std::mutex> lk(sq_mu_);
        fail_locked("queue pair forced into error after " + std::to_string(sink_pos_) +
                    " ring bytes [fault injection rdma-qp-error]");
        return false;
    }
    at<uint64_t>(ctrl(RdmaCtrl::written)).store(end, std::memory_order_release);
    bool reap_recv = false;
    {
        std::lock_guard<std::mutex> lk(sq_mu_);
        // One WRITE per record, unless the record is larger than the port's largest
        // message (rxe: 8 MiB; records reach 16 MiB in rings of 64 MiB and more): then
        // consecutive WRITEs on the QP, which the peer executes in order, so the
        // footer in the last one still lands last. The last one carries the
        // immediate: the peer's receive completion (its doorbell) comes after the
        // whole record is placed.
        for (uint64_t done = 0; done < bytes;) {
            const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(bytes - done, max_msg_));
            if (!write_locked({.addr = mirror_.data() + offset + done, .length = len, .lkey = mirror_mr_->lkey},
                              {.addr = remote_.ring_addr + offset + done, .rkey = remote_.ring_rkey},
                              done + len == bytes))
                return false;
            done += len;
        }
        ++stats_.records;
        stats_.record_bytes += bytes;
        if (bytes <= max_inline_) ++stats_.inline_records;
        // Keep the completion queue drained and notice errors early. An error
        // found here belongs to an earlier request: this record was posted, so
        // it counts as written (a take-back resends it from the mirror unless
        // the peer's reader got it: docs/protocol.md, "Downgrade over RDMA").
        if (signaled_inflight_) reap_locked();
        sink_pos_ = end;
        back_->write_end.store(end, std::memory_order_release);
        // A writer that never reads or waits still gets the peer's publications
        // (receive WRs): repost them now and then.
        if (++posts_since_reap_ >= 64) posts_since_reap_ = 0, reap_recv = true;
    }
    if (reap_recv) {
        std::lock_guard<std::mutex> lk(rq_mu_);
        reap_recv_locked();
    }
    return true;
}

bool RdmaTransport::ring_here() const { return pid_ == current_pid() || !dontfork_; }

uint32_t RdmaTransport::peer_reader_state() {
    if (!connected_ || (pid_ != current_pid() && dontfork_)) return RingControl::reading;
    return static_cast<uint32_t>(at<uint64_t>(ctrl(RdmaCtrl::reader_state)).load(std::memory_order_acquire));
}

void RdmaTransport::tell_reader_state(uint32_t st) {
    Transport::tell_reader_state(st);
    // A forked child never posts (the queue pair is the parent's).
    if (!connected_ || pid_ != current_pid()) return;
    std::lock_guard<std::mutex> lk(sq_mu_);
    if (broken_.load(std::memory_order_relaxed)) return;
    at<uint64_t>(ctrl(RdmaCtrl::reader_state_src)).store(st, std::memory_order_release);
    // With immediate: the peer's writer may sleep on a full ring nobody reads.
    write_locked({.addr = ctrl(RdmaCtrl::reader_state_src), .length = 8, .lkey = ctrl_mr_->lkey},
                 peer_ctrl(RdmaCtrl::reader_state), true, /*always_inline=*/true);
}

bool RdmaTransport::publish(uint64_t consumed) {
    // A forked child reads only the fork's copy of the ring, to keep what a
    // gone peer left (connection_downgrade_inband.cpp): the queue pair is the
    // parent's, and nobody is left to be told.
    if (pid_ != current_pid()) return true;
    {
        // The receive WRs of the records consumed so far go back first (the
        // peer may now fill the space again).
        std::lock_guard<std::mutex> lk(rq_mu_);
        reap_recv_locked();
    }
    std::lock_guard<std::mutex> lk(sq_mu_);
    // The write's source: value and copy (consumed_counter.hpp), stored under
    // sq_mu_ and posted inline whatever limit_inline() says for records, so the
    // pair is taken whole at post time and the pair that lands agrees.
    at<uint64_t>(ctrl(RdmaCtrl::published)).store(consumed, std::memory_order_release);
    at<uint64_t>(ctrl(RdmaCtrl::published_copy)).store(consumed, std::memory_order_release);
    // With immediate: the peer's writer may sleep waiting for this space.
    if (!write_locked({.addr = ctrl(RdmaCtrl::published), .length = kPublicationBytes, .lkey = ctrl_mr_->lkey},
                      peer_ctrl(RdmaCtrl::consumed), true, /*always_inline=*/true))
        return false;
    ++stats_.publishes;
    if (signaled_inflight_ && !reap_locked()) return false;
    return true;
}

// ---------------------------------------------------------------- sleeping

void RdmaTransport::fail_unlocked(std::string why) {
    std::lock_guard<std::mutex> lk(sq_mu_);
    fail_locked(std::move(why));
}

// Every completion on rcq_ is a WRITE_WITH_IMM of the peer (a record or a
// publication) that consumed one receive WR: put one back for each. An error
// completion (flushed receives of a QP in ERR) breaks the transport.
bool RdmaTransport::reap_recv_locked() {
    if (!connected_ || broken()) return false;
    ibv_wc wc[32];
    for (;;) {
        const int n = ibv_poll_cq(rcq_.get(), 32, wc);
        if (n < 0) {
            fail_unlocked("ibv_poll_cq(receive CQ) failed");
            return false;
        }
        for (int i = 0; i < n; ++i) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                char vendor[16];
                snprintf(vendor, sizeof vendor, "0x%x", wc[i].vendor_err);
                std::lock_guard<std::mutex> lk(sq_mu_);  // rq_mu_ is taken first
                // A flushed receive only says the QP is in error: the cause, if it
                // is ours (a send that exhausted its retries...), is on the send CQ.
                if (wc[i].status == IBV_WC_WR_FLUSH_ERR) reap_locked();
                std::string qs;
                ibv_qp_attr qa{};
                ibv_qp_init_attr qi{};
                if (dev_.api().query_qp(qp_.get(), &qa, IBV_QP_STATE, &qi) == 0)
                    qs = ", QP state " + std::to_string(qa.qp_state);
                fail_locked(std::string("receive completed with error: ") + dev_.api().wc_status_str(wc[i].status) +
                            " (status " + std::to_string(wc[i].status) + ", vendor error " + vendor + qs + ")");
                return false;
            }
            ++recv_completions_;
            if (int rc = post_receive(qp_.get(), 0)) {
                fail_unlocked("ibv_post_recv failed: " + errno_text(rc));
                return false;
            }
        }
        if (n < 32) return true;
    }
}

// The sleeper's half (docs/waiting.md): re-arm, then drain. A completion
// generated before ibv_req_notify_cq belongs to data placed before it, which the
// caller's re-check (after this and a fence) sees; one generated after raises
// an event on the channel, i.e. wake_fd() turns readable.
bool RdmaTransport::arm(bool on) {
    if (!on || !connected_ || broken()) return true;
    std::lock_guard<std::mutex> lk(rq_mu_);
    ++arms_;
    if (ibv_req_notify_cq(rcq_.get(), 0) != 0) {
        fail_unlocked("ibv_req_notify_cq failed");
        return true;  // broken: the caller's re-check reports it
    }
    reap_recv_locked();
    return true;
}

bool RdmaTransport::arm_reader(bool on) { return arm(on); }
bool RdmaTransport::arm_writer(bool on) { return arm(on); }

bool RdmaTransport::wake_self() {
    const int saved = errno;
    uint64_t one = 1;
    (void)raw_syscall(SYS_write, self_wake_, &one, sizeof one);
    self_woken_.store(true, std::memory_order_release);  // after the write: drain_wake reads only then
    errno = saved;
    return true;
}

void RdmaTransport::drain_wake() {
    const int saved = errno;
    if (self_woken_.exchange(false, std::memory_order_acq_rel)) {
        uint64_t v;
        (void)raw_syscall(SYS_read, self_wake_, &v, sizeof v);
    }
    errno = saved;
    if (!connected_ || pid_ != current_pid()) return;
    std::lock_guard<std::mutex> lk(rq_mu_);
    unsigned n = 0;
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    // One read (non-blocking: -1 with EAGAIN when there is none). A sleep re-arms
    // the CQ once, so one event is the rule; a second one left behind keeps the
    // fd readable and costs one early return of the next sleep, which drains it.
    // Every event is acked at once (ibv_destroy_cq waits for the acks).
    if (dev_.api().get_cq_event(channel_.get(), &cq, &cq_ctx) == 0) ++n;
    if (n) {
        dev_.api().ack_cq_events(rcq_.get(), n);
        cq_events_ += n;
    }
    reap_recv_locked();
    errno = saved;
}

void RdmaTransport::after_read() {
    // The reader's receive WRs go back every 16 reads (and at each publication).
    if (reads_since_reap_.fetch_add(1, std::memory_order_relaxed) % 16 != 15) return;
    std::lock_guard<std::mutex> lk(rq_mu_);
    reap_recv_locked();
}

bool RdmaTransport::probe(int timeout_ms, std::string& err) {
    if (!connected_) {
        err = "RDMA transport not connected";
        return false;
    }
    uint64_t seq = 0;
    {
        std::lock_guard<std::mutex> lk(sq_mu_);
        if (!read_locked(peer_ctrl(RdmaCtrl::written), scratch_buf(scratch_read_dst(kReadFlush), 8), kReadFlush, &seq)) {
            err = error_;  // sq_mu_ is held: error() would take it again
            return false;
        }
    }
    // Runs before the connection carries data, on the handshake's thread only.
    const int saved = read_timeout_ms_;
    read_timeout_ms_ = timeout_ms > 0 ? timeout_ms : kReadTimeoutMs;
    const bool ok = wait_read(kReadFlush, seq);
    read_timeout_ms_ = saved;
    if (!ok) err = "the peer did not answer an RDMA READ: " + error();
    return ok;
}

std::string RdmaTransport::stats_detail() const {
    Stats s = stats();
    char buf[160];
    snprintf(buf, sizeof buf, " rdma_writes=%llu inline=%llu signaled=%llu max_inline=%u",
             static_cast<unsigned long long>(s.records), static_cast<unsigned long long>(s.inline_records),
             static_cast<unsigned long long>(s.signaled), max_inline_);
    return buf;
}

}  // namespace rdmasock
