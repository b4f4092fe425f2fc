// What one side of an RDMA connection tells the other in the handshake (HELLO from
// the client, ACCEPT from the server): enough to connect a reliable-connected
// queue pair and to RDMA WRITE into the peer's receive ring and control block.
//
// The wire form is a fixed-size little-endian blob (kEncodedBytes), independent of
// the host's struct layout:
//
//   off size field
//     0   4  magic "RDP4" (0x34504452 little endian; refused: "RDP1" peers used TCP
//            doorbells, "RDP2" ones cannot go back to TCP, "RDP3" ones publish
//            the consumed counter once, which a torn landing makes a lie)
//     4  16  gid          port GID the QP is addressed by (RoCE: IPv4-mapped IPv6)
//    20   4  qpn          queue pair number (24 bits)
//    24   4  psn          first packet sequence number (24 bits)
//    28   4  mtu          enum ibv_mtu of the port (1 = 256 .. 5 = 4096)
//    32   8  ring_addr    virtual address of the receive ring (the peer writes here)
//    40   4  ring_rkey
//    44   8  ring_bytes   ring capacity (power of two, ring::valid_capacity)
//    52   8  ctrl_addr    control block (counters and flags, see rdma_transport.hpp)
//    60   4  ctrl_rkey
//    64   2  lid          port LID (InfiniBand link layer only; 0 on RoCE)
//    66   2  reserved     0
//
// decode() validates everything a peer controls that can be checked locally; the
// addresses and keys can only be checked by the peer's NIC (a bad one breaks the
// connection's queue pair, nothing else).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rdmasock {

struct RdmaParams {
    uint8_t gid[16] = {};
    uint32_t qpn = 0;
    uint32_t psn = 0;
    uint32_t mtu = 0;  // enum ibv_mtu value
    uint64_t ring_addr = 0;
    uint32_t ring_rkey = 0;
    uint64_t ring_bytes = 0;
    uint64_t ctrl_addr = 0;
    uint32_t ctrl_rkey = 0;
    uint16_t lid = 0;  // not in the original brief: needed to address a port on InfiniBand
};

inline constexpr size_t kRdmaParamsBytes = 68;
// "RDP4": records and publications raise the peer's receive completions
// (WRITE_WITH_IMM), a connection can go back to TCP (back_marker.hpp), and a
// publication carries the consumed position twice (consumed_counter.hpp).
inline constexpr uint32_t kRdmaParamsMagic = 0x34504452u;

std::vector<uint8_t> encode(const RdmaParams& p);
// False (with a reason in err) when the blob has the wrong size or magic, or a
// field is out of range (qpn/psn over 24 bits, mtu not 256..4096, invalid ring size).
bool decode(const uint8_t* data, size_t len, RdmaParams& out, std::string& err);

// "gid=::ffff:10.99.0.1 qpn=17 ..." for logs.
std::string to_string(const RdmaParams& p);

}  // namespace rdmasock
