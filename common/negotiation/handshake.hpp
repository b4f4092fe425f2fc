// In-band negotiation messages, sent on the TCP connection before any
// application byte.
//
//   header (16 bytes): magic[7] "\xF7RDMASK", version u8, type u8, reserved[3],
//                      body_length u32 (little endian)
//   HELLO   (client): offers u32 (bit 0 shm, bit 1 rdma), uid u32, ring_bytes u64, boot_id[16],
//                     then, only when rdma is offered, the client's RdmaParams blob (68 bytes)
//   ACCEPT  (server): transport u32, ring_bytes u64, name_length u16, name[...],
//                     then, only when transport is rdma, the server's RdmaParams blob (68 bytes)
//   DECLINE (server): reason u32
//   READY   (client): empty: the client mapped the transport, data now flows in rings
//   ABORT   (client): reason u32: the client could not map it, both stay on TCP
//
// A server upgrades only if the stream's first bytes are a complete, valid
// HELLO; anything else (including a malformed HELLO) is application data and
// stays untouched in the kernel buffer, because the parser only peeks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rdmasock::handshake {

inline constexpr uint8_t kMagic[7] = {0xF7, 'R', 'D', 'M', 'A', 'S', 'K'};
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 16;
inline constexpr uint32_t kMaxBody = 1024;
inline constexpr size_t kMaxMessage = kHeaderBytes + kMaxBody;

enum class Type : uint8_t { hello = 1, accept = 2, decline = 3, ready = 4, abort = 5 };

inline constexpr uint32_t kOfferShm = 1u << 0;
inline constexpr uint32_t kOfferRdma = 1u << 1;
// Size of the RdmaParams blob in HELLO/ACCEPT (== rdmasock::kRdmaParamsBytes,
// checked where both headers meet, in rdma_setup.cpp).
inline constexpr size_t kRdmaBlobBytes = 68;

enum class Reason : uint32_t {
    none = 0, disabled = 1, other_host = 2, other_user = 3, no_transport = 4, setup_failed = 5, bad_version = 6,
};

struct Message {
    Type type = Type::hello;
    uint8_t version = kVersion;
    // HELLO
    uint32_t offers = 0;
    uint32_t uid = 0;
    uint64_t ring_bytes = 0;
    std::array<uint8_t, 16> boot_id{};
    // ACCEPT
    uint32_t transport = 0;
    std::string name;
    // HELLO offering rdma / ACCEPT of rdma: the sender's encoded RdmaParams
    // (common/rdma_params.hpp; decoded and validated by the receiver).
    std::vector<uint8_t> rdma;
    // DECLINE / ABORT
    Reason reason = Reason::none;
};

enum class Parse {
    complete,       // `consumed` bytes form `message`
    need_more,      // a prefix of a valid message: wait for more bytes
    not_handshake,  // application data (or a message we refuse to interpret)
};

struct ParseResult {
    Parse status = Parse::not_handshake;
    size_t consumed = 0;
    Message message;
    std::string why;  // for not_handshake after a valid magic: what was wrong
};

ParseResult parse(const uint8_t* data, size_t len);
std::vector<uint8_t> encode(const Message& m);

const char* to_string(Type t);
const char* to_string(Reason r);

// This boot's identity (/proc/sys/kernel/random/boot_id): equal on both ends
// means same kernel, a precondition for shared memory.
std::array<uint8_t, 16> local_boot_id();

}  // namespace rdmasock::handshake
