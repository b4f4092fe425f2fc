#include "rdma/rdma_verbs_api.hpp"

#include <dlfcn.h>

#include <cerrno>
#include <cstring>

#include "base/log.hpp"

namespace rdmasock {

namespace {

// The versions verbs.h links against (objdump -T libibverbs.so.1).
constexpr const char* kV1_0 = "IBVERBS_1.0";  // the comp channel pair has only this (default) version
constexpr const char* kV1_1 = "IBVERBS_1.1";
constexpr const char* kV1_11 = "IBVERBS_1.11";
constexpr const char* kV1_13 = "IBVERBS_1.13";

struct Binder {
    void* handle;
    const char* soname;
    std::string missing;  // required symbols that were not found

    template <class F>
    void need(F& slot, const char* name, const char* version) {
        slot = reinterpret_cast<F>(dlvsym(handle, name, version));
        if (!slot) missing += (missing.empty() ? "" : ", ") + std::string(name) + "@" + version;
    }
    template <class F>
    void want(F& slot, const char* name, const char* version) {
        slot = reinterpret_cast<F>(dlvsym(handle, name, version));
    }
};

}  // namespace

bool load_verbs_api(const char* soname, VerbsApi& out, std::string& err) {
    dlerror();
    void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char* why = dlerror();
        err = std::string("cannot load ") + soname + " (" + (why ? why : "dlopen failed") +
              "): RDMA needs rdma-core's libibverbs (Debian: libibverbs1 ibverbs-providers)";
        return false;
    }
    VerbsApi a;
    Binder b{h, soname, {}};
    b.need(a.get_device_list, "ibv_get_device_list", kV1_1);
    b.need(a.free_device_list, "ibv_free_device_list", kV1_1);
    b.need(a.get_device_name, "ibv_get_device_name", kV1_1);
    b.need(a.open_device, "ibv_open_device", kV1_1);
    b.need(a.close_device, "ibv_close_device", kV1_1);
    b.need(a.query_device, "ibv_query_device", kV1_1);
    b.need(a.query_port_symbol, "ibv_query_port", kV1_1);
    b.need(a.query_gid, "ibv_query_gid", kV1_1);
    b.need(a.alloc_pd, "ibv_alloc_pd", kV1_1);
    b.need(a.dealloc_pd, "ibv_dealloc_pd", kV1_1);
    b.need(a.reg_mr, "ibv_reg_mr", kV1_1);
    b.need(a.dereg_mr, "ibv_dereg_mr", kV1_1);
    b.need(a.create_cq, "ibv_create_cq", kV1_1);
    b.need(a.destroy_cq, "ibv_destroy_cq", kV1_1);
    b.need(a.create_comp_channel, "ibv_create_comp_channel", kV1_0);
    b.need(a.destroy_comp_channel, "ibv_destroy_comp_channel", kV1_0);
    b.need(a.get_cq_event, "ibv_get_cq_event", kV1_1);
    b.need(a.ack_cq_events, "ibv_ack_cq_events", kV1_1);
    b.need(a.create_qp, "ibv_create_qp", kV1_1);
    b.need(a.query_qp, "ibv_query_qp", kV1_1);
    b.need(a.modify_qp, "ibv_modify_qp", kV1_1);
    b.need(a.destroy_qp, "ibv_destroy_qp", kV1_1);
    b.need(a.port_state_str, "ibv_port_state_str", kV1_1);
    b.need(a.wc_status_str, "ibv_wc_status_str", kV1_1);
    b.want(a.query_gid_ex_symbol, "_ibv_query_gid_ex", kV1_11);
    b.want(a.query_gid_table_symbol, "_ibv_query_gid_table", kV1_11);
    b.want(a.is_fork_initialized, "ibv_is_fork_initialized", kV1_13);
    if (!b.missing.empty()) {
        err = std::string(soname) + " is not a usable libibverbs (missing " + b.missing + ")";
        dlclose(h);
        return false;
    }
    out = a;
    return true;
}

const VerbsApi* verbs_api(std::string& err) {
    struct Loaded {
        VerbsApi api;
        bool ok = false;
        std::string err;
    };
    // A function-local static: initialized once, other threads wait for it.
    static const Loaded loaded = [] {
        Loaded l;
        l.ok = load_verbs_api(kVerbsSoname, l.api, l.err);
        if (!l.ok) RS_LOG(warn, "rdma: %s; RDMA is off in this process (TCP and shm work)", l.err.c_str());
        return l;
    }();
    if (!loaded.ok) {
        err = loaded.err;
        return nullptr;
    }
    return &loaded.api;
}

int VerbsApi::query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) const {
    // Extended contexts answer through their ops with our struct size; older
    // providers through the exported symbol, which fills the compat prefix.
    if (verbs_context* v = verbs_get_ctx_op(context, query_port))
        return v->query_port(context, port, attr, sizeof *attr);
    std::memset(attr, 0, sizeof *attr);
    return query_port_symbol(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

int VerbsApi::query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry) const {
    if (!query_gid_ex_symbol) return EOPNOTSUPP;
    return query_gid_ex_symbol(context, port, index, entry, 0, sizeof *entry);
}

ssize_t VerbsApi::query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries) const {
    if (!query_gid_table_symbol) return -EOPNOTSUPP;
    return query_gid_table_symbol(context, entries, max_entries, 0, sizeof *entries);
}

}  // namespace rdmasock
