// The guarded ring copies (fault_guard.hpp): a bad application buffer is
// reported, never a crash; every other fault reaches the application's own
// disposition; the ring keeps every byte it could not deliver.
#include <catch2/catch.hpp>

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "sys/fault_guard.hpp"
#include "local_ring.hpp"

using namespace rdmasock;

namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// [good][unmapped][read-only][good]
struct Pages {
    char* base;
    Pages() {
        base = static_cast<char*>(mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        REQUIRE(base != MAP_FAILED);
        REQUIRE(munmap(base + kPage, kPage) == 0);
        REQUIRE(mprotect(base + 2 * kPage, kPage, PROT_READ) == 0);
    }
    ~Pages() {
        munmap(base, kPage);
        munmap(base + 2 * kPage, 2 * kPage);
    }
    char* unmapped() const { return base + kPage; }
    char* read_only() const { return base + 2 * kPage; }
};

std::vector<char> bytes(size_t n, char seed) {
    std::vector<char> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(seed + i * 13);
    return v;
}

// The application's disposition of a signal, put back at the end of a test.
struct KeepDisposition {
    int sig;
    struct sigaction old{};
    explicit KeepDisposition(int s) : sig(s) { guard::app_sigaction(sig, nullptr, &old); }
    ~KeepDisposition() { guard::app_sigaction(sig, &old, nullptr); }
};

// How a forked child that runs f ended: the signal that killed it, or 0.
template <class F>
int child_signal(F f) {
    pid_t pid = fork();
    if (pid == 0) {
        rlimit no{0, 0};
        setrlimit(RLIMIT_CORE, &no);
        f();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

sigjmp_buf g_jump;
volatile sig_atomic_t g_hits = 0;
void* volatile g_addr = nullptr;
void on_segv(int, siginfo_t* si, void*) {
    g_hits = g_hits + 1;
    g_addr = si->si_addr;
    siglongjmp(g_jump, 1);
}

}  // namespace

TEST_CASE("guarded copies of good memory are plain copies") {
    REQUIRE(guard::install());
    for (size_t n : {0ul, 1ul, 7ul, 64ul, 4095ul, 4096ul, 4097ul, 100000ul}) {
        auto src = bytes(n + 1, 'a');
        std::vector<char> dst(n + 1, 0);
        REQUIRE(guard::copy_to_user(dst.data(), src.data(), n) == 0);
        REQUIRE(guard::copy_from_user(dst.data() + 0, src.data(), n) == 0);
        REQUIRE(std::memcmp(dst.data(), src.data(), n) == 0);
        REQUIRE(dst[n] == 0);  // nothing past n
    }
}

TEST_CASE("a copy into a bad application buffer stops at the faulting byte") {
    REQUIRE(guard::install());
    REQUIRE(guard::installed());
    Pages pg;
    auto src = bytes(300, 'x');
    SECTION("unmapped after 100 good bytes") {
        char* dst = pg.unmapped() - 100;
        REQUIRE(guard::copy_to_user(dst, src.data(), 300) == 200);
        REQUIRE(std::memcmp(dst, src.data(), 100) == 0);
    }
    SECTION("wholly unmapped") { REQUIRE(guard::copy_to_user(pg.unmapped(), src.data(), 300) == 300); }
    SECTION("read-only") { REQUIRE(guard::copy_to_user(pg.read_only() + 10, src.data(), 300) == 300); }
    SECTION("non-canonical address") {
        REQUIRE(guard::copy_to_user(reinterpret_cast<void*>(uintptr_t{1} << 50), src.data(), 10) == 10);
    }
}

TEST_CASE("every size and every good prefix: the count of bytes not copied is exact") {
    REQUIRE(guard::install());
    Pages pg;
    auto src = bytes(6000, 'k');
    for (size_t n : {1ul, 15ul, 16ul, 17ul, 63ul, 64ul, 65ul, 300ul, 2047ul, 2048ul, 2049ul, 5000ul}) {
        for (size_t good : {0ul, 1ul, 15ul, 16ul, 17ul, 63ul, 64ul, 65ul, 100ul, 2000ul, 2047ul, 2048ul, 4000ul}) {
            if (good >= n || good > kPage) continue;
            INFO("n=" << n << " good=" << good);
            char* edge = pg.unmapped() - good;
            std::memset(edge, 0, good);
            REQUIRE(guard::copy_to_user(edge, src.data(), n) == n - good);
            REQUIRE(std::memcmp(edge, src.data(), good) == 0);
            std::vector<char> dst(n, 0);
            std::memcpy(edge, src.data(), good);
            REQUIRE(guard::copy_from_user(dst.data(), edge, n) == n - good);
            REQUIRE(std::memcmp(dst.data(), src.data(), good) == 0);
            REQUIRE(guard::copy_to_user(pg.read_only() + kPage - good - 1, src.data(), n) == n);  // read-only from the first byte
        }
    }
}

TEST_CASE("a copy from a bad application buffer stops at the faulting byte") {
    REQUIRE(guard::install());
    Pages pg;
    std::vector<char> dst(300, 0);
    std::memset(pg.unmapped() - 100, 'q', 100);
    REQUIRE(guard::copy_from_user(dst.data(), pg.unmapped() - 100, 300) == 200);
    REQUIRE(dst[0] == 'q');
    REQUIRE(dst[99] == 'q');
    REQUIRE(guard::copy_from_user(dst.data(), pg.unmapped(), 10) == 10);
    REQUIRE(guard::copy_from_user(dst.data(), pg.read_only(), 10) == 0);  // readable: fine
}

TEST_CASE("a fault outside the guarded copies reaches the application's handler") {
    REQUIRE(guard::install());
    KeepDisposition keep(SIGSEGV);
    Pages pg;
    struct sigaction sa{}, back{};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    REQUIRE(guard::app_sigaction(SIGSEGV, &sa, nullptr) == 0);
    REQUIRE(guard::app_sigaction(SIGSEGV, nullptr, &back) == 0);
    REQUIRE(back.sa_sigaction == on_segv);  // the application sees what it set
    REQUIRE((back.sa_flags & SA_SIGINFO) != 0);
    REQUIRE(sigismember(&back.sa_mask, SIGUSR2) == 1);
    struct sigaction kernel{};
    guard::real_sigaction(SIGSEGV, nullptr, &kernel);
    REQUIRE(kernel.sa_sigaction != on_segv);  // while ours stays installed
    REQUIRE(sigismember(&kernel.sa_mask, SIGUSR2) == 1);  // with its mask

    g_hits = 0;
    if (sigsetjmp(g_jump, 1) == 0) *static_cast<volatile char*>(pg.unmapped()) = 1;
    REQUIRE(g_hits == 1);
    REQUIRE(g_addr == pg.unmapped());

    // A bad user buffer in a guarded copy never reaches it.
    g_hits = 0;
    char src[10] = {};
    REQUIRE(guard::copy_to_user(pg.unmapped(), src, 10) == 10);
    REQUIRE(g_hits == 0);
}

TEST_CASE("with SIG_DFL a fault still kills the program with SIGSEGV") {
    REQUIRE(guard::install());
    Pages pg;
    auto dfl = [] {
        struct sigaction d{};
        d.sa_handler = SIG_DFL;
        guard::app_sigaction(SIGSEGV, &d, nullptr);
    };
    CHECK(child_signal([&] {
              dfl();
              volatile uintptr_t low = 16;  // the first page (UBSan traps a literal NULL)
              *reinterpret_cast<volatile char*>(low) = 1;
          }) == SIGSEGV);
    CHECK(child_signal([&] {
              struct sigaction ign{};
              ign.sa_handler = SIG_IGN;
              guard::app_sigaction(SIGSEGV, &ign, nullptr);
              *static_cast<volatile char*>(pg.unmapped()) = 1;  // ignoring a fault: the kernel kills
          }) == SIGSEGV);
    CHECK(child_signal([&] {
              dfl();
              raise(SIGSEGV);
          }) == SIGSEGV);
    // A fault on the ring's side of a copy is a bug, not a bad buffer: not swallowed.
    CHECK(child_signal([&] {
              dfl();
              char dst[16];
              guard::copy_to_user(dst, pg.unmapped(), sizeof dst);
          }) == SIGSEGV);
}

TEST_CASE("SA_RESETHAND: the handler runs once, then the default kills") {
    REQUIRE(guard::install());
    KeepDisposition keep(SIGSEGV);
    Pages pg;
    struct sigaction sa{}, back{};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    REQUIRE(guard::app_sigaction(SIGSEGV, &sa, nullptr) == 0);
    g_hits = 0;
    if (sigsetjmp(g_jump, 1) == 0) *static_cast<volatile char*>(pg.unmapped()) = 1;
    REQUIRE(g_hits == 1);
    guard::app_sigaction(SIGSEGV, nullptr, &back);
    REQUIRE(back.sa_handler == SIG_DFL);
    REQUIRE((back.sa_flags & SA_RESETHAND) != 0);  // the kernel keeps the flags
    CHECK(child_signal([&] { *static_cast<volatile char*>(pg.unmapped()) = 1; }) == SIGSEGV);
}

TEST_CASE("a ring read into a bad buffer keeps the record; the next good read gets every byte") {
    REQUIRE(guard::install());
    Pages pg;
    test::LocalRing r(1 << 16);
    auto a = test::pattern(0, 100), b = test::pattern(100, 50);
    REQUIRE(r.writer.write(a.data(), a.size()).bytes == 100);
    REQUIRE(r.writer.write(b.data(), b.size()).bytes == 50);

    auto res = r.reader.read(pg.unmapped(), 100);
    REQUIRE(res.fault);
    REQUIRE(res.bytes == 0);
    res = r.reader.read(pg.unmapped() - 10, 100);  // 10 bytes fit, then the fault: none counted
    REQUIRE(res.fault);
    REQUIRE(res.bytes == 0);
    std::vector<char> got(200);
    REQUIRE(r.reader.read(got.data(), 20).bytes == 20);
    res = r.reader.read(pg.unmapped() - 90, 200);  // the rest of record 1 fits: counted; record 2 faults
    REQUIRE(res.fault);
    REQUIRE(res.bytes == 80);
    REQUIRE(std::memcmp(pg.unmapped() - 90, a.data() + 20, 80) == 0);
    res = r.reader.read(got.data(), 200);
    REQUIRE(!res.fault);
    REQUIRE(res.bytes == 50);
    REQUIRE(std::memcmp(got.data(), b.data(), 50) == 0);
    REQUIRE(r.reader.poll() == ring::RingStatus::would_block);
}

TEST_CASE("a ring write from a bad buffer posts nothing of the faulting record") {
    REQUIRE(guard::install());
    Pages pg;
    test::LocalRing r(1 << 16);
    std::memset(pg.unmapped() - 100, 'z', 100);
    auto res = r.writer.write(pg.unmapped() - 100, 300);
    REQUIRE(res.fault);
    REQUIRE(res.bytes == 0);
    REQUIRE(r.writer.written() == 0);
    for (size_t i = 0; i < 400; ++i) REQUIRE(r.memory[i] == 0);  // the reader's ring is as it was
    auto good = test::pattern(0, 40);
    iovec v[2] = {{good.data(), good.size()}, {pg.unmapped(), 10}};
    res = r.writer.writev(v, 2);
    REQUIRE(res.fault);
    REQUIRE(res.bytes == 0);
    REQUIRE(r.writer.write(good.data(), good.size()).bytes == 40);
    std::vector<uint8_t> got(100);
    auto rd = r.reader.read(got.data(), got.size());
    REQUIRE(rd.bytes == 40);
    REQUIRE(std::memcmp(got.data(), good.data(), 40) == 0);
    REQUIRE(r.reader.status() == ring::RingStatus::ok);
}
