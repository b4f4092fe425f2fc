// busy_lock.hpp: who holds a busy word decides how long we wait, and we never spin.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "ring/busy_lock.hpp"
#include "shm/peer_check.hpp"

using namespace rdmasock;
using busy_lock::Got;
using busy_lock::Who;

namespace {

struct Fixed final : busy_lock::Judge {
    Who verdict;
    int calls = 0;
    explicit Fixed(Who w) : verdict(w) {}
    Who who(int32_t) override {
        ++calls;
        return verdict;
    }
};

double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

TEST_CASE("busy_lock: a free word is taken without asking anyone", "[busy_lock]") {
    std::atomic<int32_t> w{0};
    Fixed judge(Who::foreign);
    REQUIRE(busy_lock::lock(w, 42, judge, {}) == Got::locked);
    CHECK(w.load() == 42);
    CHECK(judge.calls == 0);
}

TEST_CASE("busy_lock: a dead holder's lock is taken over", "[busy_lock]") {
    std::atomic<int32_t> w{12345};
    Fixed judge(Who::dead);
    REQUIRE(busy_lock::lock(w, 42, judge, {}) == Got::locked);
    CHECK(w.load() == 42);
}

TEST_CASE("busy_lock: a foreign holder is abuse after the grace, not the patience", "[busy_lock]") {
    std::atomic<int32_t> w{777};
    Fixed judge(Who::foreign);
    busy_lock::Policy p{60'000'000, 0, false};  // a patience no test would wait for
    CHECK(busy_lock::lock(w, 42, judge, p) == Got::abused);
    CHECK(w.load() == 777);  // never overwritten
    p.foreign_grace_us = 20'000;
    CHECK(busy_lock::lock(w, 42, judge, p) == Got::abused);
}

TEST_CASE("busy_lock: our own pid is a thread of ours unless the caller excludes them", "[busy_lock]") {
    std::atomic<int32_t> w{42};
    busy_lock::Policy p{30'000, 60'000'000, true};
    struct Self final : busy_lock::Judge {
        Who who(int32_t pid) override { return busy_lock::by_kill(pid, 42, Who::relative); }
    } self;
    p.foreign_grace_us = 0;
    CHECK(busy_lock::lock(w, 42, self, p) == Got::abused);
    p.self_is_foreign = false;
    CHECK(busy_lock::lock(w, 42, self, p) == Got::patience);
}

TEST_CASE("busy_lock: a live relative is waited for asleep, and its release is seen", "[busy_lock]") {
    std::atomic<int32_t> w{777};
    Fixed judge(Who::relative);
    std::thread t([&] {
        timespec ts{0, 200'000'000};
        nanosleep(&ts, nullptr);
        w.store(0);
    });
    const double cpu0 = cpu_seconds();
    const Got got = busy_lock::lock(w, 42, judge, busy_lock::Policy{60'000'000, 0, false});
    const double cpu = cpu_seconds() - cpu0;
    t.join();
    CHECK(got == Got::locked);
    CHECK(w.load() == 42);
    // Asleep, not spinning: far less CPU than the 200 ms waited (a spin burns it all).
    CHECK(cpu < 0.1);
}

TEST_CASE("busy_lock: a relative that stays is given up after the patience", "[busy_lock]") {
    std::atomic<int32_t> w{777};
    Fixed judge(Who::relative);
    CHECK(busy_lock::lock(w, 42, judge, busy_lock::Policy{50'000, 0, false}) == Got::patience);
    CHECK(w.load() == 777);
}

TEST_CASE("busy_lock: by_kill tells the dead, ourselves and no pid at all", "[busy_lock]") {
    const int32_t me = getpid();
    CHECK(busy_lock::by_kill(me, me, Who::foreign) == Who::self);
    CHECK(busy_lock::by_kill(0, me, Who::foreign) == Who::dead);
    CHECK(busy_lock::by_kill(-1, me, Who::foreign) == Who::dead);  // never kill(-1, 0): a group
    CHECK(busy_lock::by_kill(0x7fffffff, me, Who::foreign) == Who::dead);
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, nullptr, 0);
    CHECK(busy_lock::by_kill(child, me, Who::foreign) == Who::dead);
    CHECK(busy_lock::by_kill(getppid(), me, Who::foreign) == Who::foreign);
}

TEST_CASE("peer_check::holds_socket: a fork holds our socket, another process does not", "[busy_lock]") {
    int sv[2], other[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, other) == 0);
    const uint64_t inode = peer_check::inode_of(sv[0]);
    REQUIRE(inode != 0);
    CHECK(peer_check::holds_socket(getpid(), inode));
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t with = fork();
    if (with == 0) {
        close(ready[0]);
        (void)!write(ready[1], "x", 1);
        pause();
        _exit(0);
    }
    pid_t without = fork();
    if (without == 0) {
        close(sv[0]);
        close(ready[0]);
        (void)!write(ready[1], "x", 1);
        pause();
        _exit(0);
    }
    char c[2];
    REQUIRE(read(ready[0], c, 1) == 1);
    REQUIRE(read(ready[0], c + 1, 1) == 1);
    CHECK(peer_check::holds_socket(with, inode));
    CHECK_FALSE(peer_check::holds_socket(without, inode));
    CHECK_FALSE(peer_check::holds_socket(with, peer_check::inode_of(other[0]) + 1000000));
    CHECK_FALSE(peer_check::holds_socket(0x7fffffff, inode));
    kill(with, SIGKILL);
    kill(without, SIGKILL);
    waitpid(with, nullptr, 0);
    waitpid(without, nullptr, 0);
    for (int fd : {sv[0], sv[1], other[0], other[1], ready[0], ready[1]}) close(fd);
}

TEST_CASE("peer_check::held_only_here: no other process holds the socket, until a fork does", "[busy_lock]") {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    const uint64_t inode = peer_check::inode_of(sv[0]);
    REQUIRE(inode != 0);
    CHECK(peer_check::held_only_here(inode));
    const int copy = dup(sv[0]);  // another number in this process is still this process
    CHECK(peer_check::held_only_here(inode));
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t with = fork();
    if (with == 0) {
        (void)!write(ready[1], "x", 1);
        pause();
        _exit(0);
    }
    char c;
    REQUIRE(read(ready[0], &c, 1) == 1);
    CHECK_FALSE(peer_check::held_only_here(inode));
    CHECK(peer_check::held_only_here(peer_check::inode_of(sv[1])) == false);  // the child holds both ends
    kill(with, SIGKILL);
    waitpid(with, nullptr, 0);
    CHECK(peer_check::held_only_here(inode));
    CHECK_FALSE(peer_check::held_only_here(0));
    for (int fd : {sv[0], sv[1], copy, ready[0], ready[1]}) close(fd);
}

TEST_CASE("peer_check::descriptors_left_after: what a close of a range of numbers leaves of a socket", "[busy_lock]") {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    const uint64_t inode = peer_check::inode_of(sv[0]);
    int inside = -2;
    const auto at = [](int fd) { return static_cast<unsigned>(fd); };
    CHECK(peer_check::descriptors_left_after(inode, at(sv[0]), at(sv[0]), &inside) == 0);
    CHECK(inside == sv[0]);
    CHECK(peer_check::descriptors_left_after(inode, at(sv[1]), at(sv[1]), &inside) == 1);
    CHECK(inside == -1);  // the range holds the other end only
    const int copy = fcntl(sv[0], F_DUPFD, sv[0] + 100);
    REQUIRE(copy > sv[0]);
    CHECK(peer_check::descriptors_left_after(inode, at(sv[0]), at(sv[0]), &inside) == 1);  // the copy stays
    CHECK(peer_check::descriptors_left_after(inode, at(sv[0]), at(copy), &inside) == 0);  // both go
    CHECK(inside >= 0);
    CHECK(peer_check::descriptors_left_after(0, 0, ~0u, &inside) == 0);
    for (int fd : {sv[0], sv[1], copy}) close(fd);
}
