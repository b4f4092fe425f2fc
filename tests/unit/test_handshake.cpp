// The negotiation wire format: round trips, prefixes, and hostile input.
#include <catch2/catch.hpp>

#include "negotiation/handshake.hpp"

using namespace rdmasock::handshake;

namespace {
Message hello() {
    Message m;
    m.type = Type::hello;
    m.offers = kOfferShm;
    m.uid = 1000;
    m.ring_bytes = 1 << 20;
    m.boot_id = local_boot_id();
    return m;
}
}  // namespace

TEST_CASE("every message type round-trips") {
    Message acc;
    acc.type = Type::accept;
    acc.transport = kOfferShm;
    acc.ring_bytes = 1 << 16;
    acc.name = "/rdmasock-1-abc";
    Message dec;
    dec.type = Type::decline;
    dec.reason = Reason::other_user;
    Message ready;
    ready.type = Type::ready;
    for (const Message& m : {hello(), acc, dec, ready}) {
        auto bytes = encode(m);
        auto r = parse(bytes.data(), bytes.size());
        REQUIRE(r.status == Parse::complete);
        CHECK(r.consumed == bytes.size());
        CHECK(r.message.type == m.type);
        CHECK(r.message.offers == m.offers);
        CHECK(r.message.ring_bytes == m.ring_bytes);
        CHECK(r.message.name == m.name);
        CHECK(r.message.reason == m.reason);
        CHECK(r.message.boot_id == m.boot_id);
    }
}

TEST_CASE("every proper prefix of a message asks for more bytes") {
    auto bytes = encode(hello());
    for (size_t n = 1; n < bytes.size(); ++n) CHECK(parse(bytes.data(), n).status == Parse::need_more);
}

TEST_CASE("trailing application bytes are not consumed") {
    auto bytes = encode(hello());
    size_t len = bytes.size();
    bytes.insert(bytes.end(), {'G', 'E', 'T'});
    auto r = parse(bytes.data(), bytes.size());
    REQUIRE(r.status == Parse::complete);
    CHECK(r.consumed == len);
}

TEST_CASE("ordinary application data is not a handshake") {
    const char* samples[] = {"GET / HTTP/1.1\r\n", "\0\0\0\x08\x04\xd2\x16\x2f", "*1\r\n$4\r\nPING\r\n", "\xF7RDMAS!x"};
    for (const char* s : samples) CHECK(parse(reinterpret_cast<const uint8_t*>(s), 8).status == Parse::not_handshake);
}

TEST_CASE("hostile headers and bodies are refused, never over-read") {
    auto bytes = encode(hello());
    SECTION("huge body length") {
        bytes[12] = 0xff, bytes[13] = 0xff, bytes[14] = 0xff, bytes[15] = 0x7f;
        auto r = parse(bytes.data(), bytes.size());
        CHECK(r.status == Parse::not_handshake);
        CHECK_THAT(r.why, Catch::Contains("exceeds"));
    }
    SECTION("unknown type") {
        bytes[8] = 99;
        CHECK(parse(bytes.data(), bytes.size()).status == Parse::not_handshake);
    }
    SECTION("body shorter than the type needs") {
        auto short_body = encode(Message{.type = Type::ready});
        short_body[8] = static_cast<uint8_t>(Type::hello);
        auto r = parse(short_body.data(), short_body.size());
        CHECK(r.status == Parse::not_handshake);
        CHECK_THAT(r.why, Catch::Contains("wrong size"));
    }
    SECTION("accept whose name runs past the body") {
        Message acc;
        acc.type = Type::accept;
        acc.name = "/x";
        auto b = encode(acc);
        b[16 + 12] = 200;  // name length field
        CHECK(parse(b.data(), b.size()).status == Parse::not_handshake);
    }
}

TEST_CASE("another version's message is complete so it can be declined") {
    auto bytes = encode(hello());
    bytes[7] = 9;  // version
    auto r = parse(bytes.data(), bytes.size());
    REQUIRE(r.status == Parse::complete);
    CHECK(r.message.version == 9);
}

TEST_CASE("RDMA parameters ride in HELLO and ACCEPT, with an exact size") {
    std::vector<uint8_t> blob(kRdmaBlobBytes);
    for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<uint8_t>(i * 7 + 1);
    Message h = hello();
    h.offers = kOfferShm | kOfferRdma;
    h.rdma = blob;
    Message acc;
    acc.type = Type::accept;
    acc.transport = kOfferRdma;
    acc.ring_bytes = 1 << 16;
    acc.rdma = blob;
    for (const Message& m : {h, acc}) {
        auto bytes = encode(m);
        auto r = parse(bytes.data(), bytes.size());
        REQUIRE(r.status == Parse::complete);
        CHECK(r.consumed == bytes.size());
        CHECK(r.message.rdma == blob);
        for (size_t n = 1; n < bytes.size(); ++n) REQUIRE(parse(bytes.data(), n).status == Parse::need_more);
    }
    SECTION("a HELLO that offers rdma without the blob is refused") {
        Message bad = hello();
        bad.offers = kOfferRdma;  // encode() copies whatever rdma holds: nothing
        auto bytes = encode(bad);
        auto r = parse(bytes.data(), bytes.size());
        CHECK(r.status == Parse::not_handshake);
        CHECK_THAT(r.why, Catch::Contains("wrong size"));
    }
    SECTION("a shm ACCEPT carrying extra bytes is refused") {
        Message bad = acc;
        bad.transport = kOfferShm;
        auto bytes = encode(bad);  // no blob for shm: well formed
        REQUIRE(parse(bytes.data(), bytes.size()).status == Parse::complete);
        bytes[12] += 3;  // body length says 3 more bytes
        bytes.insert(bytes.end(), {1, 2, 3});
        CHECK(parse(bytes.data(), bytes.size()).status == Parse::not_handshake);
    }
}
