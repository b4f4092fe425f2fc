// PublishedPtr: an owning pointer set once, while other threads may already read it.
//
// A Connection gets its transport in the middle of its life (the upgrade, the
// rendezvous), from whichever thread steps it, while other threads look at it
// without the stepping thread's locks (a lock let go that wakes sleepers, a poll
// that asks for state changes). A unique_ptr read so is a data race; here the store
// is a release and every read an acquire (a plain load on x86), so a reader sees
// null or the whole object. Never reset before destruction: a reader may hold it.
#pragma once

#include <atomic>
#include <memory>

namespace rdmasock {

template <class T>
class PublishedPtr {
public:
    PublishedPtr() = default;
    PublishedPtr(const PublishedPtr&) = delete;
    PublishedPtr& operator=(const PublishedPtr&) = delete;
    ~PublishedPtr() { delete p_.load(std::memory_order_relaxed); }

    // Once: the first object stays (a reader may hold it); a later one is freed.
    void publish(std::unique_ptr<T> t) {
        T* expected = nullptr;
        if (p_.compare_exchange_strong(expected, t.get(), std::memory_order_acq_rel)) t.release();
    }
    T* get() const { return p_.load(std::memory_order_acquire); }
    T* operator->() const { return get(); }
    T& operator*() const { return *get(); }
    explicit operator bool() const { return get() != nullptr; }

private:
    std::atomic<T*> p_{nullptr};
};

}  // namespace rdmasock
