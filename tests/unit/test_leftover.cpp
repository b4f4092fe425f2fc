// Kept bytes (shm/leftover.hpp): what a hand-over claimed from a writer that did
// not answer is served before the kernel's bytes, MSG_WAITALL takes the rest
// from the kernel, and a socket closed by this process leaves nothing for a
// later socket with the same inode number.
#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
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

namespace {

// A kept-bytes memfd as another process would pass it: made by keep(), taken
// out of this process's registry, with a writable mapping of its own (the
// sender's) to rewrite the header after the receiver adopted it.
struct PassedMemfd {
    int fd = -1;
    size_t size = 0;
    unsigned char* sender = nullptr;
    PassedMemfd(uint64_t inode, const char* bytes, leftover::Order order) {
        REQUIRE(leftover::keep(inode, bytes, std::strlen(bytes), order));
        fd = dup(leftover::memfd_of(inode));
        REQUIRE(fd >= 0);
        leftover::drop(inode);
        struct stat st {};
        REQUIRE(fstat(fd, &st) == 0);
        size = static_cast<size_t>(st.st_size);
        sender = static_cast<unsigned char*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        REQUIRE(sender != MAP_FAILED);
    }
    ~PassedMemfd() { munmap(sender, size); }
    // The header's words (shm/leftover.cpp's Header): length at 16, consumed at 24, owed_err at 36.
    void put64(size_t at, uint64_t v) { std::memcpy(sender + at, &v, sizeof v); }
    void put32(size_t at, int32_t v) { std::memcpy(sender + at, &v, sizeof v); }
};

}  // namespace

TEST_CASE("a passed kept-bytes memfd is checked at adoption, and its sender's later writes stay harmless", "[leftover]") {
    const uint64_t inode = 0x7fffffc0ull;  // no real socket of this process has it
    char buf[64] = {};
    iovec v{buf, sizeof buf};
    ssize_t got = -1;

    SECTION("a header written for another socket is refused") {
        PassedMemfd m(inode, "claimed", leftover::Order::before_kernel);
        CHECK_FALSE(leftover::adopt(m.fd, inode + 1));
        CHECK_FALSE(leftover::known(inode + 1));
    }
    SECTION("a length and a consumed count rewritten past the mapping serve only the bytes adopted") {
        PassedMemfd m(inode, "claimed", leftover::Order::before_kernel);
        REQUIRE(leftover::adopt(m.fd, inode));
        m.put64(16, 1ull << 40);  // length
        m.put64(24, 2);           // consumed
        REQUIRE(leftover::receive_first(-1, inode, &v, 1, MSG_DONTWAIT, got, fake_kernel));
        CHECK(std::string(buf, static_cast<size_t>(got)).substr(0, 5) == "aimed");
        CHECK(leftover::unread_bytes(inode) == 0);
        m.put64(24, 1ull << 46);  // a consumed count far past the mapping: nothing to read, no fault
        CHECK(leftover::unread_bytes(inode) == 0);
        CHECK_FALSE(leftover::first_pending(inode));
        leftover::drop(inode);
    }
    SECTION("an error word that is no reset the kernel reports is not reported") {
        PassedMemfd m(inode, "end", leftover::Order::at_kernel_end);
        REQUIRE(leftover::adopt(m.fd, inode));
        CHECK(leftover::after_kernel(inode, &v, 1, 0, 0, 0) == 3);  // the kernel's end: kept bytes first
        m.put32(36, EACCES);
        errno = 0;
        CHECK(leftover::after_kernel(inode, &v, 1, 0, 0, 0) == 0);  // then the end, not EACCES
        leftover::drop(inode);
    }
    SECTION("a memfd another user made is refused") {
        PassedMemfd m(inode, "claimed", leftover::Order::before_kernel);
        if (geteuid() != 0 || fchown(m.fd, 65534, 65534) != 0) {
            WARN("not root: cannot give the memfd to another user; the check is not exercised");
            close(m.fd);
        } else {
            CHECK_FALSE(leftover::adopt(m.fd, inode));
            CHECK_FALSE(leftover::known(inode));
        }
    }
}
