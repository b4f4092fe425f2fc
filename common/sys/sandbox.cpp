#include "sys/sandbox.hpp"

#include <atomic>

namespace rdmasock::sandbox {

namespace {
std::atomic<bool> g_inside{false};  // inherited by fork, like the filter itself
}  // namespace

void enter() { g_inside.store(true, std::memory_order_release); }
bool inside() { return g_inside.load(std::memory_order_acquire); }

}  // namespace rdmasock::sandbox
