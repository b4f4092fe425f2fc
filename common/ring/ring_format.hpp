// Ring record layout shared by every transport.
//
// A ring is a power-of-two byte array in the reader's memory. Records start at
// 8-byte aligned offsets and look like
//
//     [u32 header][payload][zero padding to 8][u32 footer]
//
// header = kind << 24 | payload length (a zero header means "nothing here yet").
// The footer sits at start + 4 + round_up(length, 8) and must equal
// footer_for(header, absolute position). The reader polls the footer: it holds
// the expected value only once the whole record has landed, because
//  (1) the reader zeroes every record it consumed, and
//  (2) writes land first byte to last (stores ordered by a release store of the
//      footer for shared memory; an RC queue pair's RDMA WRITE for verbs).
// Every byte of an expected footer is non-zero, so a footer that is still being
// written (a prefix of its bytes) never matches.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rdmasock::ring {

enum class RecordKind : uint32_t {
    none = 0,  // zeroed memory: no record yet
    data = 1,  // payload bytes of the stream
    wrap = 2,  // rest of this lap is unused; the next record starts at offset 0
    fin = 3,   // the writer shut down its direction: end of stream
};

inline constexpr uint32_t kHeaderBytes = 4;
inline constexpr uint32_t kFooterBytes = 4;
inline constexpr uint32_t kAlign = 8;
inline constexpr uint32_t kMaxLengthField = (1u << 24) - 1;
inline constexpr uint64_t kMinCapacity = 1024;
inline constexpr uint64_t kMaxCapacity = 1ull << 30;

constexpr uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

// Bytes a record with `length` payload bytes occupies in the ring.
constexpr uint64_t record_bytes(uint32_t length) {
    return kHeaderBytes + round_up(length, kAlign) + kFooterBytes;
}

// Offset of the footer relative to the record start.
constexpr uint64_t footer_offset(uint32_t length) { return kHeaderBytes + round_up(length, kAlign); }

constexpr uint32_t make_header(RecordKind kind, uint32_t length) {
    return static_cast<uint32_t>(kind) << 24 | (length & kMaxLengthField);
}
constexpr RecordKind header_kind(uint32_t header) { return static_cast<RecordKind>(header >> 24); }
constexpr uint32_t header_length(uint32_t header) { return header & kMaxLengthField; }

// The validity footer binds the header to the record's absolute stream position,
// so a stale record from an earlier lap or a misplaced one never validates.
constexpr uint32_t footer_for(uint32_t header, uint64_t position) {
    uint64_t x = (static_cast<uint64_t>(header) << 32) ^ position ^ 0x9e3779b97f4a7c15ull;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return static_cast<uint32_t>(x) | 0x80808080u;  // every byte non-zero
}

// The largest payload one record may carry in a ring of `capacity` bytes. A
// quarter of the ring keeps the space lost to a wrap marker bounded and leaves
// room for lazy consumed-counter publication (see ring_reader.hpp).
constexpr uint32_t max_payload(uint64_t capacity) {
    uint64_t quarter = capacity / 4 - kHeaderBytes - kFooterBytes;
    return static_cast<uint32_t>(quarter < kMaxLengthField ? quarter : (kMaxLengthField & ~(kAlign - 1)));
}

constexpr bool valid_capacity(uint64_t capacity) {
    return capacity >= kMinCapacity && capacity <= kMaxCapacity && (capacity & (capacity - 1)) == 0;
}

// Where the record after the one at `position` starts. A wrap marker ends the
// lap wherever it stands: a writer whose window (ring_writer.hpp) is smaller
// than the ring wraps at the window's end, and the positions it skips count as
// written and consumed, so both cursors stay absolute and footers stay bound.
constexpr uint64_t next_position(uint64_t position, RecordKind kind, uint32_t length, uint64_t capacity) {
    return kind == RecordKind::wrap ? (position & ~(capacity - 1)) + capacity : position + record_bytes(length);
}

// The part of a same-host ring a new connection's writer uses first: what a
// connection of small requests and answers ever touches. Its writer doubles
// the window each time it finds it full, up to the ring (RingWriter), backing
// the pages first; the rest of the ring costs address space only.
inline constexpr uint64_t kFirstWindow = 16 * 1024;

}  // namespace rdmasock::ring
