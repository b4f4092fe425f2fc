// A Socket's line in this process's stat page (`rdmasock stat`, docs/stat.md).
// Freed when the Socket goes, i.e. after the last close and the last call in flight.
#pragma once

#include <atomic>

#include "stat/stat_page.hpp"

namespace rdmasock::shim {

class StatSlotRef {
public:
    StatSlotRef() = default;
    ~StatSlotRef();
    StatSlotRef(const StatSlotRef&) = delete;
    StatSlotRef& operator=(const StatSlotRef&) = delete;

    stat::Slot* get() const { return slot_.load(std::memory_order_relaxed); }
    void set(stat::Slot* s) { slot_.store(s, std::memory_order_relaxed); }

private:
    std::atomic<stat::Slot*> slot_{nullptr};  // null: untracked, or the page was full or absent
};

}  // namespace rdmasock::shim
