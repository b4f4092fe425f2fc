// RDMASOCK_* parsing: good values apply, bad ones are named and replaced by defaults.
#include <catch2/catch.hpp>

#include <map>

#include "base/config.hpp"

using namespace rdmasock;

namespace {
Config parse(std::map<std::string, std::string> env, std::vector<std::string>& errors) {
    return parse_config(
        [&](const char* n) -> const char* {
            auto it = env.find(n);
            return it == env.end() ? nullptr : it->second.c_str();
        },
        errors);
}

struct BadVar {
    const char* var;
    const char* value;
};

// Each bad assignment alone: exactly one message naming the variable, and
// `kept_defaults` holds for the resulting configuration.
template <size_t N, class Check>
void expect_each_rejected(const BadVar (&cases)[N], Check kept_defaults) {
    for (auto& k : cases) {
        std::vector<std::string> errs;
        Config bad = parse({{k.var, k.value}}, errs);
        INFO(k.var << "=" << k.value);
        REQUIRE(errs.size() == 1);
        CHECK_THAT(errs[0], Catch::Contains(k.var));
        kept_defaults(bad);
    }
}
}  // namespace

TEST_CASE("defaults with an empty environment") {
    std::vector<std::string> errors;
    Config c = parse({}, errors);
    CHECK(errors.empty());
    CHECK(c.transport == TransportChoice::automatic);
    CHECK(c.ring_bytes == (1u << 20));
    CHECK_FALSE(c.stats);
}

TEST_CASE("valid values are applied") {
    std::vector<std::string> errors;
    Config c = parse({{"RDMASOCK_TRANSPORT", "shm"}, {"RDMASOCK_RING_SIZE", "256K"}, {"RDMASOCK_SPIN_US", "5"},
                      {"RDMASOCK_SPIN_MAX_US", "0"}, {"RDMASOCK_STATS", "yes"}, {"RDMASOCK_LOG", "debug"}},
                     errors);
    CHECK(errors.empty());
    CHECK(c.transport == TransportChoice::shm);
    CHECK(c.ring_bytes == 256 * 1024);
    CHECK(c.spin_us == 5);
    CHECK(c.spin_max_us == 0);
    CHECK(c.stats);
    CHECK(c.log_level == LogLevel::debug);
    CHECK(c.ring_memory == Config::kRingMemoryAuto);
    CHECK(parse({{"RDMASOCK_RING_MEMORY", "64M"}}, errors).ring_memory == 64u << 20);
    CHECK(parse({{"RDMASOCK_RING_MEMORY", "0"}}, errors).ring_memory == 0);
    CHECK(parse({{"RDMASOCK_RING_MEMORY", "AUTO"}}, errors).ring_memory == Config::kRingMemoryAuto);
    CHECK(parse({}, errors).shm_after_us == Config::kShmAfterAuto);  // the host's default (Connection::shm_after_us)
    CHECK(parse({{"RDMASOCK_SHM_AFTER_US", "0"}}, errors).shm_after_us == 0);
    CHECK(parse({{"RDMASOCK_SHM_AFTER_US", "5000"}}, errors).shm_after_us == 5000);
    CHECK(parse({{"RDMASOCK_SHM_AFTER_US", "60000000"}}, errors).shm_after_us == 60000000);
    CHECK(errors.empty());
}

TEST_CASE("each bad value is reported by name and falls back") {
    struct Case {
        const char* var;
        const char* value;
    } cases[] = {{"RDMASOCK_TRANSPORT", "carrier-pigeon"}, {"RDMASOCK_RING_SIZE", "1000"},
                 {"RDMASOCK_RING_SIZE", "-4096"},         {"RDMASOCK_RING_SIZE", "99999999999999999999"},
                 {"RDMASOCK_SPIN_US", "-5"},              {"RDMASOCK_SPIN_US", "lots"},
                 {"RDMASOCK_SPIN_MAX_US", "2000000"},     {"RDMASOCK_SPIN_MAX_US", "x"},
                 {"RDMASOCK_LOG", "loud"},                {"RDMASOCK_STATS", "maybe"},
                 {"RDMASOCK_HANDSHAKE_TIMEOUT_MS", "0"},  {"RDMASOCK_RING_MEMORY", "lots"},
                 {"RDMASOCK_RING_MEMORY", "-1M"},         {"RDMASOCK_RING_MEMORY", "18446744073709551615"},
                 {"RDMASOCK_SHM_AFTER_US", "60000001"},   {"RDMASOCK_SHM_AFTER_US", "soon"}};
    for (auto& k : cases) {
        std::vector<std::string> errors;
        Config c = parse({{k.var, k.value}}, errors);
        REQUIRE(errors.size() == 1);
        CHECK_THAT(errors[0], Catch::Contains(k.var) && Catch::Contains(k.value));
        CHECK(c.ring_bytes == (1u << 20));
        CHECK(c.ring_memory == Config::kRingMemoryAuto);
        CHECK(c.shm_after_us == Config::kShmAfterAuto);
    }
    std::vector<std::string> errors;
    CHECK(parse({{"RDMASOCK_TRANSPORT", "bogus"}}, errors).transport == TransportChoice::tcp);
}

TEST_CASE("RDMA device, GID index and peer rules") {
    std::vector<std::string> errors;
    Config c = parse({{"RDMASOCK_DEVICE", "rxe0"}, {"RDMASOCK_GID_INDEX", "3"}, {"RDMASOCK_PEERS", "10.99.1.0/24, fd00::7"}},
                     errors);
    CHECK(errors.empty());
    CHECK(c.rdma_device == "rxe0");
    CHECK(c.gid_index == 3);
    CHECK(c.peers.size() == 2);
    CHECK(parse({}, errors).gid_index == -1);
    const BadVar cases[] = {{"RDMASOCK_DEVICE", ""},          {"RDMASOCK_DEVICE", "../../etc/passwd"},
                            {"RDMASOCK_GID_INDEX", "256"},    {"RDMASOCK_GID_INDEX", "-1"},
                            {"RDMASOCK_GID_INDEX", "1K"},     {"RDMASOCK_PEERS", "10.0.0.0/33"},
                            {"RDMASOCK_PEERS", "not-an-ip"},  {"RDMASOCK_PEERS", "10.0.0.1,,10.0.0.2"},
                            {"RDMASOCK_PEERS", "10.0.0.0/"}};
    expect_each_rejected(cases, [](const Config& bad) {
        CHECK(bad.rdma_device.empty());
        CHECK(bad.gid_index == -1);
        CHECK(bad.peers.empty());
    });
}

TEST_CASE("RDMA send-queue discipline knobs") {
    std::vector<std::string> errors;
    Config d = parse({}, errors);
    CHECK(d.rdma_signal_every == 64);
    CHECK(d.rdma_inline);
    Config c = parse({{"RDMASOCK_RDMA_SIGNAL_EVERY", "1"}, {"RDMASOCK_RDMA_INLINE", "0"}}, errors);
    CHECK(errors.empty());
    CHECK(c.rdma_signal_every == 1);
    CHECK_FALSE(c.rdma_inline);
    const BadVar cases[] = {{"RDMASOCK_RDMA_SIGNAL_EVERY", "0"},  {"RDMASOCK_RDMA_SIGNAL_EVERY", "1025"},
                            {"RDMASOCK_RDMA_SIGNAL_EVERY", "1K"}, {"RDMASOCK_RDMA_SIGNAL_EVERY", "-3"},
                            {"RDMASOCK_RDMA_SIGNAL_EVERY", ""},   {"RDMASOCK_RDMA_INLINE", "maybe"},
                            {"RDMASOCK_RDMA_INLINE", ""}};
    expect_each_rejected(cases, [](const Config& bad) {
        CHECK(bad.rdma_signal_every == 64);
        CHECK(bad.rdma_inline);
    });
}
