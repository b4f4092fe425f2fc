#include "sys/raw_syscall.hpp"
#include "negotiation/handshake.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace rdmasock::handshake {

namespace {

struct Writer {
    std::vector<uint8_t> out;
    void u8(uint8_t v) { out.push_back(v); }
    void u16(uint16_t v) { for (int i = 0; i < 2; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i))); }
    void u32(uint32_t v) { for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i))); }
    void u64(uint64_t v) { for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i))); }
    void bytes(const void* p, size_t n) { out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); }
};

// Bounds-checked little-endian reader over a message body.
struct Reader {
    const uint8_t* p;
    size_t left;
    bool ok = true;
    uint64_t take(size_t n) {
        if (n > left) {
            ok = false;
            return 0;
        }
        uint64_t v = 0;
        for (size_t i = 0; i < n && i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);  // n > 8: skip
        p += n;
        left -= n;
        return v;
    }
};

// The RDMA parameter blob has a fixed size; its content is validated by the
// receiver (rdmasock::decode in rdma_params.cpp), not here.
void take_blob(Reader& b, std::vector<uint8_t>& out) {
    if (b.left < kRdmaBlobBytes) {
        b.ok = false;
        return;
    }
    out.assign(b.p, b.p + kRdmaBlobBytes);
    b.take(kRdmaBlobBytes);
}

}  // namespace

std::vector<uint8_t> encode(const Message& m) {
    Writer body;
    switch (m.type) {
        case Type::hello:
            body.u32(m.offers);
            body.u32(m.uid);
            body.u64(m.ring_bytes);
            body.bytes(m.boot_id.data(), m.boot_id.size());
            if (m.offers & kOfferRdma) body.bytes(m.rdma.data(), m.rdma.size());
            break;
        case Type::accept:
            body.u32(m.transport);
            body.u64(m.ring_bytes);
            body.u16(static_cast<uint16_t>(m.name.size()));
            body.bytes(m.name.data(), m.name.size());
            if (m.transport == kOfferRdma) body.bytes(m.rdma.data(), m.rdma.size());
            break;
        case Type::decline:
        case Type::abort: body.u32(static_cast<uint32_t>(m.reason)); break;
        case Type::ready: break;
    }
    Writer w;
    w.bytes(kMagic, sizeof kMagic);
    w.u8(m.version);
    w.u8(static_cast<uint8_t>(m.type));
    w.u8(0), w.u8(0), w.u8(0);
    w.u32(static_cast<uint32_t>(body.out.size()));
    w.bytes(body.out.data(), body.out.size());
    return w.out;
}

ParseResult parse(const uint8_t* data, size_t len) {
    ParseResult r;
    size_t magic_len = std::min(len, sizeof kMagic);
    if (std::memcmp(data, kMagic, magic_len) != 0) return r;  // not ours
    if (len < kHeaderBytes) {
        r.status = Parse::need_more;
        return r;
    }
    Reader h{data + sizeof kMagic, kHeaderBytes - sizeof kMagic};
    uint8_t version = static_cast<uint8_t>(h.take(1));
    uint8_t type = static_cast<uint8_t>(h.take(1));
    h.take(3);
    uint32_t body_len = static_cast<uint32_t>(h.take(4));
    if (body_len > kMaxBody) {
        r.why = "body length " + std::to_string(body_len) + " exceeds " + std::to_string(kMaxBody);
        return r;
    }
    if (len < kHeaderBytes + body_len) {
        r.status = Parse::need_more;
        return r;
    }
    Message& m = r.message;
    m.version = version;
    if (type < 1 || type > 5) {
        r.why = "unknown message type " + std::to_string(type);
        return r;
    }
    m.type = static_cast<Type>(type);
    Reader b{data + kHeaderBytes, body_len};
    if (version == kVersion) {
        switch (m.type) {
            case Type::hello:
                m.offers = static_cast<uint32_t>(b.take(4));
                m.uid = static_cast<uint32_t>(b.take(4));
                m.ring_bytes = b.take(8);
                for (auto& byte : m.boot_id) byte = static_cast<uint8_t>(b.take(1));
                if (b.ok && (m.offers & kOfferRdma)) take_blob(b, m.rdma);
                break;
            case Type::accept: {
                m.transport = static_cast<uint32_t>(b.take(4));
                m.ring_bytes = b.take(8);
                size_t n = static_cast<size_t>(b.take(2));
                if (b.ok && n <= b.left) m.name.assign(reinterpret_cast<const char*>(b.p), n), b.take(n);
                else b.ok = false;
                if (b.ok && m.transport == kOfferRdma) take_blob(b, m.rdma);
                break;
            }
            case Type::decline:
            case Type::abort: m.reason = static_cast<Reason>(b.take(4)); break;
            case Type::ready: break;
        }
        if (!b.ok || b.left != 0) {
            r.why = std::string(to_string(m.type)) + " body has the wrong size";
            return r;
        }
    }
    // Another version's message is still complete: the caller answers it with a
    // DECLINE, whose layout every version shares.
    r.status = Parse::complete;
    r.consumed = kHeaderBytes + body_len;
    return r;
}

const char* to_string(Type t) {
    switch (t) {
        case Type::hello: return "HELLO";
        case Type::accept: return "ACCEPT";
        case Type::decline: return "DECLINE";
        case Type::ready: return "READY";
        case Type::abort: return "ABORT";
    }
    return "?";
}

const char* to_string(Reason r) {
    switch (r) {
        case Reason::none: return "none";
        case Reason::disabled: return "disabled by configuration";
        case Reason::other_host: return "peer on another host";
        case Reason::other_user: return "peer runs as another user";
        case Reason::no_transport: return "no common transport";
        case Reason::setup_failed: return "transport setup failed";
        case Reason::bad_version: return "unsupported protocol version";
    }
    return "unknown";
}

namespace {
// Raw syscalls: this runs inside interposed calls (with shim locks held), so it
// must not re-enter the shim's own read()/close().
std::array<uint8_t, 16> read_boot_id() {
    std::array<uint8_t, 16> id{};
    int fd = static_cast<int>(raw_syscall(SYS_openat, AT_FDCWD, "/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC));
    if (fd < 0) return id;
    char text[64] = {};
    ssize_t n = raw_syscall(SYS_read, fd, text, sizeof text - 1);
    raw_syscall(SYS_close, fd);
    size_t j = 0;
    for (ssize_t i = 0; i < n && j < 32; ++i) {
        char c = text[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) continue;
        id[j / 2] = static_cast<uint8_t>(id[j / 2] << 4 | v);
        ++j;
    }
    return id;
}
}  // namespace

std::array<uint8_t, 16> local_boot_id() {
    static const std::array<uint8_t, 16> id = read_boot_id();
    return id;
}

}  // namespace rdmasock::handshake
