// Argument checks the kernel makes before a socket call touches user memory,
// done without a syscall so the ring path can answer as TCP would (EINVAL,
// EFAULT) instead of crashing in a memcpy.
#pragma once

#include <sys/uio.h>

#include <climits>
#include <cstddef>
#include <cstdint>

namespace rdmasock {

// The bytes an iovec array asks for (a negative count asks for none).
inline size_t iov_total(const iovec* iov, size_t n) {
    size_t t = 0;
    for (size_t i = 0; i < n; ++i) t += iov[i].iov_len;
    return t;
}
inline size_t iov_total(const iovec* iov, int n) { return n > 0 ? iov_total(iov, static_cast<size_t>(n)) : 0; }

// readv/writev/sendmsg/recvmsg: more than IOV_MAX (or a negative count) is EINVAL.
inline bool iov_count_ok(size_t cnt) { return cnt <= static_cast<size_t>(IOV_MAX); }

// A range no process can have mapped: inside the never-mapped first page, past
// the top of user space on x86-64 and arm64 (57-bit with 5-level paging), or
// wrapping around. Any other bad address (unmapped user memory) is not caught:
// telling it apart costs a syscall (docs/compatibility.md).
inline bool user_range_ok(const void* p, size_t len) {
    if (len == 0) return true;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    constexpr uintptr_t kLow = 4096, kTop = uintptr_t{1} << 57;
    return a >= kLow && a < kTop && len <= kTop - a;
}

inline bool user_iov_ok(const iovec* iov, int cnt) {
    for (int i = 0; i < cnt; ++i)
        if (!user_range_ok(iov[i].iov_base, iov[i].iov_len)) return false;
    return true;
}

}  // namespace rdmasock
