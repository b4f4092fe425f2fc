// Argument checks the ring path makes as the kernel would (iov_check.hpp), and
// a Connection's private fd (keep_own_fd / retire_fd): the application closing
// the number never leaves the connection on a number someone else may get.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>

#include "base/config.hpp"
#include "connection/connection.hpp"
#include "sys/iov_check.hpp"

using namespace rdmasock;

namespace {
const SocketOps kLibc{::recv, ::send, ::recvmsg, ::sendmsg, ::poll};

ino_t inode(int fd) {
    struct stat st {};
    return fstat(fd, &st) == 0 ? st.st_ino : 0;
}
}  // namespace

TEST_CASE("iov checks: IOV_MAX and addresses no process can map") {
    CHECK(iov_count_ok(0));
    CHECK(iov_count_ok(IOV_MAX));
    CHECK_FALSE(iov_count_ok(IOV_MAX + 1));
    CHECK_FALSE(iov_count_ok(static_cast<size_t>(-1)));
    char buf[16];
    CHECK(user_range_ok(buf, sizeof buf));
    CHECK(user_range_ok(nullptr, 0));  // nothing to copy: never EFAULT
    CHECK_FALSE(user_range_ok(nullptr, 1));
    CHECK_FALSE(user_range_ok(reinterpret_cast<void*>(1), 1));
    CHECK_FALSE(user_range_ok(reinterpret_cast<void*>(0xffff800000001000ull), 1));
    CHECK_FALSE(user_range_ok(buf, SIZE_MAX));  // wraps around
    iovec v[2] = {{buf, 8}, {nullptr, 4}};
    CHECK_FALSE(user_iov_ok(v, 2));
    CHECK(user_iov_ok(v, 1));
}

TEST_CASE("a connection keeps its own fd when the application closes its number, and lets go once") {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    Config cfg;
    const ino_t ino = inode(sv[0]);
    {
        Connection c(sv[0], Role::server, false, cfg, kLibc);
        REQUIRE(c.keep_own_fd());
        const int own = c.fd();
        CHECK(own != sv[0]);
        CHECK(inode(own) == ino);  // the same socket
        CHECK((fcntl(own, F_GETFD) & FD_CLOEXEC) != 0);  // never inherited by an exec'd program
        CHECK(c.keep_own_fd());  // idempotent
        CHECK(c.fd() == own);
        close(sv[0]);  // the application's close: the socket lives on in `own`
        CHECK(write(sv[1], "x", 1) == 1);
        char b;
        CHECK(::recv(c.fd(), &b, 1, 0) == 1);
        c.retire_fd();
        CHECK(c.fd() == -1);  // from now on EBADF, never a reused number
        CHECK(fcntl(own, F_GETFD) == -1);
        c.retire_fd();  // twice is harmless
    }
    char b;
    CHECK(read(sv[1], &b, 1) == 0);  // the last reference went: EOF
    close(sv[1]);
}

TEST_CASE("a connection that never took its own fd leaves the application's fd alone") {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    Config cfg;
    {
        Connection c(sv[0], Role::server, false, cfg, kLibc);
        c.retire_fd();
        CHECK(c.fd() == -1);
    }
    CHECK(fcntl(sv[0], F_GETFD) >= 0);  // still the application's
    close(sv[0]);
    close(sv[1]);
}
