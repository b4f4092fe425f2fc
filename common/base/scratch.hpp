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
        v_->clear();
    }
    ~Scratch() {
        if (v_ == &own_) return;
        v_->clear();
        std::atomic_signal_fence(std::memory_order_seq_cst);  // given back only once we are done with it
        slot().busy = false;
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    std::vector<T>& operator*() { return *v_; }
    std::vector<T>* operator->() { return v_; }

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
};

}  // namespace rdmasock
