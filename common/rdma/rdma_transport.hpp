// The RDMA transport: the ring protocol over one reliable-connected (RC) queue pair.
// Design, measurements and limits: docs/rdma-transport.md.
//
// Memory (all registered once, in create()/connect(); never on the data path), in
// a protection domain of the connection's own, so the peer's QP reaches these
// regions and no other connection's:
//   receive ring  ring_bytes, page aligned, LOCAL_WRITE|REMOTE_WRITE: the peer's
//                 writer RDMA-WRITEs records here; our RingReader polls footers.
//   send mirror   the peer's ring size, registered in connect() (that is when the
//                 size is known), local only: our RingWriter assembles each record at
//                 the record's ring offset, then one RDMA WRITE copies it to the same
//                 offset of the peer's ring (IBV_SEND_INLINE when it fits the QP's
//                 max_inline_data as read back with ibv_query_qp). MAP_SHARED: a
//                 take-back by a forked child reads the parent's latest records.
//   ctrl block    one page, the first RdmaCtrl::bytes (320) registered
//                 LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ; every field on its own
//                 cache line (RdmaCtrl offsets).
//   scratch       one page, local only: the destinations of our RDMA READs (probe, flush).
//
// Concurrency: the writer (one thread at a time), the reader (one thread at a
// time) and arm_* / drain_wake may run on different threads; posting to the send
// queue and reaping the send CQ are serialized by one internal mutex (sq_mu_),
// the receive CQ, receive WRs and channel events by another (rq_mu_, which is
// taken first when both are).
//
// Doorbells and lost wake-ups (docs/waiting.md, "RDMA: completion-channel
// doorbells"): every record and every consumed publication is an RDMA WRITE
// WITH IMMEDIATE, so its arrival raises a completion on the peer's receive CQ
// after the data is placed. That CQ has a completion channel. A side about to
// sleep re-arms the CQ (ibv_req_notify_cq), drains it (reposting the receive
// WRs), then the caller re-checks the ring and sleeps on wake_fd() with the TCP
// socket: an epoll fd of ours holding the channel's fd and our self-wake
// eventfd, so that one fd says "the peer wrote" and "this side woke its own
// sleepers" to every kind of sleeper (blocked call, poll, an epoll set). An arrival whose completion came before
// the re-arm was placed before the re-check, which sees it; one after the re-arm
// raises an event. No flag, no READ, no doorbell post: arming costs no network
// round trip, and the writer never decides whether to ring.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "rdma/rdma_device.hpp"
#include "rdma/rdma_faults.hpp"
#include "rdma/rdma_params.hpp"
#include "rdma/rdma_verbs_objects.hpp"
#include "rdma/rdma_work_request.hpp"
#include "ring/transport.hpp"

namespace rdmasock {

// Byte offsets inside a ctrl block. The peer addresses our block with these, so
// they are part of the wire protocol (RdmaParams magic "RDP4").
struct RdmaCtrl {
    // u64 twice (value, copy), written by the peer's reader in one RDMA WRITE:
    // consumed position of the ring WE write (it lives in the peer). Our
    // RingWriter reads it (consumed_counter.hpp: a torn landing is seen) and
    // validates it.
    static constexpr size_t consumed = 0;
    static constexpr size_t consumed_copy = 8;
    // u32 in a u64, written by the peer's reader (tell_reader_state, one RDMA
    // WRITE): how its socket ended (RingControl::ReaderState; 0, reading, until
    // then, and for good from a peer that predates the word: no new magic).
    static constexpr size_t reader_state = 64;
    // u64, ours: the source of that WRITE to the peer.
    static constexpr size_t reader_state_src = 128;
    // u64, ours, READ by the peer's probe (and our flush READ's source): end
    // position of the last record our writer posted.
    static constexpr size_t written = 192;
    // u64 twice, ours: the consumed position our reader last published (the
    // source of the publication's 16-byte WRITE).
    static constexpr size_t published = 256;
    static constexpr size_t published_copy = 264;
    static constexpr size_t bytes = 320;
};

class RdmaTransport final : public Transport {
public:
    struct Stats {
        uint64_t records = 0;         // RDMA WRITEs of ring records
        uint64_t record_bytes = 0;
        uint64_t inline_records = 0;  // of which IBV_SEND_INLINE
        uint64_t publishes = 0;       // consumed-counter writes
        uint64_t arms = 0;            // arm_*(true): CQ re-armed and drained
        uint64_t recv_completions = 0;  // WRITE_WITH_IMM arrivals reaped (receive WRs reposted)
        uint64_t cq_events = 0;       // completion-channel events taken (wake-ups)
        uint64_t signaled = 0;        // signaled work requests
        uint64_t cq_polls = 0;
        uint64_t sq_full_waits = 0;   // post had to wait for send queue room
    };

    // Registers the receive ring (ring_bytes, ring::valid_capacity), the ctrl and
    // scratch blocks, creates the CQ and the RC QP (RESET). faults: qp_create
    // fails the QP creation, qp_rtr is remembered for connect(), dontfork (a test
    // hook, not a failure) forces MADV_DONTFORK even on a copy-on-fork kernel.
    // Returns nullptr with a reason in err on failure, having released everything.
    // inline_wanted: the max_inline_data asked for first (benchmarks ask for more
    // than kInlineWanted to sweep inline sizes; the device may give less).
    // What a connection with rings of `ring_bytes` at both ends pins (RLIMIT_MEMLOCK):
    // the receive ring, a send mirror as large, the ctrl and scratch blocks.
    static constexpr uint64_t pins_for(uint64_t ring_bytes) { return 2 * ring_bytes + 2 * 4096; }  // blocks: a page each
    static std::unique_ptr<RdmaTransport> create(RdmaDevice& dev, uint64_t ring_bytes, RdmaFaults faults,
                                                 std::string& err, uint32_t inline_wanted = kInlineWanted);
    ~RdmaTransport() override;
    RdmaTransport(const RdmaTransport&) = delete;
    RdmaTransport& operator=(const RdmaTransport&) = delete;

    // What the peer needs (goes into HELLO / ACCEPT).
    RdmaParams local_params() const;
    // Brings the QP to RTS against the peer and creates the writer (sized for the
    // remote ring) and the reader (the local ring). Once only. writer()/reader()
    // must not be used before it succeeded.
    bool connect(const RdmaParams& remote, std::string& err);

    const char* name() const override { return "rdma"; }
    ring::RingWriter& writer() override { return *writer_; }
    ring::RingReader& reader() override { return *reader_; }
    // on=true: re-arm the receive CQ's notification, then drain it (reposting
    // receive WRs): from now on any arrival raises an event on wake_fd(). Always
    // true (no progress can be in flight unseen: see the header). on=false: nothing.
    bool arm_reader(bool on) override;
    bool arm_writer(bool on) override;
    // No flags: the writer never rings; its WRITE_WITH_IMM is the doorbell.
    bool take_peer_reader_waiting() override { return false; }
    bool take_peer_writer_waiting() override { return false; }
    // Readable when an armed receive CQ got a completion (its channel's fd) or
    // wake_self() wrote our eventfd: an epoll fd over both (the channel alone
    // is raised only by the peer's NIC). drain_wake() takes and acks the
    // channel's events, reaps the receive CQ and reads the eventfd.
    int wake_fd() const override { return wake_; }
    // The completion channel's own fd inside wake_fd() (non-blocking: drain_wake
    // reads it without waiting). For the doorbell unit test.
    int channel_fd() const { return channel_ ? channel_.get()->fd : -1; }
    void drain_wake() override;
    // Shutdown from another thread, a step of the way back: every sleeper of this
    // side wakes through wake_fd().
    bool wake_self() override;
    void after_read() override;
    bool failed() const override { return broken(); }
    void flush_sends(int timeout_ms) override { flush(timeout_ms); }
    std::string failure() const override { return error(); }
    // The way back to TCP is agreed in band (back_marker.hpp): the controls are
    // this side's own, and a take-back resends from the send mirror.
    bool back_in_band() const override { return true; }
    // In a forked child: the fork's copy of the ring, records landed before the
    // fork (never with MADV_DONTFORK, whose pages the child lacks).
    bool ring_here() const override;
    uint32_t peer_reader_state() override;
    void tell_reader_state(uint32_t st) override;
    RingControl* tx_control() override { return connected_ ? &back_->tx : nullptr; }
    RingControl* rx_control() override { return connected_ ? &back_->rx : nullptr; }
    uint8_t* tx_ring() override { return mirror_.data(); }
    uint64_t tx_end() override { return back_->write_end.load(std::memory_order_acquire); }
    std::string stats_detail() const override;

    // After connect(), before any data: one RDMA READ from the peer's ctrl block
    // proves the path works both ways (the peer's QP answers). False with a reason
    // on an error completion or when no answer came within timeout_ms (an
    // unreachable GID, a dead peer); the transport is broken then.
    bool probe(int timeout_ms, std::string& err);

    // Waits up to timeout_ms until every posted work request has completed (the
    // peer's NIC acknowledged all records). The destructor calls it with 1000 ms.
    bool flush(int timeout_ms);

    // A completion error, a failed post, a READ timeout or an impossible counter
    // from the peer breaks the transport for good (the QP is moved to ERR, so the
    // peer's operations fail too). Posts then return false (writer: broken), the
    // publisher too (reader: broken at its next publication).
    bool broken() const { return broken_.load(std::memory_order_acquire); }
    std::string error() const;

    uint32_t max_inline() const { return max_inline_; }  // as read back with ibv_query_qp
    // Benchmarks: send inline only up to `bytes` (0: never), to measure what inline
    // buys. Call before the first write.
    // Records only (a publication always goes inline: consumed_counter.hpp).
    void limit_inline(uint32_t bytes) { max_inline_ = std::min(max_inline_, bytes); }
    uint32_t sq_depth() const { return sq_depth_; }
    uint32_t signal_every() const { return signal_every_; }
    // One signaled WRITE per n (1: every one), capped at depth/4 so a full queue
    // always has a completion coming. Call before the first write.
    void set_signal_every(uint32_t n) { signal_every_ = std::clamp<uint32_t>(n, 1, std::max<uint32_t>(1, sq_depth_ / 4)); }
    uint32_t path_mtu() const { return path_mtu_; }  // enum ibv_mtu, after connect
    Stats stats() const;

    static constexpr int kReadTimeoutMs = 1000;     // probe READ answer, send-queue room (x2)
    void set_read_timeout_ms(int ms) { read_timeout_ms_ = ms > 0 ? ms : kReadTimeoutMs; }
    static constexpr uint32_t kSqDepthWanted = 256;
    static constexpr uint32_t kSignalEvery = 64;
    static constexpr uint32_t kInlineWanted = 256;
    static constexpr uint32_t kPublicationBytes = 16;  // consumed value and its copy (RDP4)
    // Receive WRs: one per record the peer may have in flight to us (ring / 16,
    // the smallest record) plus publications; capped by the device (max_qp_wr,
    // max_cqe) and here. Beyond it the peer's WRITE_WITH_IMM waits (RNR, retried
    // forever) until we repost: flow control, never loss.
    static constexpr uint32_t kRecvDepthMax = 32767;
    static uint32_t recv_depth_for(uint64_t ring_bytes) {
        return static_cast<uint32_t>(std::clamp<uint64_t>(ring_bytes / ring::record_bytes(1) + 64, 256, kRecvDepthMax));
    }

private:
    explicit RdmaTransport(RdmaDevice& dev) : dev_(dev) {}

    struct Sink final : ring::RecordSink {
        RdmaTransport* t = nullptr;
        uint8_t* stage(uint64_t offset, uint64_t) override;
        bool post(uint64_t offset, uint64_t bytes) override;
    };
    struct Publisher final : ring::ConsumedPublisher {
        RdmaTransport* t = nullptr;
        bool publish_consumed(uint64_t consumed) override;
    };
    enum Kind : uint64_t { kWrite = 0, kReadFlush = 3 };

    bool post_record(uint64_t offset, uint64_t bytes);
    bool publish(uint64_t consumed);
    bool arm(bool on);
    // Under rq_mu_: reap the receive CQ, repost one receive WR per completion.
    bool reap_recv_locked();
    void fail_unlocked(std::string why);
    // All *_locked functions run under sq_mu_. A failed post breaks the transport.
    // always_inline: within what the QP was created with (kPublicationBytes at least).
    bool write_locked(LocalBuffer from, RemoteBuffer to, bool with_imm = false, bool always_inline = false);
    bool read_locked(RemoteBuffer from, LocalBuffer to, Kind kind, uint64_t* seq);
    bool reserve_locked();
    void posted_locked(bool signaled);
    bool wait_room_locked();
    bool reap_locked();
    void fail_locked(std::string why);
    bool wait_read(Kind kind, uint64_t seq);
    uint8_t* ctrl(size_t off) const { return ctrl_.data() + off; }
    LocalBuffer scratch_buf(size_t off, uint32_t len) const { return {scratch_.data() + off, len, scratch_mr_->lkey}; }
    RemoteBuffer peer_ctrl(size_t off) const { return {remote_.ctrl_addr + off, remote_.ctrl_rkey}; }

    RdmaDevice& dev_;
    RdmaFaults faults_;
    pid_t pid_ = 0;
    bool dontfork_ = false;  // registered pages are MADV_DONTFORK (see RdmaDevice::kernel_copies_on_fork)

    // Owners, in creation order: destroyed in reverse (QP, CQ, MRs, PD, pages).
    MappedPages ring_;
    uint64_t ring_bytes_ = 0;
    MappedPages mirror_;
    uint64_t mirror_bytes_ = 0;
    uint64_t budget_held_ = 0;  // ring + mirror bytes counted in memory_budget::held_bytes()
    uint64_t pinned_held_ = 0;  // bytes taken by memory_budget::take_pinned (registered or about to be)
    MappedPages ctrl_;
    MappedPages scratch_;
    ProtectionDomain pd_;  // this connection's own protection domain
    MemoryRegion ring_mr_;
    MemoryRegion mirror_mr_;
    MemoryRegion ctrl_mr_;
    MemoryRegion scratch_mr_;
    CompChannel channel_;   // of rcq_; destroyed after both CQs
    CompletionQueue cq_;    // send completions (polled, never waited on)
    CompletionQueue rcq_;   // receive completions: the peer's WRITE_WITH_IMMs
    QueuePair qp_;
    uint32_t psn_ = 0;
    uint32_t max_inline_ = 0;
    uint32_t sq_depth_ = 0;
    uint32_t signal_every_ = 0;
    uint32_t path_mtu_ = 0;
    uint32_t max_msg_ = 0;  // largest single RDMA WRITE (port max_msg_sz)
    uint32_t rq_depth_ = 0;  // receive WRs kept posted (one per arrival in flight)
    int read_timeout_ms_ = kReadTimeoutMs;
    RdmaParams remote_{};
    bool connected_ = false;

    Sink sink_;
    Publisher publisher_;
    uint64_t sink_pos_ = 0;  // writer thread only: absolute end of the last posted record
    uint64_t qp_error_at_ = 0;  // RdmaFault::qp_error: break the QP once sink_pos_ passes it
    std::unique_ptr<ring::RingWriter> writer_;
    std::unique_ptr<ring::RingReader> reader_;

    // The way back (connection_downgrade_inband.cpp), in a page shared with
    // forked children (MAP_SHARED, like the send mirror): a child that uses
    // the connection takes it back to TCP itself, without the verbs.
    struct BackState {
        RingControl tx, rx;  // the direction we write (the peer's place comes in its marker), the one we read
        alignas(64) std::atomic<uint64_t> write_end{0};  // our writer's next record position (sink_pos_)
    };
    MappedPages back_page_;
    BackState* back_ = nullptr;
    int self_wake_ = -1;                   // eventfd: wake_self
    int wake_ = -1;                        // epoll fd over the channel's fd and self_wake_: wake_fd()
    std::atomic<bool> self_woken_{false};  // it was written since the last drain_wake

    std::atomic<bool> broken_{false};
    mutable std::mutex sq_mu_;
    // Under sq_mu_:
    std::string error_;
    uint32_t outstanding_ = 0;        // posted work requests not known to be complete
    uint32_t pending_unsignaled_ = 0;  // unsignaled ones since the last signaled one
    uint32_t signaled_inflight_ = 0;
    uint64_t seq_ = 0;
    uint64_t read_done_[4] = {};  // by Kind: highest completed READ sequence
    Stats stats_;
    uint32_t posts_since_reap_ = 0;
    // Receive side (rcq_, receive WRs, channel events), taken before sq_mu_ when both are.
    mutable std::mutex rq_mu_;
    std::atomic<uint32_t> reads_since_reap_{0};
    uint64_t recv_completions_ = 0;  // under rq_mu_
    uint64_t cq_events_ = 0;
    uint64_t arms_ = 0;
};

}  // namespace rdmasock
