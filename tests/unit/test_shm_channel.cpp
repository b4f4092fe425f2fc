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

#include "shm_channel.hpp"

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

TEST_CASE("the segment is private to our user and its name disappears after unlink") {
    std::string err;
    auto a = ShmChannel::create(1 << 16, err);
    REQUIRE(a);
    std::string path = "/dev/shm" + a->name();
    struct stat st{};
    REQUIRE(stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_uid == geteuid());
    auto b = ShmChannel::attach(a->name(), 1 << 16, err);
    REQUIRE(b);
    a->unlink();
    CHECK(stat(path.c_str(), &st) != 0);
    // Both mappings still work after the name is gone.
    uint8_t x = 42, y = 0;
    REQUIRE(a->writer().write(&x, 1).bytes == 1);
    REQUIRE(b->reader().read(&y, 1).bytes == 1);
    CHECK(y == 42);
}

TEST_CASE("attaching to a mismatched or bogus segment fails cleanly") {
    std::string err;
    auto a = ShmChannel::create(1 << 16, err);
    REQUIRE(a);
    CHECK_FALSE(ShmChannel::attach(a->name(), 1 << 17, err));
    CHECK_FALSE(err.empty());
    CHECK_FALSE(ShmChannel::attach("/rdmasock-does-not-exist", 1 << 16, err));
    CHECK_FALSE(ShmChannel::attach("../../etc/passwd", 1 << 16, err));
    CHECK_THAT(err, Catch::Contains("malformed"));
    CHECK_FALSE(ShmChannel::create(1000, err));
}

TEST_CASE("another user cannot open the segment") {
    if (geteuid() != 0) {
        WARN("not root: cannot switch users to check isolation");
        return;
    }
    std::string err;
    auto a = ShmChannel::create(1 << 16, err);
    REQUIRE(a);
    std::string name = a->name();
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
        int fd = shm_open(name.c_str(), O_RDWR, 0);
        _exit(fd < 0 && errno == EACCES ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("two processes stream millions of random-size records, every byte checked") {
    const uint64_t records = records_to_send();
    const uint64_t capacity = 1 << 20;
    std::string err;
    auto chan = ShmChannel::create(capacity, err);
    REQUIRE(chan);
    const std::string name = chan->name();
    const auto pat = make_pattern();

    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // writer: attaches by name like a real peer would
        std::string e;
        auto peer = ShmChannel::attach(name, capacity, e);
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
    bool named = true;
    for (;;) {
        size_t want = 1 + rng() % buf.size();
        IoResult r = chan->reader().read(buf.data(), std::min(want, kMaxWrite));
        if (r.status == RingStatus::eof || r.status == RingStatus::broken) break;
        if (r.bytes == 0) {
            if (named && stream > 0) chan->unlink(), named = false;  // the peer has mapped it
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
