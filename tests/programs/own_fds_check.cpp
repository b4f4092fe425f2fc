// A process that closes every fd it did not keep (a daemon's closefrom, a
// loop over every number, close_range in a worker) and then goes on using the
// socket it kept. Over TCP that socket is all the connection needs. Under the
// shim a connection on shared memory also holds fds of the shim's own (its
// doorbells; an epoll set's eventfd): such a program closed them, its next open
// got one of their numbers, and the shim then wrote its wake-ups into the
// program's file and slept on it. Prints what a program sees; the fd counts
// take the shim's fds for numbers the program never opened (EBADF), as the
// kernel does without the shim. tests/integration/own_fds.sh requires the same
// output over plain TCP and under the shim.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "check_common.hpp"

namespace {

constexpr int kMessages = 200;

using check::die;

enum class Sweep { close_loop, close_range, closefrom };
const char* name(Sweep s) {
    switch (s) {
    case Sweep::close_loop: return "close() on every number";
    case Sweep::close_range: return "close_range() around the socket";
    case Sweep::closefrom: return "dup2 onto 3, then closefrom(4)";
    }
    return "";
}

int open_max() { return static_cast<int>(std::min(sysconf(_SC_OPEN_MAX), 1L << 17)); }

// Closes every fd above 2 but `keep` and `keep2` (-1: none); returns the
// number `keep` has afterwards. Prints how many closes found an open fd.
int sweep(Sweep how, int keep, int keep2) {
    switch (how) {
    case Sweep::close_loop: {
        int closed = 0;
        for (int fd = 3; fd < open_max(); ++fd)
            if (fd != keep && fd != keep2 && close(fd) == 0) ++closed;
        std::printf("  %s: %d fds were open\n", name(how), closed);
        return keep;
    }
    case Sweep::close_range: {
        const int lo = std::min(keep, keep2 < 0 ? keep : keep2), hi = std::max(keep, keep2);
        int r = 0;
        if (lo > 3) r |= close_range(3, static_cast<unsigned>(lo) - 1, 0);
        if (hi > lo + 1) r |= close_range(static_cast<unsigned>(lo) + 1, static_cast<unsigned>(hi) - 1, 0);
        r |= close_range(static_cast<unsigned>(hi) + 1, ~0U, 0);
        std::printf("  %s: returned %d\n", name(how), r);
        return keep;
    }
    case Sweep::closefrom: {
        // (keep2 is not used with this sweep)
        if (keep != 3 && (dup2(keep, 3) != 3 || close(keep) != 0)) die("dup2");
        closefrom(4);
        int still = 0;  // what the program can see of its own: 0..3
        for (int fd = 4; fd < open_max(); ++fd) {
            errno = 0;
            if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) ++still;
        }
        std::printf("  %s: closefrom left %d fds the program can reach above 3\n", name(how), still);
        return 3;
    }
    }
    return keep;
}

// A file the program opens after the sweep: the lowest free number, which a
// closed doorbell had. It must hold exactly what the program wrote.
struct Witness {
    int fd = memfd_create("own-fds-witness", 0);
    void note() {
        if (write(fd, "x", 1) != 1) die("witness write");
    }
    void report(const char* who) {
        struct stat st {};
        bool exact = fstat(fd, &st) == 0 && st.st_size == kMessages;
        char buf[kMessages + 16];
        exact = exact && pread(fd, buf, sizeof buf, 0) == kMessages;
        for (int i = 0; exact && i < kMessages; ++i) exact = buf[i] == 'x';
        std::printf("  %s: its file holds exactly what it wrote: %s\n", who, exact ? "yes" : "NO");
    }
};

// Three round trips, the client first (over rdma the offer rides on the
// client's first bytes; a server that speaks first keeps the connection on TCP).
void settle(int s, bool first) {
    char c;
    for (int i = 0; i < 3; ++i) {
        if (first && send(s, "s", 1, 0) != 1) die("settle send");
        if (recv(s, &c, 1, MSG_WAITALL) != 1) die("settle recv");
        if (!first && send(s, "c", 1, 0) != 1) die("settle send");
    }
}

// Echoes kMessages messages of growing size; with `ep`, waits for each
// through poll on the epoll fd and then epoll_wait (the set is exposed).
void echo(int s, int ep, Witness& w) {
    char buf[256];
    for (int i = 0; i < kMessages; ++i) {
        const size_t len = 1 + static_cast<size_t>(i) % 200;
        if (ep >= 0) {
            pollfd p{ep, POLLIN, 0};
            epoll_event ev{};
            if (poll(&p, 1, 60000) != 1 || epoll_wait(ep, &ev, 1, 60000) != 1) die("wait on the epoll set");
        }
        if (recv(s, buf, len, MSG_WAITALL) != static_cast<ssize_t>(len)) die("echo recv");
        if (send(s, buf, len, 0) != static_cast<ssize_t>(len)) die("echo send");
        w.note();
    }
}

// Sends kMessages messages and checks each echo.
bool drive(int s, Witness* w) {
    char out[256], in[256];
    bool same = true;
    for (int i = 0; i < kMessages; ++i) {
        const size_t len = 1 + static_cast<size_t>(i) % 200;
        for (size_t j = 0; j < len; ++j) out[j] = static_cast<char>('a' + (i + j) % 26);
        if (send(s, out, len, 0) != static_cast<ssize_t>(len)) die("drive send");
        if (recv(s, in, len, MSG_WAITALL) != static_cast<ssize_t>(len)) die("drive recv");
        same = same && memcmp(out, in, len) == 0;
        if (w) w->note();
    }
    return same;
}

// One case: the server (sweeper_is_server) or the client closes every fd but
// its socket after the connection settled, then they exchange kMessages
// messages and the client closes; the server reads EOF.
void run(Sweep how, bool sweeper_is_server, bool with_epoll) {
    std::printf("%s by the %s%s:\n", name(how), sweeper_is_server ? "server" : "client",
                with_epoll ? ", which waits through an epoll set" : "");
    std::fflush(stdout);
    sockaddr_in a{};
    int listener = check::listen_local(a, 1);
    const pid_t server = fork();
    if (server == 0) {
        int s = accept(listener, nullptr, nullptr);
        if (s < 0) die("accept");
        close(listener);
        settle(s, false);
        int ep = -1;
        if (with_epoll) {
            ep = epoll_create1(0);
            epoll_event ev{EPOLLIN, {}};
            ev.data.fd = s;
            if (epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) != 0) die("epoll_ctl");
            pollfd p{ep, POLLIN, 0};
            (void)poll(&p, 1, 0);  // exposes the set: the shim gives it an eventfd
        }
        if (sweeper_is_server) s = sweep(how, s, ep);
        if (with_epoll && how == Sweep::closefrom) die("closefrom with an epoll set");
        Witness w;
        echo(s, ep, w);
        char c;
        std::printf("  server: after the echoes, recv returns %zd (EOF)\n", recv(s, &c, 1, 0));
        if (sweeper_is_server) w.report("server");
        std::fflush(stdout);
        std::exit(0);  // (the shim's statistics line for this end, at exit)
    }
    close(listener);
    const pid_t client = fork();
    if (client == 0) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
        settle(s, true);
        if (!sweeper_is_server) s = sweep(how, s, -1);
        Witness w;
        bool same = drive(s, &w);
        std::printf("  client: %d echoes equal to what it sent: %s\n", kMessages, same ? "yes" : "NO");
        if (!sweeper_is_server) w.report("client");
        std::fflush(stdout);
        close(s);
        std::exit(0);
    }
    int st = 0;
    waitpid(client, &st, 0);
    waitpid(server, &st, 0);
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    run(Sweep::close_loop, true, false);
    run(Sweep::close_loop, true, true);
    run(Sweep::close_loop, false, false);
    run(Sweep::close_range, true, true);
    run(Sweep::close_range, false, false);
    run(Sweep::closefrom, true, false);
    run(Sweep::closefrom, false, false);
    return 0;
}
