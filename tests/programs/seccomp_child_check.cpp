// A forked child installs a seccomp filter (as OpenSSH's privilege-separated
// child does: sshd -r), then uses the server end it inherited, and closes it
// or just exits. The filter allows what such a sandbox allows a program that
// does I/O (read, write, close, shutdown, poll...) and kills the process for
// anything else. Over TCP the child exits 0 and every byte arrives. Under the
// shim the connection is handed to the kernel before the filter; what the shim
// does after it (closing its doorbells, side channels) must stay within that
// list: a getsockopt or ioctl there was a SIGSYS, and the stream was lost.
// tests/integration/seccomp_child.sh compares the transcript with plain TCP's.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "check_common.hpp"

namespace {

using check::die;

int g_listener = -1;

void pair(int& c, int& s) {
    sockaddr_in a{};
    socklen_t alen = sizeof a;
    if (getsockname(g_listener, reinterpret_cast<sockaddr*>(&a), &alen) != 0) die("getsockname");
    c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
    s = accept(g_listener, nullptr, nullptr);
    if (s < 0) die("accept");
    char b;
    for (int i = 0; i < 3; ++i) {  // under the shim: on the rings from here on
        if (send(s, "s", 1, 0) != 1 || recv(c, &b, 1, MSG_WAITALL) != 1) die("settle s->c");
        if (send(c, "c", 1, 0) != 1 || recv(s, &b, 1, MSG_WAITALL) != 1) die("settle c->s");
    }
}

// A sandbox's list (x86-64): what a network child needs, and nothing to ask
// the kernel about sockets with.
bool install_filter() {
#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        ALLOW(__NR_read), ALLOW(__NR_write), ALLOW(__NR_writev), ALLOW(__NR_close), ALLOW(__NR_shutdown),
        ALLOW(__NR_exit), ALLOW(__NR_exit_group), ALLOW(__NR_futex), ALLOW(__NR_brk), ALLOW(__NR_mmap),
        ALLOW(__NR_munmap), ALLOW(__NR_mremap), ALLOW(__NR_madvise), ALLOW(__NR_poll), ALLOW(__NR_ppoll),
        ALLOW(__NR_select), ALLOW(__NR_pselect6), ALLOW(__NR_rt_sigprocmask), ALLOW(__NR_getpid),
        ALLOW(__NR_getuid), ALLOW(__NR_geteuid), ALLOW(__NR_gettimeofday), ALLOW(__NR_clock_gettime),
        ALLOW(__NR_nanosleep), ALLOW(__NR_clock_nanosleep), ALLOW(__NR_getrandom), ALLOW(__NR_time),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
#undef ALLOW
    sock_fprog prog{static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0;
}

void run(const std::string& end) {
    std::printf("the child uses the server end under a seccomp filter, then %s:\n", end.c_str());
    int c = -1, s = -1;
    pair(c, s);
    if (send(c, "hello", 5, 0) != 5) die("send hello");
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        close(c);  // the parent's end: the child is the server, as sshd's
        if (!install_filter()) die("seccomp");
        char b[8];
        ssize_t n = read(s, b, 5);
        ssize_t w = write(s, "from child", 10);
        const bool ok = n == 5 && std::memcmp(b, "hello", 5) == 0 && w == 10;  // no printf: no race with the parent's lines
        if (end == "closes it") close(s);
        if (end == "shuts it down") shutdown(s, SHUT_WR);
        std::exit(ok ? 0 : 3);  // atexit and static destructors run under the filter too
    }
    char b[16];
    ssize_t n = recv(c, b, 10, MSG_WAITALL);
    std::printf("  the client end reads %zd \"%.*s\"\n", n, static_cast<int>(n > 0 ? n : 0), b);
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st)) std::printf("  the child read \"hello\", wrote 10 bytes and exited %d\n", WEXITSTATUS(st));
    else std::printf("  the child was killed by signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
    // The parent's copy of the server end goes on.
    if (end != "shuts it down") {
        if (send(s, "again", 5, 0) != 5) die("send again");
        n = recv(c, b, 5, MSG_WAITALL);
        std::printf("  and the connection goes on: %zd \"%.*s\"\n", n, static_cast<int>(n > 0 ? n : 0), b);
    } else {
        n = recv(c, b, sizeof b, 0);
        std::printf("  the client end reads %zd (EOF)\n", n);
    }
    close(c);
    close(s);
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    sockaddr_in a{};
    g_listener = check::listen_local(a);
    for (const char* end : {"closes it", "exits", "shuts it down"}) run(end);
    return 0;
}
