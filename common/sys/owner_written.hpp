// A counter or flag that one thread writes (under its side's exclusion: the
// read lock, the write lock) while other threads may look at it unlocked (poll,
// FIONREAD, statistics). Release stores and acquire loads: plain moves on x86,
// no data race (ThreadSanitizer checks the threads that look), and a looker
// that reads two of them in the owner's reverse order of writing never sees
// the second older than the first (Connection::ring_arrivals relies on it).
//
// `+=` is a load and a store, not a read-modify-write: only the owner writes.
// A looker may see a value a moment old; what it decides from one is a look,
// never a verdict (docs/protocol.md, "Only reads break a ring").
#pragma once

#include <atomic>

namespace rdmasock {

template <class T>
class OwnerWritten {
public:
    constexpr OwnerWritten(T v = T{}) : v_(v) {}
    OwnerWritten(const OwnerWritten&) = delete;
    OwnerWritten& operator=(const OwnerWritten&) = delete;

    T get() const { return v_.load(std::memory_order_acquire); }
    operator T() const { return get(); }
    OwnerWritten& operator=(T v) {
        v_.store(v, std::memory_order_release);
        return *this;
    }
    OwnerWritten& operator+=(T d) { return *this = static_cast<T>(get() + d); }

private:
    std::atomic<T> v_;
};

}  // namespace rdmasock
