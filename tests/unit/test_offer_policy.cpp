// Which transports a client offers: a HELLO only to peers known to run the shim.
#include <catch2/catch.hpp>

#include "negotiation/offer_policy.hpp"

using namespace rdmasock;
using handshake::kOfferRdma;
using handshake::kOfferShm;

TEST_CASE("the offer follows RDMASOCK_TRANSPORT, the registry and RDMASOCK_PEERS") {
    using T = TransportChoice;
    // (choice, published on this host, configured peer) -> offers
    CHECK(client_offers(T::automatic, true, false) == kOfferShm);
    CHECK(client_offers(T::automatic, false, true) == kOfferRdma);
    CHECK(client_offers(T::automatic, false, false) == 0);
    CHECK(client_offers(T::shm, true, false) == kOfferShm);
    CHECK(client_offers(T::shm, false, true) == 0);
    CHECK(client_offers(T::rdma, true, false) == kOfferRdma);
    CHECK(client_offers(T::rdma, false, true) == kOfferRdma);
    CHECK(client_offers(T::rdma, false, false) == 0);
    for (bool here : {false, true})
        for (bool peer : {false, true}) CHECK(client_offers(T::tcp, here, peer) == 0);
}
