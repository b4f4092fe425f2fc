// Two rings in one shared-memory segment: a full-duplex channel between two
// processes on one host. The "remote write" of the ring protocol is a memcpy
// straight into the peer's ring; ordering comes from the ring's release/acquire
// footer and counter accesses.
//
// Segment layout (every part page aligned):
//   [SegmentHeader][RingControl side 0][RingControl side 1][ring 0][ring 1]
// Side s writes ring s and reads ring 1-s. RingControl s belongs to ring s.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "ring/ring_reader.hpp"
#include "ring/ring_writer.hpp"
#include "shm/memfd_segment.hpp"
#include "ring/ring_control.hpp"

namespace rdmasock {

class ShmChannel {
public:
    // A sealed memfd (memfd_segment.hpp): side 0 creates it (memfd_fd() is
    // what to pass to the peer over the side channel), side 1 maps the fd it
    // received (taking ownership of it) and validates its header.
    //
    // Each side's writer starts with a window of ring::kFirstWindow of its
    // ring and doubles it when it finds it full (ring_writer.hpp); before it
    // goes past what it used, it takes the memory from this process's budget
    // (`memory_cap`: RDMASOCK_RING_MEMORY, UINT64_MAX = auto) and faults the
    // pages in (MADV_POPULATE_WRITE: a shortage is an error, not a signal).
    // No room: the window stays as it is. An idle connection of small
    // messages costs the few pages it touched.
    static std::unique_ptr<ShmChannel> create_sealed(uint64_t ring_capacity, std::string& err,
                                                     uint64_t memory_cap = UINT64_MAX);
    static std::unique_ptr<ShmChannel> attach_sealed(int fd, uint64_t ring_capacity, std::string& err,
                                                     uint64_t memory_cap = UINT64_MAX);
    ~ShmChannel();
    int memfd_fd() const { return memfd_.fd(); }
    void release_memfd() { memfd_.release_fd(); }

    ShmChannel(const ShmChannel&) = delete;
    ShmChannel& operator=(const ShmChannel&) = delete;

    int side() const { return side_; }

    ring::RingWriter& writer() { return *writer_; }
    ring::RingReader& reader() { return *reader_; }
    RingControl& tx_control() { return *tx_control_; }  // the ring we write
    RingControl& rx_control() { return *rx_control_; }  // the ring we read
    uint8_t* tx_ring() { return sink_.ring; }            // the ring we write (in the peer's view: its rx)

    static size_t segment_size(uint64_t ring_capacity);

private:
    ShmChannel(MemfdSegment segment, int side, uint64_t capacity, uint64_t memory_cap);
    void map_rings(uint8_t* base, uint64_t capacity);
    static void init_segment(uint8_t* base, uint64_t capacity);
    static bool check_segment(const uint8_t* base, uint64_t capacity, std::string& err);

    struct LocalSink final : ring::RecordSink {
        uint8_t* ring = nullptr;
        uint64_t memory_cap = UINT64_MAX;
        uint64_t held = 0;  // window growth taken from the memory budget
        uint8_t* stage(uint64_t offset, uint64_t) override { return ring + offset; }
        bool post(uint64_t, uint64_t) override { return true; }  // the footer's release store did it
        bool back(uint64_t from, uint64_t to) override;
        void release(uint64_t from, uint64_t to) override;
    };
    struct CounterPublisher final : ring::ConsumedPublisher {
        std::atomic<uint64_t>* counter = nullptr;
        const std::atomic<uint32_t>* grown = nullptr;  // the writer's RingControl::window_grown
        bool publish_consumed(uint64_t consumed) override {
            counter->store(consumed, std::memory_order_release);
            return true;
        }
        bool drain_wanted() const override { return grown->load(std::memory_order_relaxed) != 0; }
    };

    MemfdSegment memfd_;
    int side_;
    RingControl* tx_control_;
    RingControl* rx_control_;
    LocalSink sink_;
    CounterPublisher publisher_;
    std::unique_ptr<ring::RingWriter> writer_;
    std::unique_ptr<ring::RingReader> reader_;
};

}  // namespace rdmasock
