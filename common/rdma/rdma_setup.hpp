// The RDMA half of the negotiation (common/connection.cpp drives it):
//
//   client  offer()     open the device, create the transport  -> HELLO carries its params
//   server  accept()    create a transport, connect its QP to RTS -> ACCEPT carries its params
//   client  complete()  connect its QP, probe the path with one RDMA READ -> READY
//   server  (READY)     only now writes: the client's QP was ready before READY was sent
//
// Every failure returns nullptr/false with a reason in `err`; the connection then
// stays on TCP (DECLINE or ABORT), with no application byte sent yet.
//
// Fault injection (RDMASOCK_FAULT, tests only) beyond the device/QP points of
// rdma_device.hpp and rdma_transport.hpp:
//   "rdma-bad-gid"  the client aims its QP at a GID nobody holds (another host
//                   number in the server's subnet): the probe gets no answer and
//                   the client ABORTs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/config.hpp"
#include "ring/transport.hpp"

namespace rdmasock::rdma_setup {

std::unique_ptr<Transport> offer(const Config& config, std::vector<uint8_t>& params, std::string& err);

std::unique_ptr<Transport> accept(const Config& config, const std::vector<uint8_t>& client_params,
                                  std::vector<uint8_t>& params, std::string& err);

// `offered` is what offer() returned.
bool complete(const Config& config, Transport& offered, const std::vector<uint8_t>& server_params, std::string& err);

}  // namespace rdmasock::rdma_setup
