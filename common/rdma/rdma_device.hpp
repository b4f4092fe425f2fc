// A verbs device context for the RDMA transport: device, port 1, GID, protection
// domain. One per process, opened lazily by the first connection that upgrades to
// RDMA in that process (RdmaDevice::process), never used across fork: the opener's
// pid is remembered and every other process gets an error (it must not touch the
// parent's verbs objects; PostgreSQL's postmaster accepts and forks, the backend
// then opens its own device because the postmaster never did).
//
// Every failure is reported as a clear message in `err` (no device, no
// permission, port down, no usable GID...), never an abort.
//
// Fault injection (rdma_faults.hpp): no_device (the device list comes back
// empty) and open (ibv_open_device fails); the transport handles the others.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <memory>
#include <string>

#include "rdma/rdma_faults.hpp"
#include "rdma/rdma_verbs_api.hpp"
#include "rdma/rdma_verbs_objects.hpp"

namespace rdmasock {

// "Invalid argument (errno 22)": verbs calls return errno values.
std::string errno_text(int e);

class RdmaDevice {
public:
    // Opens device `name` (empty: the first device whose port 1 is active), port 1,
    // GID index `gid_index` (-1: automatic, preferring a RoCE v2 IPv4-mapped GID).
    // Loads libibverbs first (rdma_verbs_api.hpp): without it, err says why.
    static std::unique_ptr<RdmaDevice> open(const std::string& name, int gid_index, RdmaFaults faults,
                                            std::string& err);
    // The same through a given verbs table (unit tests pass a mock).
    static std::unique_ptr<RdmaDevice> open(const VerbsApi& api, const std::string& name, int gid_index,
                                            RdmaFaults faults, std::string& err);

    // The process-wide device: opened on the first call in this process (with that
    // call's name and gid_index; later calls get the same device), cached, and
    // refused in any other process (after fork). An open failure is cached too, so
    // a process without RDMA pays for the device scan once. Thread safe.
    static RdmaDevice* process(const std::string& name, int gid_index, RdmaFaults faults, std::string& err);

    // Whether RDMA could run on this host at all, opening nothing: a verbs device
    // in sysfs (what libibverbs lists) and libibverbs loadable. False with a
    // reason otherwise. Looked at once per process, quietly (no log line). The
    // host's own answer: fault rdma-no-device (an empty device list) leaves it
    // alone, so a server there still declines a HELLO (scripts/test-rdma's "peer
    // without RDMA").
    static bool host_may_have_rdma(std::string& why);

    ~RdmaDevice();
    RdmaDevice(const RdmaDevice&) = delete;
    RdmaDevice& operator=(const RdmaDevice&) = delete;

    // False (with a reason) in a process other than the one that opened it.
    bool usable(std::string& err) const;

    const VerbsApi& api() const { return *api_; }
    ibv_context* context() const { return ctx_.get(); }
    ibv_pd* pd() const { return pd_.get(); }  // process-wide; RdmaTransport uses a PD per connection
    uint8_t port() const { return port_; }
    int gid_index() const { return gid_index_; }
    const ibv_gid& gid() const { return gid_; }
    uint16_t lid() const { return lid_; }
    uint32_t active_mtu() const { return active_mtu_; }  // enum ibv_mtu
    bool is_roce() const { return roce_; }               // Ethernet link layer: address by GID
    uint32_t max_msg_sz() const { return max_msg_sz_; }  // largest RDMA WRITE (rxe: 8 MiB)
    const ibv_device_attr& attr() const { return attr_; }
    const std::string& name() const { return name_; }
    pid_t owner_pid() const { return pid_; }
    std::string describe() const;  // "rxe0 port 1 gid[1]=::ffff:10.99.0.1 RoCE v2 mtu 1024"

    // True when the kernel copies pinned (registered) pages into a forked child
    // eagerly ("copy-on-fork", Linux 5.13+; ibv_is_fork_initialized() ==
    // IBV_FORK_UNNEEDED): the parent keeps its registered pages and the child gets a
    // frozen copy. Otherwise registered memory is marked MADV_DONTFORK (absent in
    // the child), or the parent's pages would turn copy-on-write under the NIC.
    bool kernel_copies_on_fork() const;

private:
    explicit RdmaDevice(const VerbsApi& api) : api_(&api) {}

    const VerbsApi* api_;

    VerbsContext ctx_;  // declared first: closed after the PD
    ProtectionDomain pd_;
    uint8_t port_ = 1;
    int gid_index_ = -1;
    ibv_gid gid_{};
    std::string gid_type_;
    uint16_t lid_ = 0;
    uint32_t active_mtu_ = 0;
    uint32_t max_msg_sz_ = 0;
    bool roce_ = true;
    ibv_device_attr attr_{};
    std::string name_;
    pid_t pid_ = 0;
};

}  // namespace rdmasock
