#include "rdma/rdma_params.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

#include "ring/ring_format.hpp"

namespace rdmasock {

namespace {

template <class T>
void put(std::vector<uint8_t>& b, size_t off, T v) {
    for (size_t i = 0; i < sizeof(T); ++i) b[off + i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}

template <class T>
T get(const uint8_t* p, size_t off) {
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[off + i]) << (8 * i);
    return static_cast<T>(v);
}

// enum ibv_mtu: IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5 (not included here so that
// this file builds without verbs headers).
constexpr uint32_t kMtuMin = 1, kMtuMax = 5;

}  // namespace

std::vector<uint8_t> encode(const RdmaParams& p) {
    std::vector<uint8_t> b(kRdmaParamsBytes, 0);
    put<uint32_t>(b, 0, kRdmaParamsMagic);
    std::memcpy(b.data() + 4, p.gid, 16);
    put<uint32_t>(b, 20, p.qpn);
    put<uint32_t>(b, 24, p.psn);
    put<uint32_t>(b, 28, p.mtu);
    put<uint64_t>(b, 32, p.ring_addr);
    put<uint32_t>(b, 40, p.ring_rkey);
    put<uint64_t>(b, 44, p.ring_bytes);
    put<uint64_t>(b, 52, p.ctrl_addr);
    put<uint32_t>(b, 60, p.ctrl_rkey);
    put<uint16_t>(b, 64, p.lid);
    put<uint16_t>(b, 66, 0);
    return b;
}

bool decode(const uint8_t* data, size_t len, RdmaParams& out, std::string& err) {
    if (data == nullptr || len != kRdmaParamsBytes) {
        err = "RDMA parameters: expected " + std::to_string(kRdmaParamsBytes) + " bytes, got " + std::to_string(len);
        return false;
    }
    if (get<uint32_t>(data, 0) != kRdmaParamsMagic) {
        err = "RDMA parameters: bad magic/version";
        return false;
    }
    RdmaParams p;
    std::memcpy(p.gid, data + 4, 16);
    p.qpn = get<uint32_t>(data, 20);
    p.psn = get<uint32_t>(data, 24);
    p.mtu = get<uint32_t>(data, 28);
    p.ring_addr = get<uint64_t>(data, 32);
    p.ring_rkey = get<uint32_t>(data, 40);
    p.ring_bytes = get<uint64_t>(data, 44);
    p.ctrl_addr = get<uint64_t>(data, 52);
    p.ctrl_rkey = get<uint32_t>(data, 60);
    p.lid = get<uint16_t>(data, 64);
    if (get<uint16_t>(data, 66) != 0) {
        err = "RDMA parameters: reserved field is not zero";
        return false;
    }
    if (p.qpn == 0 || p.qpn > 0xffffff) {
        err = "RDMA parameters: queue pair number " + std::to_string(p.qpn) + " out of range";
        return false;
    }
    if (p.psn > 0xffffff) {
        err = "RDMA parameters: packet sequence number " + std::to_string(p.psn) + " over 24 bits";
        return false;
    }
    if (p.mtu < kMtuMin || p.mtu > kMtuMax) {
        err = "RDMA parameters: mtu enum " + std::to_string(p.mtu) + " not in 1..5 (256..4096 bytes)";
        return false;
    }
    if (!ring::valid_capacity(p.ring_bytes)) {
        err = "RDMA parameters: ring size " + std::to_string(p.ring_bytes) + " is not a power of two in [" +
              std::to_string(ring::kMinCapacity) + ", " + std::to_string(ring::kMaxCapacity) + "]";
        return false;
    }
    if (p.ring_addr > UINT64_MAX - p.ring_bytes) {
        err = "RDMA parameters: ring address range overflows";
        return false;
    }
    out = p;
    return true;
}

std::string to_string(const RdmaParams& p) {
    char gid[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, p.gid, gid, sizeof gid);
    char buf[320];
    snprintf(buf, sizeof buf,
             "gid=%s lid=%u qpn=%u psn=%u mtu=%u ring=0x%llx/%llu rkey=0x%x ctrl=0x%llx rkey=0x%x", gid, p.lid,
             p.qpn, p.psn, 128u << p.mtu, static_cast<unsigned long long>(p.ring_addr),
             static_cast<unsigned long long>(p.ring_bytes), p.ring_rkey, static_cast<unsigned long long>(p.ctrl_addr),
             p.ctrl_rkey);
    return buf;
}

}  // namespace rdmasock
