// Repro (known bug 1 in docs/robustness.md): handshake::parse of any ACCEPT whose
// name is longer than 8 bytes (every real one: "/rdmasock-PID-...") shifts a
// uint64_t by >= 64 bits in Reader::take(), used to skip the name: undefined
// behaviour (UBSan: "shift exponent 64 is too large for 64-bit type").
//
//   clang++ -std=c++20 -Icommon -fsanitize=undefined -fno-sanitize-recover=undefined \
//       tests/robustness/repro/handshake_shift_ub.cpp common/handshake.cpp -o /tmp/hsu && /tmp/hsu
// Expected: prints "parsed ACCEPT name=/rdmasock-4242-0123456789abcdef", exit 0
// Observed: common/handshake.cpp:33: runtime error: shift exponent 64 is too large ..., exit 1
#include <cstdio>

#include "negotiation/handshake.hpp"

using namespace rdmasock::handshake;

int main() {
    Message m;
    m.type = Type::accept;
    m.transport = kOfferShm;
    m.ring_bytes = 1 << 20;
    m.name = "/rdmasock-4242-0123456789abcdef";
    auto bytes = encode(m);
    auto r = parse(bytes.data(), bytes.size());
    std::printf("parsed %s name=%s\n", to_string(r.message.type), r.message.name.c_str());
    return r.status == Parse::complete ? 0 : 1;
}
