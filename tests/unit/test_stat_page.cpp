// The stat page: what a writer puts in a slot is what a reader gets back,
// never torn, within capacity, and a forked child gets a page of its own.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "stat/stat_page.hpp"

using namespace rdmasock::stat;

namespace {

SlotInfo info(int fd, const char* phase = "upgraded", const char* reason = "") {
    SlotInfo i;
    i.fd = fd;
    i.role = fd % 2 ? Role::server : Role::client;
    i.phase_code = 4;
    i.transport = "shm";
    i.phase = phase;
    i.local = "127.0.0.1:" + std::to_string(1000 + fd);
    i.remote = "[::1]:" + std::to_string(2000 + fd);
    i.reason = reason;
    return i;
}

PageView read(const StatPage& p) {
    PageView v;
    std::string err;
    REQUIRE(read_page(p.data(), p.size(), v, err));
    return v;
}

// Reads the page the way `rdmasock stat` does: through the fd, mapped read-only.
PageView read_through_fd(int fd) {
    struct ::stat st {};
    REQUIRE(fstat(fd, &st) == 0);
    void* m = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(m != MAP_FAILED);
    PageView v;
    std::string err;
    bool ok = read_page(m, static_cast<size_t>(st.st_size), v, err);
    munmap(m, static_cast<size_t>(st.st_size));
    REQUIRE(ok);
    return v;
}

}  // namespace

TEST_CASE("stat page: a slot reads back as written", "[stat]") {
    auto page = StatPage::create(8);
    REQUIRE(page);
    Slot* s = page->acquire(info(7, "plain", "peer offered nothing"));
    REQUIRE(s);
    StatPage::add_bytes(s, true, 123);
    StatPage::add_bytes(s, false, 45);
    StatPage::add_bytes(s, true, 1);
    PageView v = read(*page);
    CHECK(v.pid == getpid());
    CHECK(v.slot_count == 8);
    CHECK(v.dropped == 0);
    REQUIRE(v.slots.size() == 1);
    CHECK(v.slots[0].fd == 7);
    CHECK(v.slots[0].role == Role::server);
    CHECK(v.slots[0].transport == "shm");
    CHECK(v.slots[0].phase == "plain");
    CHECK(v.slots[0].local == "127.0.0.1:1007");
    CHECK(v.slots[0].remote == "[::1]:2007");
    CHECK(v.slots[0].reason == "peer offered nothing");
    CHECK(v.slots[0].tx_bytes == 124);
    CHECK(v.slots[0].rx_bytes == 45);

    SlotInfo up = info(7);
    up.local = "changed";  // addresses are set once, at acquire
    page->update(s, up);
    v = read(*page);
    REQUIRE(v.slots.size() == 1);
    CHECK(v.slots[0].phase == "upgraded");
    CHECK(v.slots[0].reason.empty());
    CHECK(v.slots[0].local == "127.0.0.1:1007");
    CHECK(v.slots[0].tx_bytes == 124);

    page->release(s);
    CHECK(read(*page).slots.empty());
    // Reused: counters start from zero with the new connection.
    Slot* again = page->acquire(info(9));
    CHECK(again == s);
    v = read(*page);
    REQUIRE(v.slots.size() == 1);
    CHECK(v.slots[0].fd == 9);
    CHECK(v.slots[0].tx_bytes == 0);
}

TEST_CASE("stat page: long text is cut, never overflows", "[stat]") {
    auto page = StatPage::create(2);
    REQUIRE(page);
    SlotInfo i = info(1, "a-phase-name-that-is-far-too-long", std::string(500, 'r').c_str());
    i.local = std::string(300, 'l');
    Slot* s = page->acquire(i);
    REQUIRE(s);
    PageView v = read(*page);
    REQUIRE(v.slots.size() == 1);
    CHECK(v.slots[0].phase.size() == sizeof s->phase - 1);
    CHECK(v.slots[0].reason == std::string(sizeof s->reason - 1, 'r'));
    CHECK(v.slots[0].local.size() == sizeof s->local - 1);
}

TEST_CASE("stat page: a full table drops and counts, then reuses freed slots", "[stat]") {
    auto page = StatPage::create(3);
    REQUIRE(page);
    std::vector<Slot*> held;
    for (int fd = 0; fd < 3; ++fd) held.push_back(page->acquire(info(fd)));
    for (Slot* s : held) REQUIRE(s);
    CHECK(page->acquire(info(10)) == nullptr);
    CHECK(page->acquire(info(11)) == nullptr);
    PageView v = read(*page);
    CHECK(v.slots.size() == 3);
    CHECK(v.dropped == 2);
    page->release(held[1]);
    Slot* s = page->acquire(info(12));
    CHECK(s == held[1]);
    v = read(*page);
    CHECK(v.slots.size() == 3);
    CHECK(v.dropped == 2);
}

TEST_CASE("stat page: the reader rejects what is not a page, and bounds a hostile one", "[stat]") {
    PageView v;
    std::string err;
    std::vector<char> junk(kHeaderBytes + 4 * sizeof(Slot), 0);
    CHECK_FALSE(read_page(nullptr, 0, v, err));
    CHECK_FALSE(read_page(junk.data(), 100, v, err));
    CHECK_FALSE(read_page(junk.data(), junk.size(), v, err));  // no magic

    auto page = StatPage::create(4);
    REQUIRE(page);
    REQUIRE(page->acquire(info(3)));
    std::vector<char> copy(static_cast<const char*>(page->data()), static_cast<const char*>(page->data()) + page->size());
    auto* h = reinterpret_cast<PageHeader*>(copy.data());
    SECTION("slot count beyond the mapping") {
        h->slot_count = 1u << 30;
        CHECK_FALSE(read_page(copy.data(), copy.size(), v, err));
    }
    SECTION("high water beyond the slot count is clamped") {
        h->high_water.store(1u << 31);
        REQUIRE(read_page(copy.data(), copy.size(), v, err));
        CHECK(v.slots.size() == 1);
    }
    SECTION("unknown version or layout") {
        h->slot_bytes = 128;
        CHECK_FALSE(read_page(copy.data(), copy.size(), v, err));
    }
    SECTION("unterminated, unprintable text stays inside its field") {
        auto* s = reinterpret_cast<Slot*>(copy.data() + kHeaderBytes);
        memset(s->transport, 'A', sizeof s->transport);
        memset(s->phase, '\x1b', sizeof s->phase);
        REQUIRE(read_page(copy.data(), copy.size(), v, err));
        REQUIRE(v.slots.size() == 1);
        CHECK(v.slots[0].transport == std::string(sizeof s->transport, 'A'));
        CHECK(v.slots[0].phase == std::string(sizeof s->phase, '?'));
    }
    SECTION("a slot whose writer never finishes is skipped, not waited for") {
        auto* s = reinterpret_cast<Slot*>(copy.data() + kHeaderBytes);
        s->seq.store(s->seq.load() | 1);
        REQUIRE(read_page(copy.data(), copy.size(), v, err));
        CHECK(v.slots.empty());
        CHECK(v.unstable == 1);
    }
}

TEST_CASE("stat page: the seqlock never hands out a torn record", "[stat]") {
    auto page = StatPage::create(1);
    REQUIRE(page);
    // Two alternating records whose fields all name the same generation.
    auto gen = [](int g) {
        SlotInfo i = info(g);
        i.reason = std::string(60, static_cast<char>('a' + g));
        return i;
    };
    Slot* s = page->acquire(gen(0));
    REQUIRE(s);
    std::atomic<bool> stop{false};
    std::thread writer([&] {
        for (int k = 0; !stop.load(); ++k) page->update(s, gen(k % 2));
    });
    int torn = 0, seen = 0;
    for (int reads = 0; reads < 20000; ++reads) {
        PageView v;
        std::string err;
        if (!read_page(page->data(), page->size(), v, err)) ++torn;
        if (v.slots.empty()) continue;  // skipped as unstable this time
        ++seen;
        const SlotView& r = v.slots[0];
        bool ok = (r.fd == 0 || r.fd == 1) && r.reason == std::string(60, static_cast<char>('a' + r.fd)) &&
                  r.role == (r.fd ? Role::server : Role::client);
        if (!ok) ++torn;
    }
    stop = true;
    writer.join();
    CHECK(torn == 0);
    CHECK(seen > 0);
}

TEST_CASE("stat page: a forked child writes a page of its own at the same address", "[stat]") {
    auto page = StatPage::create(16);
    REQUIRE(page);
    Slot* shared_conn = page->acquire(info(4));
    REQUIRE(shared_conn);
    StatPage::add_bytes(shared_conn, true, 10);
    int parent_fd = page->fd();

    int report[2];
    REQUIRE(pipe(report) == 0);
    page->prepare_fork();
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // Exit codes name the first thing that went wrong.
        close(report[0]);
        if (!page->after_fork_child()) _exit(2);
        // The inherited fd (the parent's page) is closed; the new memfd has another number.
        if (page->fd() == parent_fd || fcntl(parent_fd, F_GETFD) != -1) _exit(3);
        StatPage::add_bytes(shared_conn, true, 5);  // the inherited connection goes on in the child
        Slot* mine = page->acquire(info(6));
        if (!mine) _exit(4);
        PageView v;
        std::string err;
        // The page as of the fork, whatever the parent did since.
        if (!read_page(page->data(), page->size(), v, err) || v.slots.size() != 2 || v.slots[0].tx_bytes != 15) _exit(9);
        page->release(shared_conn);
        if (!read_page(page->data(), page->size(), v, err)) _exit(5);
        if (v.pid != getpid() || v.slots.size() != 1 || v.slots[0].fd != 6) _exit(6);
        PageView through = read_through_fd(page->fd());
        if (through.pid != getpid() || through.slots.size() != 1) _exit(7);
        char ok = 'k';
        if (write(report[1], &ok, 1) != 1) _exit(8);
        _exit(0);
    }
    page->after_fork_parent();
    // Races with the child's move to its own page: the child must not see this.
    StatPage::add_bytes(shared_conn, true, 1000);
    close(report[1]);
    char c = 0;
    CHECK(read(report[0], &c, 1) == 1);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    close(report[0]);
    // The parent's page saw none of the child's changes.
    PageView v = read(*page);
    CHECK(v.pid == getpid());
    REQUIRE(v.slots.size() == 1);
    CHECK(v.slots[0].fd == 4);
    CHECK(v.slots[0].tx_bytes == 1010);
    CHECK(page->fd() == parent_fd);
    PageView through = read_through_fd(page->fd());
    CHECK(through.slots.size() == 1);
}

TEST_CASE("stat page: format_address", "[stat]") {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(5432);
    a.sin_addr.s_addr = htonl(0x7f000001);
    CHECK(format_address(reinterpret_cast<sockaddr*>(&a), sizeof a) == "127.0.0.1:5432");
    sockaddr_in6 b{};
    b.sin6_family = AF_INET6;
    b.sin6_port = htons(80);
    b.sin6_addr = in6addr_loopback;
    CHECK(format_address(reinterpret_cast<sockaddr*>(&b), sizeof b) == "[::1]:80");
    CHECK(format_address(reinterpret_cast<sockaddr*>(&a), 4) == "");
    // The widest of each (digits by hand): every octet and the port at their largest.
    a.sin_port = htons(65535);
    a.sin_addr.s_addr = htonl(0xffffffff);
    CHECK(format_address(reinterpret_cast<sockaddr*>(&a), sizeof a) == "255.255.255.255:65535");
    a.sin_port = 0;
    a.sin_addr.s_addr = htonl(0x0a000102);
    CHECK(format_address(reinterpret_cast<sockaddr*>(&a), sizeof a) == "10.0.1.2:0");
    b.sin6_port = htons(65535);
    REQUIRE(inet_pton(AF_INET6, "fe80:1234:5678:9abc:def0:1234:5678:9abc", &b.sin6_addr) == 1);
    CHECK(format_address(reinterpret_cast<sockaddr*>(&b), sizeof b) == "[fe80:1234:5678:9abc:def0:1234:5678:9abc]:65535");
}

TEST_CASE("stat page: a reused slot shows the new, shorter text, nothing of the old", "[stat]") {
    auto page = StatPage::create(4);
    REQUIRE(page);
    SlotInfo info;
    info.phase = "rv_accepted";
    info.local = "255.255.255.255:65535";
    info.remote = "[fe80:1234:5678:9abc:def0:1234:5678:9abc]:65535";
    info.reason = "a long reason that fills much of the field";
    Slot* s = page->acquire(info);
    REQUIRE(s);
    page->release(s);
    info.phase = "plain";
    info.local = "1.2.3.4:5";
    info.remote = "[::1]:6";
    info.reason = "";
    REQUIRE(page->acquire(info) == s);  // the slot released above, reused
    PageView v = read_through_fd(page->fd());
    REQUIRE(v.slots.size() == 1);
    CHECK(v.slots[0].phase == "plain");
    CHECK(v.slots[0].local == "1.2.3.4:5");
    CHECK(v.slots[0].remote == "[::1]:6");
    CHECK(v.slots[0].reason == "");
}
