// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/)
// with the real encoder and the real ring writer. Run by `tests/fuzz/run.sh
// --make-corpus`; the output is committed, so this only needs to run again when
// the formats change.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "negotiation/handshake.hpp"
#include "ring/ring_reader.hpp"
#include "ring/ring_writer.hpp"

using namespace rdmasock;
using Bytes = std::vector<uint8_t>;

namespace {

std::string out_dir;

void save(const std::string& target, const std::string& name, const Bytes& b) {
    std::string path = out_dir + "/" + target + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
        std::perror(path.c_str());
        std::exit(1);
    }
}

void u8(Bytes& b, uint8_t v) { b.push_back(v); }
void u16(Bytes& b, uint16_t v) { b.push_back(v & 0xff), b.push_back(v >> 8); }
void append(Bytes& b, const Bytes& x) { b.insert(b.end(), x.begin(), x.end()); }

void handshake_seeds() {
    using namespace handshake;
    Message hello;
    hello.type = Type::hello;
    hello.offers = kOfferShm;
    hello.uid = 1000;
    hello.ring_bytes = 1 << 20;
    for (int i = 0; i < 16; ++i) hello.boot_id[i] = static_cast<uint8_t>(0x11 * i);
    save("fuzz_handshake", "hello", encode(hello));
    Message hello_both = hello;
    hello_both.offers = kOfferShm | kOfferRdma;
    hello_both.ring_bytes = ~0ull;
    save("fuzz_handshake", "hello_huge_ring", encode(hello_both));
    Message v2 = hello;
    v2.version = 2;
    save("fuzz_handshake", "hello_v2", encode(v2));
    Message accept;
    accept.type = Type::accept;
    accept.transport = kOfferShm;
    accept.ring_bytes = 1 << 20;
    accept.name = "/rdmasock-4242-0123456789abcdef";
    save("fuzz_handshake", "accept", encode(accept));
    Message decline;
    decline.type = Type::decline;
    decline.reason = Reason::other_user;
    save("fuzz_handshake", "decline", encode(decline));
    Message ready;
    ready.type = Type::ready;
    save("fuzz_handshake", "ready", encode(ready));
    Message abort_m;
    abort_m.type = Type::abort;
    abort_m.reason = Reason::setup_failed;
    save("fuzz_handshake", "abort", encode(abort_m));
    Bytes then_data = encode(hello);
    append(then_data, encode(ready));
    const char* http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    then_data.insert(then_data.end(), http, http + std::strlen(http));
    save("fuzz_handshake", "hello_ready_data", then_data);
    Bytes truncated = encode(hello);
    truncated.resize(20);
    save("fuzz_handshake", "hello_truncated", truncated);
    save("fuzz_handshake", "http", Bytes(http, http + std::strlen(http)));
}

// A ring produced by the real writer: records, a wrap marker, end of stream.
struct ImageSink : ring::RecordSink, ring::ConsumedPublisher {
    Bytes ring;
    std::atomic<uint64_t> consumed{0};
    explicit ImageSink(uint64_t cap) : ring(cap) {}
    uint8_t* stage(uint64_t off, uint64_t) override { return ring.data() + off; }
    bool post(uint64_t, uint64_t) override { return true; }
    bool publish_consumed(uint64_t c) override { return consumed.store(c), true; }
};

Bytes ring_image(uint64_t cap, const std::vector<size_t>& writes, size_t read_first, bool fin) {
    ImageSink s(cap);
    ring::RingWriter w(cap, s, &s.consumed);
    ring::RingReader r(s.ring.data(), cap, s);
    size_t k = 0;
    for (size_t n : writes) {
        Bytes data(n);
        for (auto& b : data) b = static_cast<uint8_t>(k++ * 7 + 1);
        w.write(data.data(), n);
    }
    Bytes sink(read_first);
    if (read_first) r.read(sink.data(), read_first);  // leaves zeroed space (and maybe a wrap later)
    if (fin) w.write_fin();
    return s.ring;
}

void ring_seeds() {
    // Reader mode, capacity 1024, no warm-up: load an image, then read/peek/poll/readable.
    auto reader_input = [](uint8_t cap_shift, const Bytes& image, bool with_ops) {
        Bytes in;
        u8(in, cap_shift);  // reader mode
        u16(in, 0), u16(in, 0);  // no warm-up
        u8(in, 14);
        append(in, image);
        if (with_ops) {
            u8(in, 10);                      // readable_bytes
            u8(in, 9);                       // poll
            u8(in, 7), u16(in, 100), u8(in, 2);  // peek 100 split 3
            u8(in, 4), u16(in, 300), u8(in, 1);  // read 300
            u8(in, 8), u16(in, 50);          // skip 50
            u8(in, 5), u16(in, 4096), u8(in, 0);  // read all
            u8(in, 9);
        }
        return in;
    };
    save("fuzz_ring_reader", "image_records", reader_input(0, ring_image(1024, {100, 7, 250, 1}, 0, false), true));
    save("fuzz_ring_reader", "image_fin", reader_input(0, ring_image(1024, {33, 200}, 0, true), true));
    save("fuzz_ring_reader", "image_max_records",
         reader_input(0, ring_image(1024, {4000}, 0, false), true));
    // Warm-up to a later lap, then forge records and read.
    {
        Bytes in;
        u8(in, 1);  // capacity 2048
        u16(in, 7000), u16(in, 300);
        for (int i = 0; i < 40; ++i) u8(in, i & 3);
        u8(in, 1), u16(in, 0), u8(in, 10), u8(in, 40), u8(in, 0), u16(in, 40);  // forge data len 40, right footer
        for (int i = 0; i < 40; ++i) u8(in, 'a' + i % 26);
        u8(in, 10);
        u8(in, 4), u16(in, 100), u8(in, 3);
        u8(in, 11), u16(in, 500);  // honest write
        u8(in, 9), u8(in, 4), u16(in, 1000), u8(in, 0);
        save("fuzz_ring_reader", "warm_forge", in);
    }
    {
        Bytes in;
        u8(in, 0);
        u16(in, 3000), u16(in, 999);
        for (int i = 0; i < 20; ++i) u8(in, 3);  // leave the reader mid-record
        u8(in, 10), u8(in, 7), u16(in, 10), u8(in, 0), u8(in, 9);
        u8(in, 1), u16(in, 0), u8(in, 10), u8(in, 2), u8(in, 0), u16(in, 0);  // shrink the current record
        u8(in, 10), u8(in, 9), u8(in, 4), u16(in, 64), u8(in, 0);
        save("fuzz_ring_reader", "mid_record_rewrite", in);
    }
    // Writer mode: honest traffic, then a lying counter.
    {
        Bytes in;
        u8(in, 4);
        for (int i = 0; i < 6; ++i) u8(in, 1), u16(in, 700), u8(in, 6), u16(in, 500);
        u8(in, 7);
        u8(in, 0), u8(in, 0);  // counter := written
        u8(in, 1), u16(in, 1500), u8(in, 5);
        u8(in, 0), u8(in, 3);  // unaligned
        u8(in, 1), u16(in, 1500), u8(in, 4);
        save("fuzz_ring_reader", "writer_counter", in);
    }
}

// fuzz_connection: op sequences (see the target): 0 raw bytes, 1 canned message, 2/3 app recv,
// 4 app send, 5 EOF, 6 ready_events.
void connection_seeds() {
    auto recv_op = [](Bytes& b) { u8(b, 2), u8(b, 0), u16(b, 2000); };
    Bytes a;  // HELLO, READY: upgraded
    u8(a, 1), u8(a, 0), u8(a, 2), recv_op(a), u8(a, 1), u8(a, 2), u8(a, 0), recv_op(a), u8(a, 4), u8(a, 10), u8(a, 6);
    save("fuzz_connection", "hello_ready", a);
    Bytes b;  // HELLO, ABORT + data: plain, data delivered
    u8(b, 1), u8(b, 0), u8(b, 0), recv_op(b), u8(b, 1), u8(b, 3), u8(b, 0), u8(b, 0), u8(b, 20);
    for (int i = 0; i < 20; ++i) u8(b, static_cast<uint8_t>(65 + i));
    recv_op(b), u8(b, 5), recv_op(b);
    save("fuzz_connection", "hello_abort_data", b);
    Bytes c;  // the app writes first, then a HELLO and data arrive: stripped
    u8(c, 4), u8(c, 5), u8(c, 1), u8(c, 0), u8(c, 0), u8(c, 0), u8(c, 8);
    for (int i = 0; i < 8; ++i) u8(c, 120);
    recv_op(c), recv_op(c);
    save("fuzz_connection", "app_first_strip", c);
    Bytes d;  // HELLO cut short, more later, garbage instead of READY
    u8(d, 1), u8(d, 10), u8(d, 0), u8(d, 30), recv_op(d), u8(d, 6), u8(d, 1), u8(d, 0), u8(d, 0), recv_op(d);
    u8(d, 0), u8(d, 10);
    for (int i = 0; i < 10; ++i) u8(d, 71);
    recv_op(d);
    save("fuzz_connection", "partial_then_garbage", d);
    Bytes e;  // a plain client whose data merely starts like the magic
    u8(e, 0), u8(e, 12), u8(e, 0xF7), u8(e, 0x52), u8(e, 0x44);
    for (int i = 0; i < 10; ++i) u8(e, 122);
    recv_op(e), u8(e, 4), u8(e, 3), recv_op(e), u8(e, 5), recv_op(e);
    save("fuzz_connection", "magic_prefix_data", e);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR (holding one directory per target)\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    handshake_seeds();
    ring_seeds();
    connection_seeds();
    return 0;
}
