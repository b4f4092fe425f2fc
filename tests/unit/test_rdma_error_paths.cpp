// RDMA layers on a verbs mock (tests/unit/verbs_mock.hpp): error paths only.
//   - a failed post inside RdmaTransport::probe returns an error (it used to
//     call error() while holding sq_mu_, which error() takes again: a hang);
//   - every setup step that fails releases what the steps before it created.
#include <fcntl.h>
#include <poll.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>

#include "sys/own_fd.hpp"
#include "rdma/rdma_device.hpp"
#include "rdma/rdma_transport.hpp"
#include "verbs_mock.hpp"

using namespace rdmasock;

namespace {

constexpr uint64_t kRing = 64 * 1024;

std::unique_ptr<RdmaDevice> mock_device() {
    std::string err;
    auto d = RdmaDevice::open(verbs_mock::api(), "", -1, RdmaFaults{}, err);
    INFO(err);
    REQUIRE(d);
    return d;
}

// Runs probe on its own thread: a deadlock fails the test instead of hanging it
// (the stuck thread is left behind, detached, and the transport whose mutex it
// holds is leaked so that no destructor waits on it).
bool probe_within(std::unique_ptr<RdmaTransport>& t, int timeout_ms, std::string& err) {
    auto done = std::make_shared<std::promise<std::pair<bool, std::string>>>();
    auto result = done->get_future();
    std::thread([t = t.get(), timeout_ms, done] {
        std::string e;
        const bool ok = t->probe(timeout_ms, e);
        done->set_value({ok, e});
    }).detach();
    if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        (void)t.release();
        FAIL("RdmaTransport::probe did not return within 10 s (deadlock)");
    }
    auto [ok, e] = result.get();
    err = e;
    return ok;
}

// t connected to peer's parameters (peer itself stays unconnected: nothing answers).
void connected_pair(RdmaDevice& dev, std::unique_ptr<RdmaTransport>& t, std::unique_ptr<RdmaTransport>& peer) {
    std::string err;
    t = RdmaTransport::create(dev, kRing, RdmaFaults{}, err);
    peer = RdmaTransport::create(dev, kRing, RdmaFaults{}, err);
    INFO(err);
    REQUIRE(t);
    REQUIRE(peer);
    REQUIRE(t->connect(peer->local_params(), err));
}

}  // namespace

TEST_CASE("rdma probe: a failed post returns the post's error, no self-deadlock") {
    verbs_mock::reset();
    {
        auto dev = mock_device();
        std::unique_ptr<RdmaTransport> t, peer;
        connected_pair(*dev, t, peer);
        std::string err;
        verbs_mock::state().post_send_rc = EIO;
        CHECK_FALSE(probe_within(t, 1000, err));
        CHECK(err.find("ibv_post_send(RDMA READ) failed") != std::string::npos);
        CHECK(t->broken());
        CHECK(verbs_mock::state().posts == 1);
    }
    CHECK(verbs_mock::state().live == 0);
}

TEST_CASE("rdma probe: an unanswered READ times out with a reason") {
    verbs_mock::reset();
    {
        auto dev = mock_device();
        std::unique_ptr<RdmaTransport> t, peer;
        connected_pair(*dev, t, peer);
        std::string err;
        CHECK_FALSE(probe_within(t, 50, err));
        CHECK(err.find("the peer did not answer an RDMA READ") != std::string::npos);
        CHECK(t->broken());
    }
    CHECK(verbs_mock::state().live == 0);
}

TEST_CASE("rdma setup: a failure at any step releases every verbs object made before it") {
    struct Step {
        const char* fail;
        int reg_mr_ok;      // with "reg_mr": registrations that succeed first
        bool at_connect;    // the failure comes in connect(), not create()
        const char* says;
    };
    const Step steps[] = {
        {"alloc_pd", 0, false, "ibv_alloc_pd failed"},
        {"reg_mr", 0, false, "ibv_reg_mr of the receive ring"},
        {"reg_mr", 1, false, "ibv_reg_mr of the ctrl block"},
        {"reg_mr", 2, false, "ibv_reg_mr of the scratch block"},
        {"create_cq", 0, false, "ibv_create_cq"},
        {"create_comp_channel", 0, false, "ibv_create_comp_channel failed"},
        {"create_qp", 0, false, "ibv_create_qp"},
        {"query_qp", 0, false, "ibv_query_qp"},
        {"reg_mr", 3, true, "ibv_reg_mr of the send mirror"},
        {"modify_qp", 0, true, "ibv_modify_qp(INIT) failed"},
        {"post_recv", 0, true, "ibv_post_recv failed"},
    };
    for (const Step& s : steps) {
        INFO(s.fail << " after " << s.reg_mr_ok);
        verbs_mock::reset();
        {
            auto dev = mock_device();
            std::string err;
            // The peer exists before the fault is armed (connect needs its parameters).
            auto peer = RdmaTransport::create(*dev, kRing, RdmaFaults{}, err);
            REQUIRE(peer);
            verbs_mock::state().fail = s.fail;
            verbs_mock::state().fail_reg_mr_after = s.reg_mr_ok;
            auto t = RdmaTransport::create(*dev, kRing, RdmaFaults{}, err);
            if (s.at_connect) {
                REQUIRE(t);
                CHECK_FALSE(t->connect(peer->local_params(), err));
            } else {
                CHECK_FALSE(t);
            }
            CHECK(err.find(s.says) != std::string::npos);
        }
        CHECK(verbs_mock::state().live == 0);
    }
}

TEST_CASE("rdma device: a failure after the device was opened closes it") {
    for (const char* fail : {"query_device", "alloc_pd"}) {
        INFO(fail);
        verbs_mock::reset();
        verbs_mock::state().fail = fail;
        std::string err;
        CHECK_FALSE(RdmaDevice::open(verbs_mock::api(), "", -1, RdmaFaults{}, err));
        CHECK(err.find(fail) != std::string::npos);
        CHECK(verbs_mock::state().live == 0);
    }
    verbs_mock::reset();
    std::string err;
    CHECK_FALSE(RdmaDevice::open(verbs_mock::api(), "", -1, RdmaFaults{}.add(RdmaFault::open), err));
    CHECK(err.find("[fault injection rdma-open]") != std::string::npos);
    CHECK(verbs_mock::state().live == 0);
}

TEST_CASE("rdma faults: RDMASOCK_FAULT is parsed once into a set") {
    CHECK_FALSE(RdmaFaults::parse("").any());
    CHECK_FALSE(RdmaFaults::parse("client-hello").any());  // another layer's fault
    CHECK(RdmaFaults::parse("rdma-qp-rtr").has(RdmaFault::qp_rtr));
    CHECK_FALSE(RdmaFaults::parse("rdma-qp-rtr").has(RdmaFault::qp_create));
    const auto two = RdmaFaults::parse("rdma-bad-gid,rdma-dontfork");
    CHECK(two.has(RdmaFault::bad_gid));
    CHECK(two.has(RdmaFault::dontfork));
    CHECK_FALSE(RdmaFaults::parse("rdma-qp").any());  // whole names only
}

TEST_CASE("rdma doorbells: one fd over the completion channel and the self-wake, receive WRs posted at connect, arming never says in flight") {
    verbs_mock::reset();
    int fd = -1;
    {
        auto dev = mock_device();
        std::unique_ptr<RdmaTransport> t, peer;
        connected_pair(*dev, t, peer);
        fd = t->wake_fd();
        REQUIRE(fd >= 0);
        CHECK(is_own_fd(fd));  // moved out of the program's way (own_fd.hpp)
        CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
        CHECK(peer->wake_fd() != fd);
        // drain_wake reads the channel without waiting: its fd must not block.
        REQUIRE(t->channel_fd() >= 0);
        CHECK((fcntl(t->channel_fd(), F_GETFL) & O_NONBLOCK) != 0);
        // wake_self (a shutdown from another thread) raises the same fd that the
        // peer's completions do, so that every kind of sleeper wakes; drain_wake lowers it.
        auto readable = [](int w) {
            pollfd p{w, POLLIN, 0};
            return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
        };
        CHECK_FALSE(readable(fd));
        CHECK(t->wake_self());
        CHECK(readable(fd));
        CHECK_FALSE(readable(peer->wake_fd()));  // our own sleepers only
        t->drain_wake();
        CHECK_FALSE(readable(fd));
        // connect() posted every receive WR (ring/16 + 64, capped by the mock's max_qp_wr 256).
        CHECK(verbs_mock::state().recvs == 256);
        CHECK(t->arm_reader(true));
        CHECK(t->arm_writer(true));
        t->arm_reader(false);
        CHECK_FALSE(t->take_peer_reader_waiting());
        CHECK_FALSE(t->take_peer_writer_waiting());
        t->drain_wake();  // no event: returns at once (non-blocking fd)
        CHECK(t->stats().arms == 2);
        CHECK(t->stats().cq_events == 0);
    }
    CHECK(verbs_mock::state().live == 0);
    CHECK_FALSE(is_own_fd(fd));  // unmarked before rdma-core's close
}
