// The libibverbs loader's error paths (common/rdma_verbs_api.cpp): a library that
// is absent, and one that loads but is not libibverbs. Neither may abort; both
// must say what is missing. (The whole preload without libibverbs:
// tests/integration/no_libibverbs.sh.)
#include <catch2/catch.hpp>

#include "rdma/rdma_verbs_api.hpp"

using namespace rdmasock;

TEST_CASE("verbs loader: a missing library is an error naming it") {
    VerbsApi api;
    std::string err;
    CHECK_FALSE(load_verbs_api("librdmasock-no-such-verbs.so.1", api, err));
    CHECK(err.find("cannot load librdmasock-no-such-verbs.so.1") != std::string::npos);
    CHECK(err.find("rdma-core") != std::string::npos);
    CHECK(api.open_device == nullptr);
}

TEST_CASE("verbs loader: a library without the verbs symbols is refused, with the first missing one named") {
    VerbsApi api;
    std::string err;
    CHECK_FALSE(load_verbs_api("libm.so.6", api, err));
    CHECK(err.find("libm.so.6 is not a usable libibverbs") != std::string::npos);
    CHECK(err.find("ibv_get_device_list@IBVERBS_1.1") != std::string::npos);
    CHECK(api.get_device_list == nullptr);  // nothing half-filled
}

TEST_CASE("verbs loader: the process-wide table is resolved once, the same answer every time") {
    std::string e1, e2;
    const VerbsApi* a = verbs_api(e1);
    const VerbsApi* b = verbs_api(e2);
    CHECK(a == b);
    CHECK(e1 == e2);
    if (a) {
        CHECK(a->open_device != nullptr);
        CHECK(a->query_port_symbol != nullptr);
    } else {
        CHECK(e1.find("libibverbs.so.1") != std::string::npos);
    }
}
