// Kept bytes (shm/leftover.hpp): what a hand-over claimed from a writer that did
// not answer is served before the kernel's bytes, MSG_WAITALL takes the rest
// from the kernel, and a socket closed by this process leaves nothing for a
// later socket with the same inode number.
#include <catch2/catch.hpp>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "shm/leftover.hpp"

using namespace rdmasock;

namespace {

// Stands in for the kernel's recvmsg: "KERNEL" bytes, as many as asked (up to 6).
int g_kernel_calls = 0;
ssize_t fake_kernel(int, msghdr* m, int) {
    ++g_kernel_calls;
    const char* src = "KERNEL";
    size_t n = 0;
    for (size_t i = 0; i < m->msg_iovlen && n < 6; ++i) {
        const size_t k = std::min<size_t>(m->msg_iov[i].iov_len, 6 - n);
        std::memcpy(m->msg_iov[i].iov_base, src + n, k);
        n += k;
    }
    return static_cast<ssize_t>(n);
}

}  // namespace

TEST_CASE("kept bytes come before the kernel's, MSG_WAITALL takes the rest there, and a dropped socket's are gone",
          "[leftover]") {
    const uint64_t inode = 0x7ffffff0ull;  // no real socket of this process has it
    REQUIRE(leftover::keep(inode, "claimed", 7, leftover::Order::before_kernel));
    CHECK(leftover::any_first());
    CHECK(leftover::first_pending(inode));

    char buf[16] = {};
    iovec v{buf, 4};
    ssize_t got = -1;
    REQUIRE(leftover::receive_first(-1, inode, &v, 1, MSG_PEEK, got, fake_kernel));
    CHECK(std::string(buf, static_cast<size_t>(got)) == "clai");
    REQUIRE(leftover::receive_first(-1, inode, &v, 1, 0, got, fake_kernel));
    CHECK(std::string(buf, static_cast<size_t>(got)) == "clai");
    CHECK(g_kernel_calls == 0);

    v.iov_len = 9;  // 3 kept bytes left: the other 6 from the kernel, as one TCP receive waits for them
    REQUIRE(leftover::receive_first(-1, inode, &v, 1, MSG_WAITALL, got, fake_kernel));
    CHECK(std::string(buf, static_cast<size_t>(got)) == "medKERNEL");
    CHECK(g_kernel_calls == 1);
    CHECK_FALSE(leftover::first_pending(inode));
    CHECK_FALSE(leftover::receive_first(-1, inode, &v, 1, 0, got, fake_kernel));  // the kernel's turn
    CHECK(leftover::known(inode));  // read, still listed until the socket's last close here
    leftover::drop(inode);
    CHECK_FALSE(leftover::known(inode));

    // Closed unread: dropped, and a later socket on the same inode number finds nothing.
    REQUIRE(leftover::keep(inode, "unread", 6, leftover::Order::before_kernel));
    CHECK(leftover::first_pending(inode));
    leftover::drop(inode);
    CHECK_FALSE(leftover::first_pending(inode));
    CHECK_FALSE(leftover::pending(inode));
    CHECK_FALSE(leftover::any_first());
    CHECK_FALSE(leftover::receive_first(-1, inode, &v, 1, 0, got, fake_kernel));
    leftover::drop(inode);  // twice: nothing
}

TEST_CASE("the last close of a socket with kept bytes unread is a RST, and drops them", "[leftover]") {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    struct stat st {};
    REQUIRE(fstat(sv[0], &st) == 0);
    const uint64_t inode = st.st_ino;
    REQUIRE(leftover::keep(inode, "unread", 6, leftover::Order::before_kernel));
    leftover::closing_last(sv[0], inode);  // no other process holds it
    linger l{};
    socklen_t len = sizeof l;
    REQUIRE(getsockopt(sv[0], SOL_SOCKET, SO_LINGER, &l, &len) == 0);
    CHECK(l.l_onoff == 1);
    CHECK(l.l_linger == 0);
    CHECK_FALSE(leftover::first_pending(inode));
    close(sv[0]);
    close(sv[1]);
}

TEST_CASE("kept bytes count in FIONREAD's answer until read, and are listed until dropped", "[leftover]") {
    const uint64_t inode = 0x7fffffe0ull;  // no real socket of this process has it
    CHECK(leftover::unread_bytes(inode) == 0);
    REQUIRE(leftover::keep(inode, "claimed", 7, leftover::Order::before_kernel));
    CHECK(leftover::unread_bytes(inode) == 7);
    const auto listed = leftover::known_inodes();
    CHECK(std::count(listed.begin(), listed.end(), inode) == 1);
    char buf[4];
    iovec v{buf, sizeof buf};
    ssize_t got = -1;
    REQUIRE(leftover::receive_first(-1, inode, &v, 1, MSG_PEEK, got, fake_kernel));
    CHECK(leftover::unread_bytes(inode) == 7);  // a peek leaves them
    REQUIRE(leftover::receive_first(-1, inode, &v, 1, 0, got, fake_kernel));
    CHECK(leftover::unread_bytes(inode) == 3);
    leftover::drop(inode);
    CHECK(leftover::unread_bytes(inode) == 0);
    const auto after = leftover::known_inodes();
    CHECK(std::count(after.begin(), after.end(), inode) == 0);
}
