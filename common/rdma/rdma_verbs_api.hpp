// libibverbs, loaded on demand. librdmasock.so does not link libibverbs: a host
// without rdma-core must still preload the shim and get shm and TCP. The first
// RDMA use in a process dlopen()s libibverbs.so.1 and resolves the table below
// once; every verbs call of the RDMA transport goes through it.
//
// Only exported functions are in the table. The static inline wrappers of
// verbs.h that dispatch through ctx->ops (ibv_post_send, ibv_post_recv,
// ibv_poll_cq, ibv_req_notify_cq) need no symbol and are called directly. The wrappers that
// do reference symbols are rebuilt here: ibv_query_port (a macro around a
// verbs_context op with the IBVERBS_1.1 symbol as fallback), ibv_query_gid_ex and
// ibv_query_gid_table (inline calls of _ibv_query_gid_ex/_table). ibv_reg_mr is a
// macro too; with access flags outside IBV_ACCESS_OPTIONAL_RANGE (all of ours)
// it is the plain ibv_reg_mr symbol. Symbols are looked up with their version
// (dlvsym): the IBVERBS_1.0 compat versions have another ABI.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <string>

namespace rdmasock {

struct VerbsApi {
    ibv_device** (*get_device_list)(int* num_devices) = nullptr;
    void (*free_device_list)(ibv_device** list) = nullptr;
    const char* (*get_device_name)(ibv_device* device) = nullptr;
    ibv_context* (*open_device)(ibv_device* device) = nullptr;
    int (*close_device)(ibv_context* context) = nullptr;
    int (*query_device)(ibv_context* context, ibv_device_attr* attr) = nullptr;
    int (*query_port_symbol)(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr) = nullptr;
    int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = nullptr;
    ibv_pd* (*alloc_pd)(ibv_context* context) = nullptr;
    int (*dealloc_pd)(ibv_pd* pd) = nullptr;
    ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
    int (*dereg_mr)(ibv_mr* mr) = nullptr;
    ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                         int comp_vector) = nullptr;
    int (*destroy_cq)(ibv_cq* cq) = nullptr;
    // Completion channels: the fd a sleeper waits on (docs/waiting.md, RDMA doorbells).
    ibv_comp_channel* (*create_comp_channel)(ibv_context* context) = nullptr;
    int (*destroy_comp_channel)(ibv_comp_channel* channel) = nullptr;
    int (*get_cq_event)(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) = nullptr;
    void (*ack_cq_events)(ibv_cq* cq, unsigned int nevents) = nullptr;
    ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
    int (*query_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init_attr) = nullptr;
    int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
    int (*destroy_qp)(ibv_qp* qp) = nullptr;
    const char* (*port_state_str)(ibv_port_state state) = nullptr;
    const char* (*wc_status_str)(ibv_wc_status status) = nullptr;
    // Optional: absent from rdma-core before v32 (GID table) and v35 (fork status).
    // Callers fall back to ibv_query_gid + sysfs, and to MADV_DONTFORK.
    int (*query_gid_ex_symbol)(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                               uint32_t flags, size_t entry_size) = nullptr;
    ssize_t (*query_gid_table_symbol)(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                                      uint32_t flags, size_t entry_size) = nullptr;
    ibv_fork_status (*is_fork_initialized)() = nullptr;

    // What verbs.h's inline wrappers do, through this table. Without the symbol,
    // query_gid_ex returns EOPNOTSUPP and query_gid_table -EOPNOTSUPP (their
    // error conventions).
    int query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) const;
    int query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry) const;
    ssize_t query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries) const;
};

// The process-wide table: libibverbs.so.1 is loaded by the first caller (thread
// safe, once; the library is never unloaded). nullptr and the reason in err when
// it cannot be loaded or lacks a required symbol; the first failure is logged
// once (warn) so the reason reaches the user even with RDMA asked for per
// connection. Later calls return the same result without retrying.
const VerbsApi* verbs_api(std::string& err);

// One load of `soname` into `out`, uncached (the loader's error path is unit
// tested with a missing library and with a library that is not libibverbs).
bool load_verbs_api(const char* soname, VerbsApi& out, std::string& err);

inline constexpr const char* kVerbsSoname = "libibverbs.so.1";

}  // namespace rdmasock
