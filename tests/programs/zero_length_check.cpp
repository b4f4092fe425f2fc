// Zero-length reads and writes on a connected TCP socket, as the kernel answers
// them: read()/readv() of nothing return 0 at once (sock_read_iter), but
// recv()/recvmsg() of nothing ask the socket like any read (tcp_recvmsg): 0 when
// something is queued or the peer has finished, EAGAIN when nothing is and the
// call may not block, and a blocking one waits for data first. A program that
// loops "recv(fd, buf + got, want - got)" once past its want meets this: taking 0
// for the end of the stream ends its connection. Prints what a program sees; the
// integration test requires the same output over plain TCP and the shim.
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace {

int g_cmd = -1;  // to the peer process: 'b' send one byte, 'd' one byte in 300 ms, 's' shutdown(SHUT_WR)

void show(const char* what, long r) {
    if (r < 0) std::printf("%-58s -1 %s\n", what, strerrorname_np(errno));
    else std::printf("%-58s %ld\n", what, r);
}

void tell(char c) {
    if (write(g_cmd, &c, 1) != 1) _exit(3);
}

void set_nonblocking(int fd, bool on) {
    const int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

// Round trips so that under the shim the connection is on its transport.
void settle(int fd) {
    char b[64];
    for (int i = 0; i < 3; ++i) {
        tell('e');
        if (recv(fd, b, 1, MSG_WAITALL) != 1) _exit(4);
    }
}

void peer(int fd, int cmd) {
    char c;
    while (read(cmd, &c, 1) == 1) {
        if (c == 'e' || c == 'b') send(fd, "x", 1, MSG_NOSIGNAL);
        if (c == 'd') {
            usleep(300000);
            send(fd, "y", 1, MSG_NOSIGNAL);
        }
        if (c == 's') shutdown(fd, SHUT_WR);
    }
    close(fd);
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);  // write() after SHUT_WR: EPIPE, printed
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, reinterpret_cast<sockaddr*>(&a), &alen) != 0)
        return 2;
    int pipefd[2];
    if (pipe(pipefd) != 0) return 2;
    const pid_t child = fork();
    if (child == 0) {
        close(pipefd[1]);
        int fd = accept(ls, nullptr, nullptr);
        close(ls);
        peer(fd, pipefd[0]);
        _exit(0);
    }
    close(ls);
    close(pipefd[0]);
    g_cmd = pipefd[1];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 2;
    settle(fd);

    char buf[8];
    iovec none{buf, 0};
    msghdr mh{};
    mh.msg_iov = &none;
    mh.msg_iovlen = 1;
    set_nonblocking(fd, true);
    show("nonblocking recv(0), nothing queued:", recv(fd, buf, 0, 0));
    show("nonblocking recvmsg(0 bytes), nothing queued:", recvmsg(fd, &mh, 0));
    show("nonblocking recv(0, MSG_PEEK), nothing queued:", recv(fd, buf, 0, MSG_PEEK));
    show("nonblocking recv(0, MSG_WAITALL), nothing queued:", recv(fd, buf, 0, MSG_WAITALL));
    show("nonblocking read(0), nothing queued:", read(fd, buf, 0));
    show("nonblocking readv(0 bytes), nothing queued:", readv(fd, &none, 1));
    show("nonblocking readv(no iovec), nothing queued:", readv(fd, &none, 0));
    tell('b');
    usleep(200000);
    show("nonblocking recv(0), one byte queued:", recv(fd, buf, 0, 0));
    show("nonblocking recvmsg(0 bytes), one byte queued:", recvmsg(fd, &mh, 0));
    show("nonblocking recv(1), one byte queued:", recv(fd, buf, 1, 0));
    set_nonblocking(fd, false);
    show("recv(0, MSG_DONTWAIT), nothing queued:", recv(fd, buf, 0, MSG_DONTWAIT));
    tell('d');
    const auto t0 = std::chrono::steady_clock::now();
    const long r = recv(fd, buf, 0, 0);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    show("blocking recv(0), a byte comes in 300 ms:", r);
    std::printf("%-58s %s\n", "  ... it waited for the byte:", waited >= 0.15 ? "yes" : "no");
    show("recv(1):", recv(fd, buf, 1, 0));
    timeval tv{0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    show("recv(0) with a 200 ms SO_RCVTIMEO, nothing comes:", recv(fd, buf, 0, 0));
    timeval zero{0, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &zero, sizeof zero);
    show("send(0):", send(fd, buf, 0, MSG_NOSIGNAL));
    show("write(0):", write(fd, buf, 0));
    iovec out{buf, 0};
    msghdr om{};
    om.msg_iov = &out;
    om.msg_iovlen = 1;
    show("sendmsg(0 bytes):", sendmsg(fd, &om, MSG_NOSIGNAL));
    tell('s');
    usleep(200000);
    show("recv(0) after the peer's FIN:", recv(fd, buf, 0, 0));
    show("recv(1) after the peer's FIN:", recv(fd, buf, 1, 0));
    shutdown(fd, SHUT_WR);
    show("send(0) after our SHUT_WR:", send(fd, buf, 0, MSG_NOSIGNAL));
    show("write(0) after our SHUT_WR:", write(fd, buf, 0));
    close(g_cmd);
    close(fd);
    int st = 0;
    waitpid(child, &st, 0);
    return 0;
}
