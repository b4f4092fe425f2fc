// The cached process id stays right across fork without the shim's handlers
// (RDMA code compares it with the owner of its verbs objects on every wake-up).
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/process_id.hpp"

using namespace rdmasock;

TEST_CASE("current_pid is the caller's pid, in a forked child too") {
    REQUIRE(current_pid() == static_cast<int>(getpid()));
    const uint64_t gen = fork_generation();
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) _exit(current_pid() == static_cast<int>(getpid()) ? 0 : 1);
    int st = 0;
    REQUIRE(waitpid(child, &st, 0) == child);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(current_pid() == static_cast<int>(getpid()));
    note_fork();
    CHECK(fork_generation() == gen + 1);
}
