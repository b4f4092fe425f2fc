// The same-host transport: a ShmChannel behind the Transport interface.
#pragma once

#include <memory>

#include "shm_channel.hpp"
#include "transport.hpp"

namespace rdmasock {

class ShmTransport final : public Transport {
public:
    explicit ShmTransport(std::unique_ptr<ShmChannel> channel) : ch_(std::move(channel)) {}
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
    // Both sides have it mapped now: the name has done its job.
    void on_peer_ready() override { ch_->unlink(); }
    ShmChannel& channel() { return *ch_; }

private:
    std::unique_ptr<ShmChannel> ch_;
};

}  // namespace rdmasock
