// libFuzzer target: rdmasock::handshake::parse on arbitrary bytes.
//
// Properties checked (abort() on violation, so libFuzzer reports a crash):
//  * parse never reads past `len` (ASan: the input is copied into an exactly
//    sized heap buffer) and never crashes, whatever the bytes;
//  * status/consumed are consistent: `complete` consumes 16 + body_length bytes,
//    at most `len`; `need_more`/`not_handshake` consume nothing;
//  * `need_more` is only returned for a prefix of a message: the magic (or a
//    prefix of it) is there and no more than kMaxMessage bytes were needed;
//  * a complete message is prefix-stable: every proper prefix of it parses as
//    need_more (a server peeking a partially arrived HELLO must wait, never
//    treat it as application data or as another message);
//  * anything after the message does not change the result (parse only looks
//    at its own bytes);
//  * round trip: for a complete message, encode(parse(x)) parses back to the
//    same message, and for the current version it reproduces the input bytes
//    exactly except the 3 reserved header bytes (which encode writes as 0).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "negotiation/handshake.hpp"

using namespace rdmasock::handshake;

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz_handshake: property violated: %s\n", what);
    std::abort();
}

#define CHECK(cond)                 \
    do {                            \
        if (!(cond)) fail(#cond);   \
    } while (0)

bool same_message(const Message& a, const Message& b) {
    if (a.type != b.type || a.version != b.version) return false;
    if (a.version != kVersion) return true;  // other versions: only type and version are interpreted
    switch (a.type) {
        case Type::hello:
            return a.offers == b.offers && a.uid == b.uid && a.ring_bytes == b.ring_bytes && a.boot_id == b.boot_id;
        case Type::accept: return a.transport == b.transport && a.ring_bytes == b.ring_bytes && a.name == b.name;
        case Type::decline:
        case Type::abort: return a.reason == b.reason;
        case Type::ready: return true;
    }
    return false;
}

ParseResult parse_exact(const uint8_t* data, size_t len) {
    // An exactly sized copy, so that ASan sees any read past `len`.
    std::vector<uint8_t> copy(data, data + len);
    return parse(copy.empty() ? reinterpret_cast<const uint8_t*>("") : copy.data(), copy.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    ParseResult r = parse_exact(data, size);
    switch (r.status) {
        case Parse::not_handshake: CHECK(r.consumed == 0); return 0;
        case Parse::need_more:
            CHECK(r.consumed == 0);
            CHECK(size < kMaxMessage);
            CHECK(std::memcmp(data, kMagic, std::min(size, sizeof kMagic)) == 0);
            return 0;
        case Parse::complete: break;
    }
    CHECK(r.consumed >= kHeaderBytes && r.consumed <= size && r.consumed <= kMaxMessage);
    uint32_t body_len;
    std::memcpy(&body_len, data + 12, 4);  // little endian host (x86-64, aarch64)
    CHECK(r.consumed == kHeaderBytes + body_len);
    CHECK(std::memcmp(data, kMagic, sizeof kMagic) == 0);
    CHECK(r.message.version == data[7]);
    CHECK(static_cast<uint8_t>(r.message.type) == data[8]);

    // Prefix stability: a partially arrived message is "need more", never anything else.
    for (size_t k = 0; k < r.consumed; k += (k < 32 ? 1 : 7)) {
        ParseResult p = parse_exact(data, k);
        CHECK(p.status == Parse::need_more);
    }
    CHECK(parse_exact(data, r.consumed - 1).status == Parse::need_more);
    // Trailing bytes are not part of the message.
    ParseResult alone = parse_exact(data, r.consumed);
    CHECK(alone.status == Parse::complete && alone.consumed == r.consumed && same_message(alone.message, r.message));

    // Round trip.
    std::vector<uint8_t> enc = encode(r.message);
    ParseResult back = parse_exact(enc.data(), enc.size());
    if (r.message.version == kVersion) {
        CHECK(back.status == Parse::complete);
        CHECK(back.consumed == enc.size());
        CHECK(same_message(back.message, r.message));
        CHECK(enc.size() == r.consumed);
        std::vector<uint8_t> orig(data, data + r.consumed);
        orig[9] = orig[10] = orig[11] = 0;  // reserved
        CHECK(enc == orig);
    } else {
        // Another version: the body is not interpreted, encode writes this version's
        // layout for the type; it must still be a complete message of the same type/version
        // (unless the type's default body is empty, both are complete).
        CHECK(back.status == Parse::complete);
        CHECK(back.message.type == r.message.type && back.message.version == r.message.version);
    }
    return 0;
}
