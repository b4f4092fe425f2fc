// Bad buffers and SIGSEGV/SIGBUS handling, observed by a program: recv/read/
// readv/recvmsg into unmapped, read-only and half-valid buffers, send/writev/
// sendmsg from unmapped ones (EFAULT, no byte lost or added), then the
// program's own fault handlers (sigaction, signal, SA_RESETHAND, SIGBUS, kill)
// and its deaths (SIG_DFL, SIG_IGN, a NULL dereference with no handler).
// tests/integration/efault_semantics.sh runs it over plain TCP and with the
// shim (both ends in this process, on shared memory) and requires identical
// output (issue #13 item 5).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));
int g_listen = -1;
int g_cases = 0;

void out(const char* what, const std::string& s) { printf("%-34s %s\n", what, s.c_str()); }

std::string rc_str(ssize_t rc) {
    char b[64];
    if (rc < 0) snprintf(b, sizeof b, "rc=-1 %s", strerrorname_np(errno));
    else snprintf(b, sizeof b, "rc=%zd", rc);
    return b;
}

void pattern(char* p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>('a' + (i * 7 + seed) % 26);
}

// Reads exactly n bytes (or to EOF / error) into a good buffer.
std::string exact(int fd, size_t n) {
    std::string got(n, '\0');
    size_t have = 0;
    while (have < n) {
        ssize_t r = recv(fd, got.data() + have, n - have, 0);
        if (r <= 0) break;
        have += static_cast<size_t>(r);
    }
    got.resize(have);
    return got;
}

// What is queued now, without waiting (after letting in-flight bytes land).
std::string queued(int fd) {
    usleep(20000);
    char b[65536];
    std::string s;
    ssize_t r;
    while ((r = recv(fd, b, sizeof b, MSG_DONTWAIT)) > 0) s.append(b, static_cast<size_t>(r));
    return s;
}

void wait_readable(int fd, size_t n) {
    std::string b(n, '\0');
    recv(fd, b.data(), n, MSG_PEEK | MSG_WAITALL);
}

void send_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        ssize_t r = send(fd, p, n, 0);
        if (r <= 0) exit(3);
        p += r;
        n -= static_cast<size_t>(r);
    }
}

struct Pair {
    int c, s;
};

Pair pair() {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    getsockname(g_listen, reinterpret_cast<sockaddr*>(&a), &len);
    Pair p;
    p.c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(p.c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) exit(2);
    p.s = accept(g_listen, nullptr, nullptr);
    for (int i = 0; i < 3; ++i) {  // the upgrade happens after the first I/O: then both sides switch
        send_all(p.c, "ping", 4);
        if (exact(p.s, 4) != "ping") exit(2);
        send_all(p.s, "pong", 4);
        if (exact(p.c, 4) != "pong") exit(2);
    }
    ++g_cases;
    return p;
}

void close_pair(Pair p) {
    close(p.c);
    close(p.s);
}

// Three pages: [good][unmapped][read-only]; `un` is the unmapped one.
struct Pages {
    char* base;
    char* un;
    char* ro;
};

Pages pages() {
    char* m = static_cast<char*>(mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (m == MAP_FAILED) exit(2);
    munmap(m + kPage, kPage);
    mprotect(m + 2 * kPage, kPage, PROT_READ);
    return {m, m + kPage, m + 2 * kPage};
}

std::string check(const std::string& got, const char* want, size_t n) {
    return got.size() == n && memcmp(got.data(), want, n) == 0 ? "intact (" + std::to_string(n) + " bytes)"
                                                                : "CORRUPT: " + std::to_string(got.size()) + " bytes";
}

void recv_cases() {
    Pages pg = pages();
    Pair p = pair();
    char msg[100];
    pattern(msg, sizeof msg, 1);
    send_all(p.s, msg, sizeof msg);
    wait_readable(p.c, sizeof msg);
    out("recv into unmapped page", rc_str(recv(p.c, pg.un, 100, 0)));
    out("recv into read-only page", rc_str(recv(p.c, pg.ro, 100, 0)));
    out("recv, second page unmapped", rc_str(recv(p.c, pg.un - 10, 100, 0)));
    out("read, second page unmapped", rc_str(read(p.c, pg.un - 10, 100)));
    out("recv MSG_PEEK, half bad", rc_str(recv(p.c, pg.un - 10, 100, MSG_PEEK)));
    out("recv MSG_DONTWAIT, half bad", rc_str(recv(p.c, pg.un - 10, 100, MSG_DONTWAIT)));
    char good[100];
    iovec v1[2] = {{good, 5}, {pg.un, 95}};
    out("readv good + bad", rc_str(readv(p.c, v1, 2)));
    iovec v2[2] = {{pg.un, 5}, {good, 95}};
    out("readv bad + good", rc_str(readv(p.c, v2, 2)));
    iovec v3[3] = {{good, 5}, {good + 5, 5}, {pg.ro, 90}};
    msghdr mh{};
    mh.msg_iov = v3;
    mh.msg_iovlen = 3;
    out("recvmsg good + good + read-only", rc_str(recvmsg(p.c, &mh, 0)));
    out("bytes still queued", check(exact(p.c, 100), msg, 100));

    // A partial record: 20 bytes read, then a fault: the other 80 stay.
    send_all(p.s, msg, sizeof msg);
    wait_readable(p.c, sizeof msg);
    out("recv 20 into a good buffer", rc_str(recv(p.c, good, 20, 0)));
    out("then recv, half bad", rc_str(recv(p.c, pg.un - 10, 100, 0)));
    out("the other 80 still queued", check(exact(p.c, 80), msg + 20, 80));

    // MSG_WAITALL that fits the good part: no fault.
    send_all(p.s, msg, 50);
    wait_readable(p.c, 50);
    out("waitall|dontwait 50 into good 60", rc_str(recv(p.c, pg.un - 60, 100, MSG_WAITALL | MSG_DONTWAIT)));
    out("the 50 bytes", check(std::string(pg.un - 60, 50), msg, 50));

    // One large send into a buffer whose third page is unmapped.
    const size_t big = 3 * kPage;
    std::string large(big, '\0');
    pattern(large.data(), big, 2);
    char* m = static_cast<char*>(mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    munmap(m + 2 * kPage, kPage);
    send_all(p.s, large.data(), big);
    wait_readable(p.c, big);
    out("recv 3 pages, third unmapped", rc_str(recv(p.c, m, big, 0)));
    out("all 3 pages still queued", check(exact(p.c, big), large.data(), big));
    munmap(m, 4 * kPage);

    out("nothing else queued", std::to_string(queued(p.c).size()) + " bytes");
    close_pair(p);
    munmap(pg.base, 4 * kPage);
}

void send_cases() {
    Pages pg = pages();
    Pair p = pair();
    out("send from unmapped page", rc_str(send(p.c, pg.un, 100, MSG_NOSIGNAL)));
    out("write from unmapped page", rc_str(write(p.c, pg.un, 100)));
    out("send, second page unmapped", rc_str(send(p.c, pg.un - 10, 100, MSG_NOSIGNAL)));
    char good[5] = {'g', 'o', 'o', 'd', '!'};
    iovec v[2] = {{good, 5}, {pg.un, 95}};
    out("writev good + bad", rc_str(writev(p.c, v, 2)));
    msghdr mh{};
    mh.msg_iov = v;
    mh.msg_iovlen = 2;
    out("sendmsg good + bad", rc_str(sendmsg(p.c, &mh, MSG_NOSIGNAL)));
    out("peer got nothing", std::to_string(queued(p.s).size()) + " bytes");
    send_all(p.c, "after", 5);
    out("then a good send", "peer got '" + exact(p.s, 5) + "'");
    out("send from read-only page", rc_str(send(p.c, pg.ro, 10, MSG_NOSIGNAL)));
    out("peer got", check(exact(p.s, 10), std::string(10, '\0').data(), 10));
    out("and nothing else", std::to_string(queued(p.s).size()) + " bytes");
    close_pair(p);
    munmap(pg.base, 4 * kPage);
}

// ---- the program's own faults

sigjmp_buf g_jump;
volatile sig_atomic_t g_hits = 0;
volatile int g_code = 0, g_blocked_self = 0, g_blocked_usr1 = 0;
void* volatile g_addr = nullptr;

void on_info(int sig, siginfo_t* si, void*) {
    g_hits = g_hits + 1;
    g_code = si->si_code;
    g_addr = si->si_addr;
    sigset_t now;
    sigprocmask(SIG_BLOCK, nullptr, &now);
    g_blocked_self = sigismember(&now, sig);
    g_blocked_usr1 = sigismember(&now, SIGUSR1);
    siglongjmp(g_jump, 1);
}

void on_plain(int) {
    g_hits = g_hits + 1;
    siglongjmp(g_jump, 1);
}

void on_return(int, siginfo_t* si, void*) {  // a sent signal: just note it
    g_hits = g_hits + 1;
    g_code = si->si_code;
}

std::string describe(int sig) {
    struct sigaction sa{};
    sigaction(sig, nullptr, &sa);
    const char* h = sa.sa_handler == SIG_DFL ? "SIG_DFL"
                    : sa.sa_handler == SIG_IGN ? "SIG_IGN"
                    : (sa.sa_flags & SA_SIGINFO) ? (sa.sa_sigaction == on_info ? "on_info" : sa.sa_sigaction == on_return ? "on_return" : "?")
                    : sa.sa_handler == on_plain ? "on_plain" : "?";
    char b[128];
    snprintf(b, sizeof b, "%s flags=0x%x mask(SEGV,USR1,USR2)=%d%d%d", h, static_cast<unsigned>(sa.sa_flags), sigismember(&sa.sa_mask, SIGSEGV),
             sigismember(&sa.sa_mask, SIGUSR1), sigismember(&sa.sa_mask, SIGUSR2));
    return b;
}

void touch(volatile char* p) { *p = 1; }

std::string fault_with(int sig, volatile char* where) {
    g_hits = 0;
    g_addr = nullptr;
    if (sigsetjmp(g_jump, 1) == 0) {
        touch(where);
        return "no fault";
    }
    char b[128];
    snprintf(b, sizeof b, "handler ran %d time(s), code=%d addr %s, self blocked=%d usr1 blocked=%d", static_cast<int>(g_hits), g_code,
             g_addr == nullptr ? "-" : g_addr == where ? "ok" : "WRONG", g_blocked_self, g_blocked_usr1);
    (void)sig;
    return b;
}

// Runs f in a child; reports how it ended.
template <class F>
std::string in_child(F f) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        rlimit no{0, 0};
        setrlimit(RLIMIT_CORE, &no);
        f();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) return std::string("killed by ") + sigabbrev_np(WTERMSIG(st));
    return "exited " + std::to_string(WEXITSTATUS(st));
}

void signal_cases() {
    Pages pg = pages();
    out("SIGSEGV at start", describe(SIGSEGV));
    out("SIGBUS at start", describe(SIGBUS));

    struct sigaction sa{};
    sa.sa_sigaction = on_info;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR1);
    struct sigaction old{};
    out("sigaction(SIGSEGV, on_info)", rc_str(sigaction(SIGSEGV, &sa, &old)));
    out("old", old.sa_handler == SIG_DFL ? "SIG_DFL" : "?");
    out("SIGSEGV now", describe(SIGSEGV));
    out("write to unmapped page", fault_with(SIGSEGV, pg.un));
    out("write to read-only page", fault_with(SIGSEGV, pg.ro));
    out("SIGSEGV after", describe(SIGSEGV));

    // A socket call with a bad buffer is EFAULT, never the handler.
    {
        Pair p = pair();
        send_all(p.s, "x", 1);
        wait_readable(p.c, 1);
        g_hits = 0;
        out("recv into unmapped, handler set", rc_str(recv(p.c, pg.un, 10, 0)) + " handler ran " + std::to_string(g_hits));
        out("byte still there", exact(p.c, 1));
        close_pair(p);
    }

    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK | 0x400;  // SA_UNSUPPORTED: the kernel reads it back as 0
    sigaction(SIGSEGV, &sa, nullptr);
    out("SIGSEGV with SA_NODEFER", describe(SIGSEGV));
    out("write to unmapped page", fault_with(SIGSEGV, pg.un));

    sighandler_t prev = signal(SIGSEGV, on_plain);
    out("signal(SIGSEGV, on_plain) returned", reinterpret_cast<void*>(prev) == reinterpret_cast<void*>(on_info) ? "on_info" : "?");
    out("SIGSEGV now", describe(SIGSEGV));
    out("write to unmapped page", fault_with(SIGSEGV, pg.un));

    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigaction(SIGSEGV, &sa, nullptr);
    out("SIGSEGV with SA_RESETHAND", describe(SIGSEGV));
    out("write to unmapped page", fault_with(SIGSEGV, pg.un));
    out("SIGSEGV after the one shot", describe(SIGSEGV));
    out("second fault", in_child([&] { touch(pg.un); }));

    prev = sysv_signal(SIGSEGV, on_plain);
    out("sysv_signal returned", prev == SIG_DFL ? "SIG_DFL" : "?");
    out("SIGSEGV now", describe(SIGSEGV));

    // A sent SIGSEGV reaches the handler with SI_TKILL/SI_USER and returns.
    sa.sa_sigaction = on_return;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
    g_hits = 0;
    raise(SIGSEGV);
    out("raise(SIGSEGV) with a handler", "handler ran " + std::to_string(g_hits) + " code=" + std::to_string(g_code));

    // SIGBUS: a page of a file past its end.
    char path[] = "/tmp/efault_check.XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    if (ftruncate(fd, 1) != 0) exit(2);
    char* fm = static_cast<char*>(mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
    sa.sa_sigaction = on_info;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, nullptr);
    out("SIGBUS now", describe(SIGBUS));
    out("write past a file's end", fault_with(SIGBUS, fm + kPage));
    {
        Pair p = pair();
        send_all(p.s, "y", 1);
        wait_readable(p.c, 1);
        g_hits = 0;
        out("recv past a file's end", rc_str(recv(p.c, fm + kPage, 10, 0)) + " handler ran " + std::to_string(g_hits));
        out("byte still there", exact(p.c, 1));
        close_pair(p);
    }
    signal(SIGBUS, SIG_DFL);
    out("SIGBUS with SIG_DFL", in_child([&] { touch(fm + kPage); }));
    munmap(fm, 2 * kPage);

    // Deaths, as without the shim.
    out("SIG_DFL, write to unmapped", in_child([&] {
            signal(SIGSEGV, SIG_DFL);
            touch(pg.un);
        }));
    out("SIG_IGN, write to unmapped", in_child([&] {
            signal(SIGSEGV, SIG_IGN);
            touch(pg.un);
        }));
    out("SIG_IGN, raise(SIGSEGV)", in_child([&] {
            signal(SIGSEGV, SIG_IGN);
            raise(SIGSEGV);
        }));
    out("SIG_DFL, raise(SIGSEGV)", in_child([&] {
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
        }));
    out("SIG_DFL, NULL dereference", in_child([&] {
            struct sigaction dfl{};
            dfl.sa_handler = SIG_DFL;
            sigaction(SIGSEGV, &dfl, nullptr);
            touch(static_cast<volatile char*>(nullptr));
        }));
    out("SIGSEGV after the children", describe(SIGSEGV));
    munmap(pg.base, 4 * kPage);
}

// A program that never set a handler: a NULL dereference kills it.
int null_deref_main() {
    rlimit no{0, 0};
    setrlimit(RLIMIT_CORE, &no);
    Pair p = pair();
    send_all(p.s, "z", 1);
    out("no handler: connection", exact(p.c, 1));
    close_pair(p);  // its statistics line says where it ran; the fault handler stays installed
    fflush(stdout);
    touch(static_cast<volatile char*>(nullptr));
    out("survived a NULL dereference", "WRONG");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    g_listen = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(g_listen, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(g_listen, 8)) return 2;
    if (argc > 1 && strcmp(argv[1], "null") == 0) return null_deref_main();
    recv_cases();
    send_cases();
    signal_cases();
    printf("cases %d\n", g_cases);
    return 0;
}
