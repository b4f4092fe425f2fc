// The table of phase moves (common/connection_phase.hpp, docs/protocol.md "Phases").
#include <catch2/catch.hpp>

#include "connection/connection_phase.hpp"

using namespace rdmasock;

namespace {
constexpr Phase kAll[] = {Phase::undecided, Phase::offered, Phase::accepted, Phase::strip_hello,
                          Phase::upgraded,  Phase::plain,   Phase::failed,   Phase::rv_listen,
                          Phase::rv_pending, Phase::rv_offered, Phase::rv_accepted};
}

TEST_CASE("phase table: plain and failed are final", "[phase]") {
    for (Phase to : kAll) {
        CHECK_FALSE(allowed_move(Phase::plain, to));
        CHECK_FALSE(allowed_move(Phase::failed, to));
    }
}

TEST_CASE("phase table: no phase moves to itself", "[phase]") {
    for (Phase p : kAll) CHECK_FALSE(allowed_move(p, p));
}

TEST_CASE("phase table: every phase but the final ones can end on TCP", "[phase]") {
    for (Phase p : kAll) {
        if (p == Phase::plain || p == Phase::failed) continue;
        INFO(to_string(p));
        CHECK(allowed_move(p, Phase::plain));
    }
}

TEST_CASE("phase table: only a negotiated phase reaches upgraded", "[phase]") {
    for (Phase p : kAll) {
        INFO(to_string(p));
        const bool negotiated = p == Phase::offered || p == Phase::accepted || p == Phase::rv_offered || p == Phase::rv_accepted;
        CHECK(allowed_move(p, Phase::upgraded) == negotiated);
    }
}

TEST_CASE("phase table: the upgraded connection only goes back to TCP", "[phase]") {
    for (Phase to : kAll) CHECK(allowed_move(Phase::upgraded, to) == (to == Phase::plain));
}

TEST_CASE("phase table: a same-host rendezvous never enters the in-band phases but through undecided", "[phase]") {
    for (Phase from : {Phase::rv_listen, Phase::rv_pending, Phase::rv_offered, Phase::rv_accepted})
        for (Phase to : {Phase::offered, Phase::accepted, Phase::strip_hello}) CHECK_FALSE(allowed_move(from, to));
    CHECK(allowed_move(Phase::rv_pending, Phase::undecided));
}

TEST_CASE("phase table: where a connection may start", "[phase]") {
    CHECK(allowed_start(Phase::undecided));
    CHECK(allowed_start(Phase::plain));
    CHECK(allowed_start(Phase::rv_listen));
    CHECK(allowed_start(Phase::rv_pending));
    CHECK_FALSE(allowed_start(Phase::upgraded));
    CHECK_FALSE(allowed_start(Phase::rv_accepted));
}
