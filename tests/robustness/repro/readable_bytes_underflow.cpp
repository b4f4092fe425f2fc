// Repro (known bug 2 in docs/robustness.md): RingReader::readable_bytes() wraps a
// 32-bit subtraction when the peer rewrites the record the reader is in the middle
// of with a shorter (valid) one. FIONREAD then reports ~4 GiB (or a negative int).
//
//   clang++ -std=c++20 -Icommon tests/robustness/repro/readable_bytes_underflow.cpp \
//       common/ring_reader.cpp common/ring_writer.cpp -o /tmp/rbu && /tmp/rbu
// Expected: readable_bytes() == 0 (read() delivers nothing: it skips the rewritten record)
// Observed: readable_bytes() == 4294967256
#include <atomic>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ring/ring_reader.hpp"
#include "ring/ring_writer.hpp"

using namespace rdmasock::ring;

struct Local : RecordSink, ConsumedPublisher {
    std::vector<uint8_t> ring = std::vector<uint8_t>(1024);
    std::atomic<uint64_t> consumed{0};
    uint8_t* stage(uint64_t off, uint64_t) override { return ring.data() + off; }
    bool post(uint64_t, uint64_t) override { return true; }
    bool publish_consumed(uint64_t c) override { return consumed.store(c), true; }
};

int main() {
    Local l;
    RingWriter w(1024, l, &l.consumed);
    RingReader r(l.ring.data(), 1024, l);
    uint8_t buf[100] = {};
    w.write(buf, 100);  // one record of 100 bytes at position 0
    r.read(buf, 60);    // the reader is now 60 bytes into it
    // The (hostile) peer rewrites position 0 with a valid 20-byte record.
    uint32_t h = make_header(RecordKind::data, 20), f = footer_for(h, 0);
    std::memcpy(&l.ring[0], &h, 4);
    std::memcpy(&l.ring[footer_offset(20)], &f, 4);
    size_t n = r.readable_bytes();
    IoResult got = r.read(buf, sizeof buf);
    std::printf("readable_bytes() = %zu, then read() = %zu bytes (%s)\n", n, got.bytes, to_string(got.status));
    return n == got.bytes ? 0 : 1;
}
