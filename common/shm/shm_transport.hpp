// The same-host transport: a ShmChannel behind the Transport interface.
#pragma once

#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "sys/raw_syscall.hpp"
#include "sys/kernel_calls.hpp"
#include "shm/shm_channel.hpp"
#include "ring/transport.hpp"
#include "sys/own_fd.hpp"

namespace rdmasock {

class ShmTransport final : public Transport {
public:
    // `mine` is the eventfd this side sleeps on, `peers` the one the peer
    // sleeps on (both came with the rings over the side channel). Takes
    // ownership of both.
    ShmTransport(std::unique_ptr<ShmChannel> channel, int mine, int peers)
        : ch_(std::move(channel)), wake_(mine), peer_wake_(peers) {}
    ~ShmTransport() override {
        if (wake_ >= 0) close_own_fd(wake_);
        if (peer_wake_ >= 0) close_own_fd(peer_wake_);
    }
    int wake_fd() const override { return wake_; }
    void ring_peer() override {
        int saved = errno;
        uint64_t one = 1;
        // EAGAIN means the counter is huge: the peer has a wake-up pending anyway.
        [[maybe_unused]] ssize_t n = kernel::write(peer_wake_, &one, sizeof one);
        errno = saved;
    }
    bool wake_self() override {
        if (wake_ < 0) return false;
        int saved = errno;
        uint64_t one = 1;
        (void)raw_syscall(SYS_write, wake_, &one, sizeof one);  // a raw write: write() is interposed
        errno = saved;
        return true;
    }
    void drain_wake() override {
        int saved = errno;
        uint64_t v;
        // The peer shares this eventfd's file description and could clear its
        // O_NONBLOCK: the read itself must never sleep.
        [[maybe_unused]] ssize_t n = kernel::read_nowait(wake_, &v, sizeof v);
        errno = saved;
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
    std::unique_ptr<ShmChannel> ch_;
    int wake_ = -1, peer_wake_ = -1;
};

}  // namespace rdmasock
