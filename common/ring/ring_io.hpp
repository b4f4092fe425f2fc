// Result types shared by the ring reader and writer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rdmasock::ring {

enum class RingStatus {
    ok,           // bytes moved
    would_block,  // nothing to read / no space: try again later
    eof,          // the peer shut down its direction (reader only)
    broken,       // the peer wrote something impossible, or the transport failed
};

struct IoResult {
    size_t bytes = 0;
    RingStatus status = RingStatus::ok;
    // The application's buffer faulted (guard::copy_*): `bytes` counts only the
    // records copied whole before the one that faulted, which stays unread /
    // unwritten, as TCP counts only whole socket buffers (docs/compatibility.md).
    bool fault = false;
};

const char* to_string(RingStatus s);

}  // namespace rdmasock::ring
