// The shared-memory channel between two real processes.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "shm/shm_channel.hpp"

using namespace rdmasock;
using namespace rdmasock::ring;

namespace {

// The stream's byte at offset o is kPattern[o % kPeriod]; the buffer repeats its
// head so any 64 KiB slice is contiguous.
constexpr size_t kPeriod = 1 << 20;
constexpr size_t kMaxWrite = 64 * 1024;

std::vector<uint8_t> make_pattern() {
    std::vector<uint8_t> p(kPeriod + kMaxWrite);
    std::mt19937_64 rng(7);
    for (size_t i = 0; i < kPeriod; i += 8) {
        uint64_t v = rng();
        std::memcpy(&p[i], &v, 8);
    }
    std::memcpy(&p[kPeriod], &p[0], kMaxWrite);
    return p;
}

uint64_t records_to_send() {
    const char* env = std::getenv("RDMASOCK_TEST_RECORDS");
    return env ? std::strtoull(env, nullptr, 10) : 10'000'000ull;
}

// Sizes 1 B .. 64 KiB, log-uniform so small and large records are both common.
size_t record_size(std::mt19937_64& rng) { return 1 + rng() % (size_t{1} << (rng() % 17)); }

}  // namespace

TEST_CASE("attaching a sealed segment of another size, or a bogus capacity, fails cleanly") {
    std::string err;
    auto a = ShmChannel::create_sealed(1 << 16, err);
    REQUIRE(a);
    CHECK_FALSE(ShmChannel::attach_sealed(dup(a->memfd_fd()), 1 << 17, err));
    CHECK_FALSE(err.empty());
    CHECK_FALSE(ShmChannel::create_sealed(1000, err));
    CHECK_FALSE(ShmChannel::attach_sealed(dup(a->memfd_fd()), 1000, err));
}

TEST_CASE("two processes stream millions of random-size records, every byte checked") {
    const uint64_t records = records_to_send();
    const uint64_t capacity = 1 << 20;
    std::string err;
    auto chan = ShmChannel::create_sealed(capacity, err);
    REQUIRE(chan);
    const int memfd = chan->memfd_fd();
    const auto pat = make_pattern();

    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // writer: maps the memfd like a real peer would (it got it over SCM_RIGHTS)
        std::string e;
        auto peer = ShmChannel::attach_sealed(dup(memfd), capacity, e);
        if (!peer) _exit(3);
        std::mt19937_64 rng(1234);
        uint64_t stream = 0;
        for (uint64_t i = 0; i < records; ++i) {
            size_t len = record_size(rng), sent = 0;
            while (sent < len) {
                IoResult w = peer->writer().write(&pat[(stream + sent) % kPeriod], len - sent);
                if (w.status == RingStatus::broken) _exit(4);
                if (w.bytes == 0) sched_yield();
                sent += w.bytes;
            }
            stream += len;
        }
        while (peer->writer().write_fin() == RingStatus::would_block) sched_yield();
        _exit(0);
    }

    // Reader: random read sizes, independent of record boundaries.
    std::mt19937_64 rng(99);
    std::vector<uint8_t> buf(kMaxWrite + 1000);
    uint64_t stream = 0, mismatches = 0;
    for (;;) {
        size_t want = 1 + rng() % buf.size();
        IoResult r = chan->reader().read(buf.data(), std::min(want, kMaxWrite));
        if (r.status == RingStatus::eof || r.status == RingStatus::broken) break;
        if (r.bytes == 0) {
            sched_yield();
            continue;
        }
        if (std::memcmp(buf.data(), &pat[stream % kPeriod], r.bytes) != 0) ++mismatches;
        stream += r.bytes;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(chan->reader().status() == RingStatus::ok);
    CHECK(mismatches == 0);
    std::mt19937_64 replay(1234);
    uint64_t expected = 0;
    for (uint64_t i = 0; i < records; ++i) expected += record_size(replay);
    CHECK(stream == expected);
    WARN("records=" << records << " bytes=" << stream);
}
