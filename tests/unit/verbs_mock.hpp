// A small in-process stand-in for libibverbs, for the RDMA layers' error paths
// only (a failing post, a verbs call failing halfway through setup). It proves
// nothing about RDMA itself: that runs on real verbs in the Soft-RoCE VM.
//
// Objects are heap allocated and counted; `live` must be 0 once every owner is
// gone. `fail` names the call that fails (once set, every time it is called).
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cerrno>
#include <string>

#include "rdma/rdma_verbs_api.hpp"

namespace verbs_mock {

struct State {
    int live = 0;                // objects created and not yet released
    std::string fail;            // "open_device", "alloc_pd", "reg_mr", "create_cq", "create_qp", "query_qp", ...
    int fail_reg_mr_after = 0;   // with fail == "reg_mr": this many succeed first
    int reg_mr_calls = 0;
    int post_send_rc = 0;        // what ibv_post_send returns
    int posts = 0;
    int recvs = 0;               // receive WRs posted
    ibv_device device{};
    ibv_context context{};
};

inline State& state() {
    static State s;
    return s;
}

inline void reset() {
    State& s = state();
    s.live = 0;
    s.fail.clear();
    s.fail_reg_mr_after = 0;
    s.reg_mr_calls = 0;
    s.post_send_rc = 0;
    s.posts = 0;
    s.recvs = 0;
    s.context = {};
    s.context.device = &s.device;
    s.context.cmd_fd = s.context.async_fd = -1;  // no device file
    s.context.ops.post_send = [](ibv_qp*, ibv_send_wr*, ibv_send_wr** bad) {
        ++state().posts;
        *bad = nullptr;
        return state().post_send_rc;
    };
    s.context.ops.poll_cq = [](ibv_cq*, int, ibv_wc*) { return 0; };  // no completion, ever
    s.context.ops.post_recv = [](ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr** bad) {
        if (state().fail == "post_recv") return *bad = wr, EINVAL;
        ++state().recvs;
        *bad = nullptr;
        return 0;
    };
    s.context.ops.req_notify_cq = [](ibv_cq*, int) { return 0; };
}

inline bool failing(const char* call) {
    if (state().fail != call) return false;
    errno = EINVAL;
    return true;
}

template <class T>
T* make() {
    ++state().live;
    T* o = new T{};
    o->context = &state().context;
    return o;
}

template <class T>
int release(T* o) {
    --state().live;
    delete o;
    return 0;
}

inline const rdmasock::VerbsApi& api() {
    static const rdmasock::VerbsApi a = [] {
        rdmasock::VerbsApi v;
        v.get_device_list = [](int* n) -> ibv_device** {
            static ibv_device* list[] = {&state().device, nullptr};
            *n = 1;
            return list;
        };
        v.free_device_list = [](ibv_device**) {};
        v.get_device_name = [](ibv_device*) { return "mock0"; };
        v.open_device = [](ibv_device*) -> ibv_context* {
            if (failing("open_device")) return nullptr;
            ++state().live;
            return &state().context;
        };
        v.close_device = [](ibv_context*) { return --state().live, 0; };
        v.query_device = [](ibv_context*, ibv_device_attr* a) {
            if (failing("query_device")) return EINVAL;
            *a = {};
            a->max_qp_wr = 256;
            a->max_cqe = 1024;
            return 0;
        };
        v.query_port_symbol = [](ibv_context*, uint8_t, _compat_ibv_port_attr* c) {
            auto* pa = reinterpret_cast<ibv_port_attr*>(c);  // VerbsApi::query_port passes the full struct
            pa->state = IBV_PORT_ACTIVE;
            pa->link_layer = IBV_LINK_LAYER_ETHERNET;
            pa->active_mtu = IBV_MTU_1024;
            pa->gid_tbl_len = 2;
            pa->max_msg_sz = 1u << 20;
            return 0;
        };
        v.query_gid = [](ibv_context*, uint8_t, int index, ibv_gid* g) {
            *g = {};
            if (index == 0) {
                g->raw[10] = g->raw[11] = 0xff;
                inet_pton(AF_INET, "10.0.0.1", g->raw + 12);
            }
            return 0;
        };
        v.alloc_pd = [](ibv_context*) -> ibv_pd* { return failing("alloc_pd") ? nullptr : make<ibv_pd>(); };
        v.dealloc_pd = [](ibv_pd* pd) { return release(pd); };
        v.reg_mr = [](ibv_pd*, void* addr, size_t len, int) -> ibv_mr* {
            if (state().fail == "reg_mr" && state().reg_mr_calls++ >= state().fail_reg_mr_after)
                return errno = ENOMEM, nullptr;
            ibv_mr* mr = make<ibv_mr>();
            mr->addr = addr;
            mr->length = len;
            mr->lkey = mr->rkey = 0x100 + static_cast<uint32_t>(state().live);
            return mr;
        };
        v.dereg_mr = [](ibv_mr* mr) { return release(mr); };
        v.create_cq = [](ibv_context*, int, void*, ibv_comp_channel*, int) -> ibv_cq* {
            return failing("create_cq") ? nullptr : make<ibv_cq>();
        };
        v.destroy_cq = [](ibv_cq* cq) { return release(cq); };
        v.create_comp_channel = [](ibv_context*) -> ibv_comp_channel* {
            if (failing("create_comp_channel")) return nullptr;
            ibv_comp_channel* ch = make<ibv_comp_channel>();
            ch->fd = eventfd(0, EFD_CLOEXEC);  // a real fd: the transport sets O_NONBLOCK on it
            return ch;
        };
        v.destroy_comp_channel = [](ibv_comp_channel* ch) {
            close(ch->fd);
            return release(ch);
        };
        v.get_cq_event = [](ibv_comp_channel*, ibv_cq**, void**) { return errno = EAGAIN, -1; };  // no event, ever
        v.ack_cq_events = [](ibv_cq*, unsigned) {};
        v.create_qp = [](ibv_pd*, ibv_qp_init_attr*) -> ibv_qp* {
            if (failing("create_qp")) return nullptr;
            ibv_qp* qp = make<ibv_qp>();
            qp->qp_num = 0x11;
            return qp;
        };
        v.query_qp = [](ibv_qp*, ibv_qp_attr* a, int, ibv_qp_init_attr*) {
            if (failing("query_qp")) return EINVAL;
            *a = {};
            a->cap.max_send_wr = 64;
            a->cap.max_inline_data = 64;
            return 0;
        };
        v.modify_qp = [](ibv_qp*, ibv_qp_attr*, int) { return failing("modify_qp") ? EINVAL : 0; };
        v.destroy_qp = [](ibv_qp* qp) { return release(qp); };
        v.port_state_str = [](ibv_port_state) { return "mock"; };
        v.wc_status_str = [](ibv_wc_status) { return "mock"; };
        return v;
    }();
    return a;
}

}  // namespace verbs_mock
