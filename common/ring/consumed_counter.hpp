// The reader's consumed position as its writer sees it: a u64 in the writer's
// memory that the peer's reader stores into. Over shared memory that store is
// one CPU store. Over RDMA it is a NIC's (or rxe's memcpy's) write, which no
// one promises is atomic: Soft-RoCE under an emulated CPU lands it a byte at a
// time (rep movsb), so a single load can see low bytes of the new value beside
// high bytes of the old one, a position nobody published.
//
// So RDMA publishes the value twice, side by side in one WRITE (value, then
// copy), and the writer loads the copy first: writes land in ascending
// address order (the ring's footers rely on the same, ring_reader.cpp), so a
// copy that shows any new byte means the value before it is wholly new, and
// the two agree only when neither load was torn.
#pragma once

#include <atomic>
#include <cstdint>

namespace rdmasock::ring {

struct ConsumedCounter {
    const std::atomic<uint64_t>* value = nullptr;
    const std::atomic<uint64_t>* copy = nullptr;  // RDMA: value's twin, the 8 bytes after it

    ConsumedCounter() = default;
    ConsumedCounter(const std::atomic<uint64_t>* v, const std::atomic<uint64_t>* c = nullptr) : value(v), copy(c) {}

    // The published position, or false while a write is landing (the
    // publication's completion wakes a writer that waits for it).
    bool load(uint64_t& out) const {
        if (!copy) {
            out = value->load(std::memory_order_acquire);
            return true;
        }
        for (int tries = 0; tries < 64; ++tries) {
            const uint64_t c = copy->load(std::memory_order_acquire);
            const uint64_t v = value->load(std::memory_order_acquire);
            if (c == v) {
                out = v;
                return true;
            }
        }
        return false;
    }
};

}  // namespace rdmasock::ring
