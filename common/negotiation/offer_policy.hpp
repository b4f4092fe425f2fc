// What a shimmed client offers in its HELLO (0: send no HELLO, stay on TCP).
// A HELLO reaches a peer that does not run the shim as application bytes, so
// one is only sent to a peer known to run it: a listener on this host that
// published its port in the registry, or another host named in RDMASOCK_PEERS.
//
//   RDMASOCK_TRANSPORT  same host, published      RDMASOCK_PEERS match
//   auto                shm                       rdma
//   shm                 shm                       -
//   rdma                rdma                      rdma
//   tcp                 -                         -
#pragma once

#include <cstdint>

#include "base/config.hpp"
#include "negotiation/handshake.hpp"

namespace rdmasock {

inline uint32_t client_offers(TransportChoice choice, bool published_here, bool configured_peer) {
    switch (choice) {
        case TransportChoice::tcp: return 0;
        case TransportChoice::shm: return published_here ? handshake::kOfferShm : 0;
        case TransportChoice::rdma: return published_here || configured_peer ? handshake::kOfferRdma : 0;
        case TransportChoice::automatic:
            if (published_here) return handshake::kOfferShm;
            return configured_peer ? handshake::kOfferRdma : 0;
    }
    return 0;
}

}  // namespace rdmasock
