// The memory of a same-host connection: an anonymous memfd, sealed before the
// peer ever sees it.
//
// Why not a named /dev/shm segment: a name can be guessed, squatted or left
// behind, and a tmpfs that fills up turns the first touch of an unbacked page
// into SIGBUS. A memfd lives on the kernel's own shmem mount, which has no size
// to fill: its pages are allocated at first touch and only memory itself can
// run short, which the memory budget guards before the rings' writers touch
// them (memory_budget.hpp; a writer backs each part of its ring before use,
// shm_channel.hpp). So a ring costs the pages its connection used, not its
// size. The size is sealed (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), so
// neither side can shrink it under the other's mapping, and a segment from the
// peer must be such a memfd (tmpfs, not hugetlbfs, whose pages can run out
// into SIGBUS). The fd travels to the peer with SCM_RIGHTS over the side
// channel and is closed once mapped.
#pragma once

#include <cstddef>
#include <string>

namespace rdmasock {

// Why a memfd another process passed us may not be mapped, nullptr when it
// may: the seals that keep it from shrinking under our mapping (SIGBUS), the
// kernel's shmem mount (a hugetlbfs memfd can run out of pages into SIGBUS),
// and an address space that leaves the program room for its `size` bytes.
// (MemfdSegment::attach for the peer's rings; leftover::adopt for kept bytes.)
const char* unsafe_to_map(int fd, size_t size);

class MemfdSegment {
public:
    MemfdSegment() = default;
    MemfdSegment(const MemfdSegment&) = delete;
    MemfdSegment& operator=(const MemfdSegment&) = delete;
    MemfdSegment(MemfdSegment&& o) noexcept { *this = std::move(o); }
    MemfdSegment& operator=(MemfdSegment&& o) noexcept;
    ~MemfdSegment();

    // Creates, seals and maps `size` zeroed bytes; `charge` of them count in
    // memory_budget::held_bytes() while this lives (what its creator expects to
    // touch). False with `err` on failure (the caller stays on TCP).
    bool create(size_t size, size_t charge, std::string& err);
    // Maps a segment received from the peer: it must be a memfd of exactly `size`
    // bytes carrying all three seals. Takes ownership of `fd` either way.
    bool attach(int fd, size_t size, std::string& err);
    // The fd to pass to the peer (creator side; -1 after release_fd()).
    int fd() const { return fd_; }
    // The mapping outlives the fd: close it once the peer holds its own copy.
    void release_fd();

    void* data() const { return data_; }
    size_t size() const { return size_; }

private:
    void* data_ = nullptr;
    size_t size_ = 0;
    int fd_ = -1;
    size_t held_ = 0;  // created here: counted in memory_budget::held_bytes()
};

}  // namespace rdmasock
