#include "log.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace rdmasock {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::warn)};

void emit(const char* prefix, const char* fmt, va_list ap) {
    char buf[1024];
    int n = std::snprintf(buf, sizeof buf, "rdmasock[%d]: %s", static_cast<int>(getpid()), prefix);
    if (n < 0) return;
    int m = std::vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, fmt, ap);
    if (m < 0) return;
    size_t len = std::min(sizeof buf - 2, static_cast<size_t>(n + m));
    buf[len++] = '\n';
    syscall(SYS_write, 2, buf, len);
}
}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
bool log_enabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed); }

void log_message(LogLevel level, const char* fmt, ...) {
    static const char* names[] = {"", "error: ", "warning: ", "info: ", "debug: "};
    va_list ap;
    va_start(ap, fmt);
    emit(names[static_cast<int>(level)], fmt, ap);
    va_end(ap);
}

void print_line(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit("", fmt, ap);
    va_end(ap);
}

}  // namespace rdmasock
