// fork() while the same-host rendezvous is under way, at each step a program
// can stop at: the server forks after accept (before its first I/O, after it),
// the client forks after its ACCEPT went out (its next call answered the OFFER)
// but before it read the server's CONFIRM. Parent and child both use the
// socket, or the child closes it; every byte must arrive, as over TCP.
// tests/integration/fork_rendezvous.sh compares the transcript with TCP's.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "check_common.hpp"

namespace {

using check::die;
int g_listener = -1;

std::string read_n(int fd, size_t n) {
    std::string s(n, '\0');
    ssize_t r = recv(fd, s.data(), n, MSG_WAITALL);
    s.resize(r > 0 ? static_cast<size_t>(r) : 0);
    return s;
}

void run(const std::string& who, const std::string& act) {
    std::printf("the %s forks during the rendezvous, the child %s:\n", who.c_str(), act.c_str());
    sockaddr_in a{};
    socklen_t alen = sizeof a;
    if (getsockname(g_listener, reinterpret_cast<sockaddr*>(&a), &alen) != 0) die("getsockname");
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
    int s = accept(g_listener, nullptr, nullptr);
    if (s < 0) die("accept");
    // server's first I/O (its OFFER), the client's next call (its ACCEPT)
    if (send(s, "banner", 6, 0) != 6) die("send banner");
    if (read_n(c, 6) != "banner") die("read banner");
    int mine = who == "client" ? c : s, other = who == "client" ? s : c;
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        close(other);
        int ok = 0;
        if (act == "uses it") ok = send(mine, "from child", 10, 0) == 10;
        else ok = close(mine) == 0;
        _exit(ok ? 0 : 3);
    }
    // The parent drives the other end meanwhile (as a separate peer process would).
    std::string got;
    if (act == "uses it") got = read_n(other, 10);
    int st = 0;
    waitpid(pid, &st, 0);
    std::printf("  the other end reads \"%s\"; the child exited %d\n", got.c_str(), WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    for (int i = 0; i < 3; ++i) {
        if (send(mine, "ping", 4, 0) != 4) die("send ping");
        std::string p = read_n(other, 4);
        if (send(other, "pong", 4, 0) != 4) die("send pong");
        std::string q = read_n(mine, 4);
        std::printf("  parent: %s %s\n", p.c_str(), q.c_str());
    }
    close(c);
    close(s);
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    sockaddr_in a{};
    g_listener = check::listen_local(a);
    for (const char* who : {"server", "client"})
        for (const char* act : {"uses it", "closes it"}) run(who, act);
    return 0;
}
