// Scratch vectors for the wait calls (poll, select, epoll_wait): one per thread
// and use, kept from call to call, so a call allocates nothing once its vector
// has grown to the program's usual size (issue 35: no allocation per call).
// A call made while the thread's vector is in use (a signal handler's poll
// inside ours) gets one of its own, freed at its end.
#pragma once

#include <atomic>
#include <vector>

namespace rdmasock {

// Tag: any type naming the use (two uses of one element type need two tags).
template <class T, class Tag>
class Scratch {
public:
    Scratch() {
        Slot& s = slot();
        if (!s.busy) {
            s.busy = true;
            std::atomic_signal_fence(std::memory_order_seq_cst);  // a handler on this thread sees it taken
            v_ = &s.v;
        } else {
            v_ = &own_;
        }
        // Empty unless a room() user left its elements (see there).
    }
    ~Scratch() {
        if (v_ == &own_) return;
        if (!kept_) v_->clear();
        std::atomic_signal_fence(std::memory_order_seq_cst);  // given back only once we are done with it
        slot().busy = false;
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    std::vector<T>& operator*() { return *v_; }
    std::vector<T>* operator->() { return v_; }

    // For a buffer that the call fills before it reads it (the kernel's epoll
    // events): at least n elements, kept from call to call. A vector cleared at
    // each call and resized to n zeroes all n each time: epoll_wait with
    // redis's maxevents (over 10,000) spent 8% of redis-server's CPU there.
    // Always used this way for its Tag, or never.
    std::vector<T>& room(size_t n) {
        kept_ = true;
        if (v_->size() < n) v_->resize(n);
        return *v_;
    }

private:
    struct Slot {
        std::vector<T> v;
        bool busy = false;
    };
    static Slot& slot() {
        thread_local Slot s;
        return s;
    }
    std::vector<T>* v_;
    std::vector<T> own_;
    bool kept_ = false;  // room() was used: the elements stay for the next call
};

}  // namespace rdmasock
