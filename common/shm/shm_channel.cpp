#include "shm/shm_channel.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.hpp"
#include "shm/memory_budget.hpp"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace rdmasock {

namespace {

constexpr uint64_t kMagic = 0x6b636f73616d6472ull;  // "rdmasock"
constexpr uint32_t kLayoutVersion = 3;
constexpr size_t kPage = 4096;

struct SegmentHeader {
    uint64_t magic;
    uint32_t version;
    uint32_t reserved;
    uint64_t ring_capacity;
};

static_assert(sizeof(RingControl) <= kPage);
size_t control_offset(int side) { return kPage + side * kPage; }
size_t ring_offset(int side, uint64_t capacity) { return 3 * kPage + side * capacity; }

}  // namespace

size_t ShmChannel::segment_size(uint64_t ring_capacity) { return 3 * kPage + 2 * ring_capacity; }

// What a new segment touches: its header and control pages, each ring's first window.
static size_t first_use(uint64_t ring_capacity) { return 3 * kPage + 2 * std::min(ring_capacity, ring::kFirstWindow); }

ShmChannel::ShmChannel(MemfdSegment segment, int side, uint64_t capacity, uint64_t memory_cap)
    : memfd_(std::move(segment)), side_(side) {
    sink_.memory_cap = memory_cap;
    map_rings(static_cast<uint8_t*>(memfd_.data()), capacity);
}

ShmChannel::~ShmChannel() {
    if (sink_.held) memory_budget::release(sink_.held);
}

// Allocates the pages of [p, p + len) now, where a shortage is an error: a
// first touch that cannot get its page is the OOM killer's, or SIGBUS under
// strict overcommit (shmem charges VM_NORESERVE pages at fault time).
// Kernels before 5.14 lack the advice (EINVAL): the pages fault in at first
// touch, as any memory of the program's does.
static bool populate(uint8_t* p, uint64_t len, std::string& err) {
    if (madvise(p, len, MADV_POPULATE_WRITE) == 0 || errno == EINVAL) return true;
    err = std::string("populate: ") + std::strerror(errno);
    return false;
}

bool ShmChannel::LocalSink::back(uint64_t from, uint64_t to) {
    const uint64_t bytes = to - from;
    if (!memory_budget::take_more(bytes, memory_cap)) {
        RS_LOG(debug, "ring window stays at %llu KiB: memory is short (RDMASOCK_RING_MEMORY)",
               static_cast<unsigned long long>(from >> 10));
        return false;
    }
    if (std::string err; !populate(ring + from, bytes, err)) {
        RS_LOG(debug, "ring window stays at %llu KiB: %s", static_cast<unsigned long long>(from >> 10), err.c_str());
        memory_budget::release(bytes);
        return false;
    }
    held += bytes;
    return true;
}

// MADV_REMOVE frees the pages in the file itself, so for the peer's mapping
// too; a later touch would find zeroes, and the writer backs them first anyway.
void ShmChannel::LocalSink::release(uint64_t from, uint64_t to) {
    const uint64_t bytes = std::min(to - from, held);
    if (madvise(ring + from, to - from, MADV_REMOVE) != 0) return;  // kept: still counted
    held -= bytes;
    memory_budget::release(bytes);
}

void ShmChannel::map_rings(uint8_t* base, uint64_t capacity) {
    tx_control_ = reinterpret_cast<RingControl*>(base + control_offset(side_));
    rx_control_ = reinterpret_cast<RingControl*>(base + control_offset(1 - side_));
    sink_.ring = base + ring_offset(side_, capacity);
    publisher_.counter = &rx_control_->consumed;
    publisher_.grown = &rx_control_->window_grown;
    writer_ = std::make_unique<ring::RingWriter>(capacity, sink_, &tx_control_->consumed, ring::kFirstWindow);
    writer_->announce_window_to(&tx_control_->window_grown);
    reader_ = std::make_unique<ring::RingReader>(base + ring_offset(1 - side_, capacity), capacity, publisher_,
                                                 ring::kFirstWindow);
}

void ShmChannel::init_segment(uint8_t* base, uint64_t capacity) {
    new (base + control_offset(0)) RingControl();
    new (base + control_offset(1)) RingControl();
    auto* h = reinterpret_cast<SegmentHeader*>(base);
    h->version = kLayoutVersion;
    h->ring_capacity = capacity;
    std::atomic_ref<uint64_t>(h->magic).store(kMagic, std::memory_order_release);
}

bool ShmChannel::check_segment(const uint8_t* base, uint64_t capacity, std::string& err) {
    auto* h = reinterpret_cast<SegmentHeader*>(const_cast<uint8_t*>(base));
    if (std::atomic_ref<uint64_t>(h->magic).load(std::memory_order_acquire) != kMagic ||
        h->version != kLayoutVersion || h->ring_capacity != capacity)
        return err = "segment header does not match the handshake", false;
    return true;
}

std::unique_ptr<ShmChannel> ShmChannel::create_sealed(uint64_t ring_capacity, std::string& err, uint64_t memory_cap) {
    if (!ring::valid_capacity(ring_capacity)) return err = "invalid ring capacity", nullptr;
    static_assert(ring::kFirstWindow % kPage == 0);
    MemfdSegment seg;
    if (!seg.create(segment_size(ring_capacity), first_use(ring_capacity), err)) return nullptr;
    // Everything either side touches before a window grows, allocated here.
    auto* base = static_cast<uint8_t*>(seg.data());
    const uint64_t first = std::min(ring_capacity, ring::kFirstWindow);
    if (!populate(base, 3 * kPage, err) || !populate(base + ring_offset(0, ring_capacity), first, err) ||
        !populate(base + ring_offset(1, ring_capacity), first, err))
        return nullptr;
    init_segment(base, ring_capacity);
    return std::unique_ptr<ShmChannel>(new ShmChannel(std::move(seg), 0, ring_capacity, memory_cap));
}

std::unique_ptr<ShmChannel> ShmChannel::attach_sealed(int fd, uint64_t ring_capacity, std::string& err,
                                                      uint64_t memory_cap) {
    MemfdSegment seg;
    if (!ring::valid_capacity(ring_capacity)) {
        seg.attach(fd, 0, err);  // takes the fd so it is closed
        return err = "invalid ring capacity", nullptr;
    }
    if (!seg.attach(fd, segment_size(ring_capacity), err)) return nullptr;
    if (!check_segment(static_cast<uint8_t*>(seg.data()), ring_capacity, err)) return nullptr;
    return std::unique_ptr<ShmChannel>(new ShmChannel(std::move(seg), 1, ring_capacity, memory_cap));
}

}  // namespace rdmasock
