// Diagnostics on stderr, written with a raw syscall so logging never re-enters
// the interposed write() and never allocates through the host's stdio.
#pragma once

#include <cstdarg>

namespace rdmasock {

enum class LogLevel { off = 0, error = 1, warn = 2, info = 3, debug = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
bool log_enabled(LogLevel level);
void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Unconditional line on stderr (statistics, configuration errors).
void print_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// From now on write nothing at all: the process is about to run under a
// seccomp filter that may kill it for a syscall the shim's logging makes.
void silence_log();

}  // namespace rdmasock

#define RS_LOG(level, ...)                                                        \
    do {                                                                          \
        if (::rdmasock::log_enabled(::rdmasock::LogLevel::level))                 \
            ::rdmasock::log_message(::rdmasock::LogLevel::level, __VA_ARGS__);    \
    } while (0)
