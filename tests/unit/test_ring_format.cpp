#include <catch2/catch.hpp>

#include "ring/ring_format.hpp"

using namespace rdmasock::ring;

TEST_CASE("record sizes are 8-aligned and hold header, payload and footer") {
    for (uint32_t len = 0; len < 100; ++len) {
        CHECK(record_bytes(len) % kAlign == 0);
        CHECK(record_bytes(len) >= len + kHeaderBytes + kFooterBytes);
        CHECK(record_bytes(len) < len + kHeaderBytes + kFooterBytes + kAlign);
        CHECK(footer_offset(len) + kFooterBytes == record_bytes(len));
    }
}

TEST_CASE("every byte of a footer is non-zero and it binds header and position") {
    for (uint64_t pos = 0; pos < 1 << 16; pos += 8) {
        uint32_t f = footer_for(make_header(RecordKind::data, 64), pos);
        for (int b = 0; b < 4; ++b) CHECK(((f >> (8 * b)) & 0xff) != 0);
    }
    CHECK(footer_for(make_header(RecordKind::data, 1), 0) != footer_for(make_header(RecordKind::data, 2), 0));
    CHECK(footer_for(make_header(RecordKind::data, 1), 0) != footer_for(make_header(RecordKind::data, 1), 4096));
}

TEST_CASE("capacity must be a power of two within bounds") {
    CHECK(valid_capacity(1024));
    CHECK(valid_capacity(1 << 20));
    CHECK_FALSE(valid_capacity(1000));
    CHECK_FALSE(valid_capacity(512));
    CHECK_FALSE(valid_capacity(0));
    CHECK(max_payload(1 << 20) == (1 << 18) - 8);
    CHECK(record_bytes(max_payload(1024)) <= 1024 / 4);
}
