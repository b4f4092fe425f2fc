#include "shm_channel.hpp"

namespace rdmasock {

namespace {

constexpr uint64_t kMagic = 0x6b636f73616d6472ull;  // "rdmasock"
constexpr uint32_t kLayoutVersion = 1;
constexpr size_t kPage = 4096;

struct SegmentHeader {
    uint64_t magic;
    uint32_t version;
    uint32_t reserved;
    uint64_t ring_capacity;
};

size_t control_offset(int side) { return kPage + side * kPage; }
size_t ring_offset(int side, uint64_t capacity) { return 3 * kPage + side * capacity; }

}  // namespace

size_t ShmChannel::segment_size(uint64_t ring_capacity) { return 3 * kPage + 2 * ring_capacity; }

ShmChannel::ShmChannel(ShmSegment segment, int side, uint64_t capacity)
    : segment_(std::move(segment)), side_(side) {
    auto* base = static_cast<uint8_t*>(segment_.data());
    tx_control_ = reinterpret_cast<RingControl*>(base + control_offset(side));
    rx_control_ = reinterpret_cast<RingControl*>(base + control_offset(1 - side));
    sink_.ring = base + ring_offset(side, capacity);
    publisher_.counter = &rx_control_->consumed;
    writer_ = std::make_unique<ring::RingWriter>(capacity, sink_, &tx_control_->consumed);
    reader_ = std::make_unique<ring::RingReader>(base + ring_offset(1 - side, capacity), capacity, publisher_);
}

std::unique_ptr<ShmChannel> ShmChannel::create(uint64_t ring_capacity, std::string& err) {
    if (!ring::valid_capacity(ring_capacity)) return err = "invalid ring capacity", nullptr;
    ShmSegment seg;
    if (!seg.create(segment_size(ring_capacity), err)) return nullptr;
    auto* base = static_cast<uint8_t*>(seg.data());
    new (base + control_offset(0)) RingControl();
    new (base + control_offset(1)) RingControl();
    auto* h = reinterpret_cast<SegmentHeader*>(base);
    h->version = kLayoutVersion;
    h->ring_capacity = ring_capacity;
    std::atomic_ref<uint64_t>(h->magic).store(kMagic, std::memory_order_release);
    return std::unique_ptr<ShmChannel>(new ShmChannel(std::move(seg), 0, ring_capacity));
}

std::unique_ptr<ShmChannel> ShmChannel::attach(const std::string& name, uint64_t ring_capacity,
                                               std::string& err) {
    if (!ring::valid_capacity(ring_capacity)) return err = "invalid ring capacity", nullptr;
    ShmSegment seg;
    if (!seg.open(name, segment_size(ring_capacity), err)) return nullptr;
    auto* h = static_cast<SegmentHeader*>(seg.data());
    if (std::atomic_ref<uint64_t>(h->magic).load(std::memory_order_acquire) != kMagic ||
        h->version != kLayoutVersion || h->ring_capacity != ring_capacity)
        return err = "segment header does not match the handshake", nullptr;
    return std::unique_ptr<ShmChannel>(new ShmChannel(std::move(seg), 1, ring_capacity));
}

}  // namespace rdmasock
