#include "rdma/rdma_setup.hpp"

#include <algorithm>

#include "negotiation/handshake.hpp"
#include "base/log.hpp"
#include "shm/memory_budget.hpp"
#include "rdma/rdma_device.hpp"
#include "rdma/rdma_params.hpp"
#include "rdma/rdma_transport.hpp"
#include "ring/ring_format.hpp"

namespace rdmasock::rdma_setup {

static_assert(handshake::kRdmaBlobBytes == kRdmaParamsBytes, "HELLO/ACCEPT carry exactly one RdmaParams blob");

namespace {

RdmaDevice* device(const Config& config, RdmaFaults faults, std::string& err) {
    RdmaDevice* dev = RdmaDevice::process(config.rdma_device, config.gid_index, faults, err);
    if (dev && !dev->usable(err)) return nullptr;
    return dev;
}

// `at_most`: the server's ring is no larger than the client's, whose send
// mirror must hold it (both ends' pins then stay what the client sized).
std::unique_ptr<RdmaTransport> create(const Config& config, std::string& err, uint64_t at_most = UINT64_MAX) {
    const RdmaFaults faults = RdmaFaults::parse(config.fault);  // once per connection setup
    RdmaDevice* dev = device(config, faults, err);
    if (!dev) return nullptr;
    // Our receive ring and (sized like it, we expect) the send mirror of the
    // peer's: smaller, or TCP, rather than memory the program needs.
    const uint64_t ring = memory_budget::capacity_for_new_rings(
        std::min(config.ring_bytes, at_most), [](uint64_t c) -> uint64_t { return 2 * c; }, config.ring_memory, err);
    if (ring == 0) return nullptr;
    // Registration pins both rings' worth and two blocks (RLIMIT_MEMLOCK): smaller
    // while that does not fit. create() takes the pins in one step; a connection
    // set up meanwhile may have taken them first: smaller again.
    uint64_t pinned_ring = ring;
    std::unique_ptr<RdmaTransport> t;
    for (;; pinned_ring /= 2) {
        const bool smallest = pinned_ring <= memory_budget::kMinRing;
        if (!smallest && !memory_budget::memlock_allows(RdmaTransport::pins_for(pinned_ring))) continue;
        t = RdmaTransport::create(*dev, pinned_ring, faults, err);
        if (t || err != memory_budget::kMemlockShort || smallest) break;
    }
    if (!t) return t;
    err.clear();  // a try that lost a race to another connection
    if (pinned_ring != ring) RS_LOG(info, "rdma: rings of %llu KiB, not %llu: RLIMIT_MEMLOCK",
                                    static_cast<unsigned long long>(pinned_ring >> 10), static_cast<unsigned long long>(ring >> 10));
    // The send-queue discipline's knobs, measured in docs/rdma-transport.md.
    if (!config.rdma_inline) t->limit_inline(0);
    t->set_signal_every(config.rdma_signal_every);
    RS_LOG(debug, "rdma: %s, local %s", dev->describe().c_str(), to_string(t->local_params()).c_str());
    return t;
}

bool decode_peer(const std::vector<uint8_t>& blob, RdmaParams& out, std::string& err) {
    if (!decode(blob.data(), blob.size(), out, err)) {
        err = "bad RDMA parameters from the peer: " + err;
        return false;
    }
    return true;
}

// The probe must outlast the QP's own retry budget on a lossy path, but a dead
// or unreachable peer must not hold the application's first call for long.
// The send mirror is as large as the peer's ring, which the peer chose (up to 1 GiB).
bool mirror_fits(const Config& config, const RdmaParams& remote, std::string& err) {
    if (memory_budget::capacity_for_new_rings(remote.ring_bytes, [](uint64_t c) { return c; }, config.ring_memory, err) ==
        remote.ring_bytes)
        return true;
    if (err.empty()) err = "not enough memory for rings";
    err = "the peer's ring of " + std::to_string(remote.ring_bytes >> 10) + " KiB needs a send mirror as large: " + err;
    return false;
}

int probe_timeout_ms(const Config& config) { return static_cast<int>(std::min<uint32_t>(config.handshake_timeout_ms, 3000)); }

}  // namespace

std::unique_ptr<Transport> offer(const Config& config, std::vector<uint8_t>& params, std::string& err) {
    auto t = create(config, err);
    if (!t) return nullptr;
    params = encode(t->local_params());
    return t;
}

std::unique_ptr<Transport> accept(const Config& config, const std::vector<uint8_t>& client_params,
                                  std::vector<uint8_t>& params, std::string& err) {
    RdmaParams remote;
    if (!decode_peer(client_params, remote, err)) return nullptr;
    auto t = create(config, err, ring::valid_capacity(remote.ring_bytes) ? remote.ring_bytes : UINT64_MAX);
    if (!t || !mirror_fits(config, remote, err) || !t->connect(remote, err)) return nullptr;
    params = encode(t->local_params());
    return t;
}

bool complete(const Config& config, Transport& offered, const std::vector<uint8_t>& server_params, std::string& err) {
    auto& t = static_cast<RdmaTransport&>(offered);  // offer() made it
    RdmaParams remote;
    if (!decode_peer(server_params, remote, err)) return false;
    if (RdmaFaults::parse(config.fault).has(RdmaFault::bad_gid)) {
        // Another host number in the peer's own subnet that nobody holds: the
        // packets stay on the test network and are dropped there.
        remote.gid[15] = remote.gid[15] == 254 ? 253 : 254;
    }
    if (!mirror_fits(config, remote, err) || !t.connect(remote, err)) return false;
    if (!t.probe(probe_timeout_ms(config), err)) return false;
    return true;
}

}  // namespace rdmasock::rdma_setup
