// The same-host transport: a ShmChannel behind the Transport interface.
#pragma once

#include <atomic>
#include <cerrno>
#include <memory>
#include <string>

#include "shm/shm_channel.hpp"
#include "shm/shm_doorbell.hpp"
#include "shm/side_channel.hpp"
#include "ring/transport.hpp"
#include "sys/fork_fence.hpp"
#include "sys/own_fd.hpp"
#include "sys/process_id.hpp"

namespace rdmasock {

class ShmTransport final : public Transport {
public:
    // Doorbells (shm_doorbell.hpp): `sleep_end` is what this side sleeps on,
    // `self_ring` the other end of that pair (our own sleepers' doorbell; the
    // peer holds it too), `peer_ring` the ring end of the pair the peer sleeps
    // on, or -1 until await_peer_ring's CONFIRM brings it (client). Takes
    // ownership of all three.
    ShmTransport(std::unique_ptr<ShmChannel> channel, int sleep_end, int self_ring, int peer_ring)
        : ch_(std::move(channel)), wake_(sleep_end), self_ring_(self_ring), peer_ring_(peer_ring) {}
    ~ShmTransport() override {
        shm_doorbell::close_sleep_end(wake_);
        if (self_ring_ >= 0) close_own_fd(self_ring_);
        shm_doorbell::close_peer_ring(peer_ring_.load());
        if (int c = chan_.load(); c >= 0) side_channel::close_channel(c, true);
    }
    // Client: the side channel on which the server's CONFIRM brings its ring end
    // (ours now). The server switches only after it sent CONFIRM, so whenever
    // we owe it a ring, CONFIRM is there to be read.
    void await_peer_ring(int chan) {
        await_pid_ = current_pid();
        await_forks_ = forks_begun();
        chan_.store(chan, std::memory_order_release);
    }
    // Client: CONFIRM read (done), not yet (waiting), or the server refused.
    shm_doorbell::Confirm confirm() {
        if (peer_ring_.load(std::memory_order_acquire) >= 0) return shm_doorbell::Confirm::done;
        return take_confirm();
    }
    void forget_other_threads() override { reading_.store(false, std::memory_order_relaxed); }
    int wake_fd() const override { return wake_; }
    // Bumped when drain_wake renewed the pair under the same numbers: an epoll
    // set registers the sleep end again (its old file left the set with its close).
    unsigned wake_generation() const override { return renewals_.load(std::memory_order_acquire); }
    bool failed() const override { return shut_.load(std::memory_order_acquire); }
    std::string failure() const override { return why_.load(std::memory_order_acquire); }
    void ring_peer() override {
        int r = peer_ring_.load(std::memory_order_acquire);
        if (r < 0 && take_confirm() != shm_doorbell::Confirm::done) {
            // Another thread is reading CONFIRM: it rings for us once it has the end.
            owed_.store(true, std::memory_order_seq_cst);
            if ((r = peer_ring_.load(std::memory_order_seq_cst)) < 0 || !owed_.exchange(false)) return;
        }
        shm_doorbell::ring(peer_ring_.load(std::memory_order_acquire));
    }
    bool wake_self() override {
        if (wake_ < 0) return false;
        shm_doorbell::ring(self_ring_);
        return true;
    }
    // Only the drain's owner (Connection::try_own_drain) calls this.
    void drain_wake() override {
        if (shm_doorbell::drain(wake_)) return;
        // The peer shut the ring end it shares with us: that EOF would wake every
        // wait for good. A fresh pair under the same numbers, which the peer does
        // not hold, and the connection leaves the rings (failed()).
        fail("the peer shut our doorbell");
        shm_doorbell::renew(wake_, self_ring_);
        renewals_.fetch_add(1, std::memory_order_acq_rel);
        wake_self();  // a sleeper that polled the old pair looks again
    }
    std::atomic<uint64_t>* tx_switch() override { return wake_ >= 0 ? &ch_->tx_control().switch_at : nullptr; }
    std::atomic<uint64_t>* rx_switch() override { return wake_ >= 0 ? &ch_->rx_control().switch_at : nullptr; }
    RingControl* tx_control() override { return wake_ >= 0 ? &ch_->tx_control() : nullptr; }
    RingControl* rx_control() override { return wake_ >= 0 ? &ch_->rx_control() : nullptr; }
    uint8_t* tx_ring() override { return ch_->tx_ring(); }
    const char* name() const override { return "shm"; }
    ring::RingWriter& writer() override { return ch_->writer(); }
    ring::RingReader& reader() override { return ch_->reader(); }
    bool arm_reader(bool on) override {
        ch_->rx_control().reader_waiting.store(on, std::memory_order_seq_cst);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return true;
    }
    bool arm_writer(bool on) override {
        ch_->tx_control().writer_waiting.store(on, std::memory_order_seq_cst);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return true;
    }
    bool take_peer_reader_waiting() override {
        auto& f = ch_->tx_control().reader_waiting;
        return f.load(std::memory_order_relaxed) && f.exchange(0, std::memory_order_acq_rel);
    }
    bool take_peer_writer_waiting() override {
        auto& f = ch_->rx_control().writer_waiting;
        return f.load(std::memory_order_relaxed) && f.exchange(0, std::memory_order_acq_rel);
    }
    ShmChannel& channel() { return *ch_; }

private:
    void fail(const char* why) {
        why_.store(why, std::memory_order_release);
        shut_.store(true, std::memory_order_release);
    }
    // CONFIRM, by one thread at a time (never waits: another reader means "not now").
    // One fork-fence section: a fork lands before the look at forks_begun (and
    // this process peeks) or after the ring end is stored (and the child has it),
    // never between a take and the store, which left the child without CONFIRM.
    shm_doorbell::Confirm take_confirm() {
        using shm_doorbell::Confirm;
        fork_fence::Section fence;
        if (reading_.exchange(true, std::memory_order_acquire)) return Confirm::waiting;
        Confirm c = Confirm::done;
        if (peer_ring_.load(std::memory_order_acquire) < 0) {
            const int chan = chan_.load(std::memory_order_acquire);
            int r = -1;
            // Forked since ACCEPT: the child holds the channel too, and CONFIRM is
            // left for it. (Not always: a queued file makes the channel's close
            // a job for fd_reaper's thread.)
            const bool shared = current_pid() != await_pid_ || forks_begun() != await_forks_;
            c = chan < 0 ? Confirm::refused : shm_doorbell::receive_ring_end(chan, kConfirmTag, r, shared);
            // The ring end first: a fork between the two stores leaves a child
            // that holds the doorbell, not one with neither it nor the channel.
            if (c == Confirm::done) peer_ring_.store(adopt_own_fd(r), std::memory_order_seq_cst);
            if (c != Confirm::waiting && chan >= 0) {
                chan_.store(-1, std::memory_order_release);
                side_channel::close_channel(chan, true);
            }
            // A server that switched and then sent no ring end is not our shim.
            if (c == Confirm::refused && ch_->rx_control().switch_at.load(std::memory_order_acquire) != RingControl::kNotSwitched)
                fail("the server's CONFIRM brought no doorbell");
        }
        reading_.store(false, std::memory_order_release);
        if (c == Confirm::done && owed_.exchange(false)) shm_doorbell::ring(peer_ring_.load(std::memory_order_acquire));
        return c;
    }

public:
    static constexpr uint8_t kConfirmTag = 3;  // shm_rendezvous.cpp's kConfirm

private:
    std::unique_ptr<ShmChannel> ch_;
    int wake_ = -1, self_ring_ = -1;
    std::atomic<int> peer_ring_{-1};
    std::atomic<int> chan_{-1};               // client: until CONFIRM
    int await_pid_ = 0;                       // current_pid() and forks_begun() at await_peer_ring
    uint64_t await_forks_ = 0;
    std::atomic<bool> reading_{false}, owed_{false};
    std::atomic<bool> shut_{false};           // the peer shut our doorbell, or sent no ring end
    std::atomic<const char*> why_{""};
    std::atomic<unsigned> renewals_{0};
};

}  // namespace rdmasock
