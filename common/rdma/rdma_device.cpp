#include "rdma/rdma_device.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

#include "sys/own_fd.hpp"

namespace rdmasock {

std::string errno_text(int e) { return std::string(strerror(e)) + " (errno " + std::to_string(e) + ")"; }

namespace {

bool gid_is_zero(const ibv_gid& g) {
    for (uint8_t b : g.raw)
        if (b) return false;
    return true;
}

bool gid_is_ipv4_mapped(const ibv_gid& g) {
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(g.raw, prefix, sizeof prefix) == 0;
}

std::string gid_text(const ibv_gid& g) {
    char buf[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
    return buf;
}

const char* gid_type_text(int t) {
    switch (t) {
        case IBV_GID_TYPE_IB: return "IB";
        case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
        case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    }
    return "unknown";
}

// Fallback for kernels without the GID table ioctl: the type is in sysfs.
int sysfs_gid_type(const std::string& dev, int port, int index) {
    std::ifstream f("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/gid_attrs/types/" +
                    std::to_string(index));
    std::string s;
    if (!std::getline(f, s)) return -1;
    if (s.find("v2") != std::string::npos) return IBV_GID_TYPE_ROCE_V2;
    if (s.find("RoCE") != std::string::npos) return IBV_GID_TYPE_ROCE_V1;
    return IBV_GID_TYPE_IB;
}

struct GidChoice {
    int index = -1;
    int type = -1;
    ibv_gid gid{};
};

// Rank: RoCE v2 IPv4-mapped (routable, what peers given an IPv4 address use) >
// RoCE v2 > IB (InfiniBand link layer) > RoCE v1.
int gid_rank(int type, const ibv_gid& g) {
    if (gid_is_zero(g)) return -1;
    if (type == IBV_GID_TYPE_ROCE_V2) return gid_is_ipv4_mapped(g) ? 4 : 3;
    if (type == IBV_GID_TYPE_IB) return 2;
    if (type == IBV_GID_TYPE_ROCE_V1) return 1;
    return 0;
}

bool choose_gid(const VerbsApi& api, ibv_context* ctx, const std::string& dev, uint8_t port, int table_len, int wanted, GidChoice& out,
                std::string& err) {
    if (wanted >= 0) {
        if (wanted >= table_len) {
            err = "GID index " + std::to_string(wanted) + " out of range (port " + std::to_string(port) + " of " + dev +
                  " has " + std::to_string(table_len) + " entries)";
            return false;
        }
        ibv_gid_entry e{};
        if (api.query_gid_ex(ctx, port, static_cast<uint32_t>(wanted), &e) == 0) {
            out = {wanted, static_cast<int>(e.gid_type), e.gid};
        } else {
            ibv_gid g{};
            if (api.query_gid(ctx, port, wanted, &g) != 0) {
                err = "ibv_query_gid(" + dev + ", index " + std::to_string(wanted) + ") failed: " + errno_text(errno);
                return false;
            }
            out = {wanted, sysfs_gid_type(dev, port, wanted), g};
        }
        if (gid_is_zero(out.gid)) {
            err = "GID index " + std::to_string(wanted) + " of " + dev + " is empty (no address on its netdev?)";
            return false;
        }
        return true;
    }
    int best_rank = -1;
    std::vector<ibv_gid_entry> table(static_cast<size_t>(table_len > 0 ? table_len : 1));
    ssize_t n = api.query_gid_table(ctx, table.data(), table.size());
    if (n >= 0) {
        for (ssize_t i = 0; i < n; ++i) {
            const auto& e = table[static_cast<size_t>(i)];
            if (e.port_num != port) continue;
            int r = gid_rank(static_cast<int>(e.gid_type), e.gid);
            if (r > best_rank) best_rank = r, out = {static_cast<int>(e.gid_index), static_cast<int>(e.gid_type), e.gid};
        }
    } else {
        for (int i = 0; i < table_len; ++i) {
            ibv_gid g{};
            if (api.query_gid(ctx, port, i, &g) != 0) continue;
            int type = sysfs_gid_type(dev, port, i);
            int r = gid_rank(type, g);
            if (r > best_rank) best_rank = r, out = {i, type, g};
        }
    }
    if (best_rank < 0) {
        err = "no usable GID on port " + std::to_string(port) + " of " + dev +
              " (RoCE needs an IP address on the device's netdev)";
        return false;
    }
    return true;
}

// Opens one device and checks port 1; on failure err says why and nothing leaks.
VerbsContext try_device(const VerbsApi& api, ibv_device* d, RdmaFaults faults, ibv_port_attr& pa, std::string& err) {
    const std::string name = api.get_device_name(d);
    if (faults.has(RdmaFault::open)) {
        err = "ibv_open_device(" + name + ") failed: " + errno_text(ENODEV) + " [fault injection rdma-open]";
        return {};
    }
    errno = 0;
    VerbsContext ctx(api, api.open_device(d));
    if (!ctx) {
        int e = errno ? errno : ENODEV;
        err = "ibv_open_device(" + name + ") failed: " + errno_text(e);
        if (e == EACCES || e == EPERM) err += ": no permission on /dev/infiniband/uverbs* (add the user to group rdma?)";
        return {};
    }
    if (api.query_port(ctx.get(), 1, &pa) != 0) {
        err = "ibv_query_port(" + name + ", 1) failed: " + errno_text(errno);
    } else if (pa.state != IBV_PORT_ACTIVE) {
        err = "port 1 of " + name + " is not active (state " + api.port_state_str(pa.state) + ")";
    } else {
        return ctx;
    }
    return {};
}

}  // namespace

RdmaDevice::~RdmaDevice() {
    // In a forked child these objects belong to the parent: leave them alone.
    if (pid_ != getpid()) {
        pd_.abandon();
        ctx_.abandon();
        return;
    }
    if (ctx_) {  // rdma-core's ibv_close_device closes them through close()
        unmark_own_fd(ctx_->cmd_fd);
        unmark_own_fd(ctx_->async_fd);
    }
}

bool RdmaDevice::usable(std::string& err) const {
    if (pid_ == getpid()) return true;
    err = "RDMA device " + name_ + " was opened by process " + std::to_string(pid_) + " and this is process " +
          std::to_string(getpid()) + ": verbs resources never cross a fork";
    return false;
}

std::string RdmaDevice::describe() const {
    return name_ + " port " + std::to_string(port_) + " gid[" + std::to_string(gid_index_) + "]=" + gid_text(gid_) +
           " " + gid_type_ + " mtu " + std::to_string(128u << active_mtu_) + (roce_ ? "" : " lid " + std::to_string(lid_));
}

std::unique_ptr<RdmaDevice> RdmaDevice::open(const std::string& name, int gid_index, RdmaFaults faults,
                                             std::string& err) {
    const VerbsApi* api = verbs_api(err);
    if (!api) return nullptr;
    return open(*api, name, gid_index, faults, err);
}

std::unique_ptr<RdmaDevice> RdmaDevice::open(const VerbsApi& api, const std::string& name, int gid_index,
                                             RdmaFaults faults, std::string& err) {
    int count = 0;
    errno = 0;
    DeviceList list(api, faults.has(RdmaFault::no_device) ? nullptr : api.get_device_list(&count));
    if (!list || count == 0) {
        int e = errno;
        if (faults.has(RdmaFault::no_device))
            err = "no RDMA device found [fault injection rdma-no-device]";
        else if (!list && e == ENOSYS)
            err = "no RDMA device: the kernel has no RDMA (verbs) support";
        else if (!list && e)
            err = "ibv_get_device_list failed: " + errno_text(e);
        else
            err = "no RDMA device found (ibv_get_device_list is empty; is a driver such as rdma_rxe loaded?)";
        return nullptr;
    }
    std::unique_ptr<RdmaDevice> dev(new RdmaDevice(api));
    VerbsContext ctx;
    ibv_port_attr pa{};
    std::string reasons, names;
    bool found = false;
    for (int i = 0; i < count && !ctx; ++i) {
        std::string n = api.get_device_name(list.get()[i]);
        names += (names.empty() ? "" : ", ") + n;
        if (!name.empty() && n != name) continue;
        found = true;
        std::string why;
        ctx = try_device(api, list.get()[i], faults, pa, why);
        if (!ctx) reasons += (reasons.empty() ? "" : "; ") + why;
        else dev->name_ = n;
    }
    list.reset();
    if (!ctx) {
        if (!name.empty() && !found)
            err = "RDMA device '" + name + "' not found (devices: " + names + ")";
        else if (!name.empty())
            err = reasons;
        else
            err = "no RDMA device with an active port 1 (" + reasons + ")";
        return nullptr;
    }
    dev->ctx_ = std::move(ctx);
    // Out of the program's way, as every fd the shim keeps (own_fd.hpp): a program
    // that closes what it did not open must not close the device under the
    // connections. rdma-core reads both numbers from these fields.
    dev->ctx_->cmd_fd = adopt_own_fd(dev->ctx_->cmd_fd);
    dev->ctx_->async_fd = adopt_own_fd(dev->ctx_->async_fd);
    dev->pid_ = getpid();
    dev->port_ = 1;
    dev->lid_ = pa.lid;
    dev->active_mtu_ = pa.active_mtu;
    dev->max_msg_sz_ = pa.max_msg_sz ? pa.max_msg_sz : (1u << 31);
    dev->roce_ = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    if (api.query_device(dev->context(), &dev->attr_) != 0) {
        err = "ibv_query_device(" + dev->name_ + ") failed: " + errno_text(errno);
        return nullptr;
    }
    GidChoice g;
    if (!choose_gid(api, dev->context(), dev->name_, dev->port_, pa.gid_tbl_len, gid_index, g, err)) return nullptr;
    dev->gid_index_ = g.index;
    dev->gid_ = g.gid;
    dev->gid_type_ = gid_type_text(g.type);
    dev->pd_ = ProtectionDomain(api, api.alloc_pd(dev->context()));
    if (!dev->pd_) {
        err = "ibv_alloc_pd(" + dev->name_ + ") failed: " + errno_text(errno);
        return nullptr;
    }
    return dev;
}

bool RdmaDevice::kernel_copies_on_fork() const {
    // Without the query (rdma-core < 35) assume not: MADV_DONTFORK is always safe.
    return api_->is_fork_initialized && api_->is_fork_initialized() == IBV_FORK_UNNEEDED;
}

RdmaDevice* RdmaDevice::process(const std::string& name, int gid_index, RdmaFaults faults, std::string& err) {
    static std::mutex mu;
    static RdmaDevice* instance = nullptr;  // never freed: lives until exit, like the process's verbs context
    static pid_t failed_pid = 0;
    static std::string failed_error;
    // Injected device faults must fail every time, not just on the first open.
    if (faults.has(RdmaFault::no_device) || faults.has(RdmaFault::open)) {
        open(name, gid_index, faults, err);
        return nullptr;
    }
    std::lock_guard<std::mutex> lk(mu);
    const pid_t me = getpid();
    if (instance) {
        if (instance->usable(err)) return instance;
        // A forked child (a pre-fork server's worker): the parent's context is
        // not ours to use or to close; it stays abandoned, and the child opens
        // its own. Transports made on the parent's device stay refused (usable).
        err.clear();
        instance = nullptr;
    }
    if (failed_pid == me) {
        err = failed_error;
        return nullptr;
    }
    auto dev = open(name, gid_index, faults, err);
    if (!dev) {
        failed_pid = me;
        failed_error = err;
        return nullptr;
    }
    instance = dev.release();
    return instance;
}

bool RdmaDevice::host_may_have_rdma(std::string& why) {
    struct Probe {
        bool ok = false;
        std::string why;
    };
    static const Probe probe = [] {
        Probe p;
        bool any = false;
        if (DIR* d = opendir("/sys/class/infiniband_verbs")) {
            while (dirent* e = readdir(d))
                if (std::strncmp(e->d_name, "uverbs", 6) == 0) any = true;
            closedir(d);
        }
        if (!any) {
            p.why = "no RDMA device on this host";
            return p;
        }
        // Kept loaded: the first RDMA use loads the same library (verbs_api).
        if (!dlopen(kVerbsSoname, RTLD_LAZY | RTLD_LOCAL)) {
            p.why = std::string("no RDMA: cannot load ") + kVerbsSoname;
            return p;
        }
        p.ok = true;
        return p;
    }();
    if (!probe.ok) why = probe.why;
    return probe.ok;
}

}  // namespace rdmasock
