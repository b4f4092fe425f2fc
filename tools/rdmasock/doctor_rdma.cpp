// RDMA prerequisites: libibverbs, the devices and their ports, what the
// transport itself would open (common/rdma_device.cpp's choice, so the GID index
// printed is the one connections use), and the memlock limit for registration.
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <cerrno>
#include <string>

#include "shm/memory_budget.hpp"
#include "doctor_checks.hpp"
#include "rdma/rdma_device.hpp"
#include "rdma/rdma_verbs_api.hpp"

namespace rdmasock::cli {

namespace {

std::string kib(uint64_t b) { return std::to_string(b >> 10) + " KiB"; }

// One line per device: every port's state and link layer.
Check device_line(const VerbsApi& api, ibv_device* d) {
    const std::string name = api.get_device_name(d);
    errno = 0;
    ibv_context* ctx = api.open_device(d);
    if (!ctx) {
        int e = errno ? errno : ENODEV;
        std::string fix = (e == EACCES || e == EPERM) ? ": give the user access to /dev/infiniband/uverbs* (group rdma)"
                                                      : "";
        return {Level::warn, "rdma: device " + name, "cannot open: " + errno_text(e) + fix};
    }
    ibv_device_attr attr{};
    std::string ports;
    bool active = false;
    if (api.query_device(ctx, &attr) == 0) {
        for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
            ibv_port_attr pa{};
            if (api.query_port(ctx, p, &pa) != 0) continue;
            active |= pa.state == IBV_PORT_ACTIVE;
            ports += std::string(ports.empty() ? "" : ", ") + "port " + std::to_string(p) + " " +
                     api.port_state_str(pa.state) + (pa.link_layer == IBV_LINK_LAYER_ETHERNET ? " (RoCE)" : " (IB)");
        }
    }
    api.close_device(ctx);
    if (ports.empty()) ports = "no port could be queried";
    if (active) return {Level::ok, "rdma: device " + name, ports};
    return {Level::warn, "rdma: device " + name,
            ports + "; no active port: check the link (ip link, cable, subnet manager for IB)"};
}

}  // namespace

void check_rdma(const Config& cfg, Checks& out) {
    // librdmasock.so loads libibverbs.so.1 at the first RDMA use: without it the
    // preload still works (shm, TCP) and RDMA stays off.
    std::string load_err;
    const VerbsApi* api = verbs_api(load_err);
    if (api) {
        out.push_back({Level::ok, "libibverbs", std::string(kVerbsSoname) + " loads"});
    } else {
        out.push_back({Level::warn, "libibverbs", load_err + "; without it connections use shm or TCP, never RDMA"});
        return;
    }

    const uint64_t need = 2 * cfg.ring_bytes;  // one connection's two rings, registered (pinned)
    // The shim keeps its pins to half of the limit (memory_budget::take_pinned).
    const uint64_t limit = memory_budget::memlock_limit();
    if (limit == UINT64_MAX) {
        out.push_back({Level::ok, "memlock", "unlimited or CAP_IPC_LOCK (RDMA pins " + kib(need) + " per connection)"});
    } else if (limit / 2 >= need) {
        out.push_back({Level::ok, "memlock", kib(limit) + ": the shim pins at most half, room for " +
                                                 std::to_string(limit / 2 / need) + " RDMA connection(s) of " + kib(need)});
    } else {
        out.push_back({Level::warn, "memlock",
                       kib(limit) + ": half of it (what the shim pins at most) is below the " + kib(need) +
                           " one RDMA connection pins (2 x RDMASOCK_RING_SIZE); RDMA rings would be smaller, or TCP: "
                           "raise it (ulimit -l, memlock in /etc/security/limits.conf, LimitMEMLOCK= in systemd)"});
    }

    int count = 0;
    errno = 0;
    ibv_device** list = api->get_device_list(&count);
    int e = errno;
    if (!list || count == 0) {
        if (list) api->free_device_list(list);
        std::string why = !list && e == ENOSYS ? "the kernel has no RDMA (verbs) support"
                                               : "ibv_get_device_list found none";
        out.push_back({Level::warn, "rdma: devices",
                       "no RDMA device (" + why + "); connections between hosts stay on TCP, same-host ones "
                       "use shm. For RDMA: a NIC and its driver, or Soft-RoCE (modprobe rdma_rxe; rdma link add "
                       "rxe0 type rxe netdev IFACE)"});
        return;
    }
    for (int i = 0; i < count; ++i) out.push_back(device_line(*api, list[i]));
    api->free_device_list(list);

    // Exactly what a connection would open (RDMASOCK_DEVICE, RDMASOCK_GID_INDEX respected).
    std::string err;
    auto dev = RdmaDevice::open(cfg.rdma_device, cfg.gid_index, RdmaFaults{}, err);
    if (dev) {
        out.push_back({Level::ok, "rdma: transport",
                       "would use " + dev->describe() + " (GID index " + std::to_string(dev->gid_index()) + ")"});
    } else {
        out.push_back({Level::warn, "rdma: transport",
                       err + "; RDMA connections fall back to TCP (check RDMASOCK_DEVICE, RDMASOCK_GID_INDEX, "
                             "an IP address on the device's netdev)"});
    }
}

}  // namespace rdmasock::cli
