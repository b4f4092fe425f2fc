#include "sys/raw_syscall.hpp"
#include "base/log.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cstdio>

namespace rdmasock {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::warn)};
std::atomic<bool> g_silent{false};

void emit(const char* prefix, const char* fmt, va_list ap) {
    if (g_silent.load(std::memory_order_relaxed)) return;
    char buf[1024];
    int n = std::snprintf(buf, sizeof buf, "rdmasock[%d]: %s", static_cast<int>(getpid()), prefix);
    if (n < 0) return;
    int m = std::vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, fmt, ap);
    if (m < 0) return;
    size_t len = std::min(sizeof buf - 2, static_cast<size_t>(n + m));
    buf[len++] = '\n';
    // A log line must never hurt the program: a stderr file at RLIMIT_FSIZE
    // (sshd's privilege-separated child sets it to 0) raises SIGXFSZ, which
    // kills by default. Blocked around the write; the one it raised is taken.
    const int saved = errno;
    sigset_t xfsz, old;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &old);
    if (raw_syscall(SYS_write, 2, buf, len) < 0 && errno == EFBIG && !sigismember(&old, SIGXFSZ)) {
        timespec none{0, 0};
        sigtimedwait(&xfsz, nullptr, &none);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = saved;
}
}  // namespace

void silence_log() { g_silent.store(true, std::memory_order_relaxed); }

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
