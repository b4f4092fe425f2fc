// What only the kernel's socket does. Some socket options change what a TCP
// socket delivers or reports in ways the rings do not model: a low-water mark,
// completions on the error queue, peek offsets, receive timestamps and queue
// lengths in control messages, kernel TLS. A connection whose application sets
// one stays on TCP, and one that left it goes back (Connection::keep_on_tcp),
// so the kernel answers exactly as it would without the shim.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>
#include <optional>

namespace rdmasock {

struct KernelOnly {
    const char* option;  // for the statistics line and the log
    // Kernel TLS encrypts what is sent after it: the bytes the ring still holds
    // must be back on TCP before the option takes effect, not after.
    bool before_the_call = false;
};

// Socket options the kernel copies to a socket a listener accepts go with it
// too (sk_clone_lock copies the flags and fields these set).
inline std::optional<KernelOnly> kernel_only_option(int level, int name, const void* value, socklen_t len) {
    int v = 0;
    if (value && len >= sizeof(int)) std::memcpy(&v, value, sizeof v);
    auto when = [](bool set, const char* option) -> std::optional<KernelOnly> {
        if (!set) return std::nullopt;
        return KernelOnly{option};
    };
    if (level == SOL_SOCKET) {
        switch (name) {
            case SO_RCVLOWAT: return when(v > 1, "SO_RCVLOWAT");
            case SO_ZEROCOPY: return when(v != 0, "SO_ZEROCOPY");
            case SO_PEEK_OFF: return when(v >= 0, "SO_PEEK_OFF");
            case SO_TIMESTAMP_OLD:
            case SO_TIMESTAMP_NEW: return when(v != 0, "SO_TIMESTAMP");
            case SO_TIMESTAMPNS_OLD:
            case SO_TIMESTAMPNS_NEW: return when(v != 0, "SO_TIMESTAMPNS");
            case SO_TIMESTAMPING_OLD:
            case SO_TIMESTAMPING_NEW: return when(v != 0, "SO_TIMESTAMPING");
            default: return std::nullopt;
        }
    }
    if (level == IPPROTO_TCP) {
        switch (name) {
            case TCP_ULP: return KernelOnly{"TCP_ULP", true};
            case TCP_INQ: return when(v != 0, "TCP_INQ");
            case TCP_REPAIR: return when(v != 0, "TCP_REPAIR");
            default: return std::nullopt;
        }
    }
    return std::nullopt;
}

}  // namespace rdmasock
