#include "rdma/rdma_faults.hpp"

namespace rdmasock {

RdmaFaults RdmaFaults::parse(std::string_view spec) {
    static constexpr struct {
        std::string_view name;
        RdmaFault fault;
    } kNames[] = {
        {"rdma-no-device", RdmaFault::no_device}, {"rdma-open", RdmaFault::open},
        {"rdma-qp-create", RdmaFault::qp_create}, {"rdma-qp-rtr", RdmaFault::qp_rtr},
        {"rdma-bad-gid", RdmaFault::bad_gid},     {"rdma-dontfork", RdmaFault::dontfork},
        {"rdma-qp-error", RdmaFault::qp_error},
    };
    RdmaFaults out;
    while (!spec.empty()) {
        const size_t comma = spec.find(',');
        const std::string_view item = spec.substr(0, comma);
        for (const auto& n : kNames)
            if (item == n.name) out.add(n.fault);
        if (comma == std::string_view::npos) break;
        spec.remove_prefix(comma + 1);
    }
    return out;
}

}  // namespace rdmasock
