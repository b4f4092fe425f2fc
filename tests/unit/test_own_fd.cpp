// The shim's own fds (common/own_fd.hpp): moved out of the program's way and marked,
// so that the close interposers can tell them from the program's numbers.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "sys/own_fd.hpp"

using namespace rdmasock;

TEST_CASE("own_fd: an adopted fd moves above the program's numbers and is marked until closed") {
    rlimit rl{};
    REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    const int low = eventfd(0, EFD_CLOEXEC);
    REQUIRE(low >= 0);
    errno = 1234;
    const int fd = adopt_own_fd(low);
    CHECK(errno == 1234);  // kept
    REQUIRE(fd >= 0);
    CHECK(is_own_fd(fd));
    if (rl.rlim_cur > 64 + 16) {
        CHECK(fd > low);
        CHECK(fcntl(low, F_GETFD) == -1);  // the low number is free again
        CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    }
    const auto in = own_fds_in(0, ~0u);
    CHECK(std::find(in.begin(), in.end(), fd) != in.end());
    CHECK(own_fds_in(static_cast<unsigned>(fd) + 1, ~0u).empty() == (std::find_if(in.begin(), in.end(), [&](int x) { return x > fd; }) == in.end()));
    close_own_fd(fd);
    CHECK_FALSE(is_own_fd(fd));
    CHECK(fcntl(fd, F_GETFD) == -1);
    CHECK(adopt_own_fd(-1) == -1);
}

TEST_CASE("own_fd: a duplicate is a new marked number; the original stays the caller's") {
    int p[2];
    REQUIRE(pipe(p) == 0);
    const int d = dup_own_fd(p[0]);
    REQUIRE(d >= 0);
    CHECK(d != p[0]);
    CHECK(is_own_fd(d));
    CHECK_FALSE(is_own_fd(p[0]));
    CHECK(fcntl(p[0], F_GETFD) >= 0);
    REQUIRE(write(p[1], "z", 1) == 1);
    char c = 0;
    CHECK(read(d, &c, 1) == 1);  // the same pipe
    CHECK(c == 'z');
    close_own_fd(d);
    close(p[0]);
    close(p[1]);
}

TEST_CASE("own_fd: marks are by number; unmark leaves the fd open") {
    const int fd = adopt_own_fd(eventfd(0, EFD_CLOEXEC));
    REQUIRE(fd >= 0);
    CHECK(is_own_fd(fd));
    CHECK(own_fds_in(static_cast<unsigned>(fd), static_cast<unsigned>(fd)) == std::vector<int>{fd});
    CHECK(own_fds_in(static_cast<unsigned>(fd) + 1, static_cast<unsigned>(fd) + 100).empty());
    unmark_own_fd(fd);
    CHECK_FALSE(is_own_fd(fd));
    CHECK(fcntl(fd, F_GETFD) >= 0);
    close(fd);
    CHECK_FALSE(is_own_fd(-1));
    CHECK_FALSE(is_own_fd(1 << 30));
}
