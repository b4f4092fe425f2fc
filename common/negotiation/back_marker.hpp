// The marker that starts the way back over TCP for in-band transports (RDMA),
// docs/protocol.md "Downgrade over RDMA". After the upgrade the TCP stream of
// such a connection carries nothing of ours but this marker (once per side),
// so its first byte tells it apart from a stray byte written around the shim
// (which resets the connection: Connection::reset_both).
//
// A side sends its marker once it has stopped reading its ring: the marker
// carries that reader's exact place (record position, bytes of that record
// already delivered). Everything a side sends on TCP after its marker is
// stream data: first the bytes of its own ring the peer's marker says were not
// read, then new data.
//
// Layout (24 bytes, little endian):
//   0  4  magic  EB 'B' 'A' 'K'
//   4  4  read_partial
//   8  8  read_pos
//  16  8  check  read_pos ^ read_partial ^ kCheckSalt (a torn or stray marker fails)
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rdmasock::back_marker {

inline constexpr size_t kBytes = 24;
inline constexpr uint8_t kFirstByte = 0xEB;
inline constexpr uint8_t kMagic[4] = {kFirstByte, 'B', 'A', 'K'};
inline constexpr uint64_t kCheckSalt = 0x6b61622d6b636162ull;

struct Place {
    uint64_t read_pos = 0;
    uint32_t read_partial = 0;
};

inline void encode(const Place& p, uint8_t out[kBytes]) {
    std::memcpy(out, kMagic, 4);
    std::memcpy(out + 4, &p.read_partial, 4);
    std::memcpy(out + 8, &p.read_pos, 8);
    const uint64_t check = p.read_pos ^ p.read_partial ^ kCheckSalt;
    std::memcpy(out + 16, &check, 8);
}

enum class Parse { need_more, ok, stray };

// `n` bytes peeked from the socket. need_more: a correct prefix of a marker.
inline Parse parse(const uint8_t* in, size_t n, Place& p) {
    for (size_t i = 0; i < 4 && i < n; ++i)
        if (in[i] != kMagic[i]) return Parse::stray;
    if (n < kBytes) return Parse::need_more;
    uint64_t check;
    std::memcpy(&p.read_partial, in + 4, 4);
    std::memcpy(&p.read_pos, in + 8, 8);
    std::memcpy(&check, in + 16, 8);
    return check == (p.read_pos ^ p.read_partial ^ kCheckSalt) ? Parse::ok : Parse::stray;
}

}  // namespace rdmasock::back_marker
