// close() or exit() while another thread is blocked in send on a full
// connection. Over TCP neither waits: close returns at once (the send goes on,
// the kernel's FIN follows it), and exit ends the process (the peer reads what
// was sent, then EOF). The shim's close waited for the sending thread to let
// go of the connection, so a peer that reads only after the close (or the exit)
// never did, and neither process moved again. Prints what a program sees;
// tests/integration/close_while_sending.sh requires the same output over plain
// TCP and under the shim.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "check_common.hpp"

namespace {

constexpr size_t kBig = 8u << 20;  // more than any ring or socket buffer holds
unsigned char pattern(size_t i) { return static_cast<unsigned char>((i * 7 + 3) % 251); }

using check::die;

int g_sock = -1;
ssize_t g_sent = -2;

void* send_all(void*) {
    std::vector<unsigned char> big(kBig);
    for (size_t i = 0; i < big.size(); ++i) big[i] = pattern(i);
    g_sent = send(g_sock, big.data(), big.size(), MSG_NOSIGNAL);
    return nullptr;
}

// The peer: reads nothing until `go` says (a byte, or EOF when the client is
// gone), then everything up to EOF, and checks it is the pattern's prefix.
void peer(int listener, int go, bool whole) {
    int s = accept(listener, nullptr, nullptr);
    if (s < 0) die("accept");
    char c;
    for (int i = 0; i < 3; ++i)
        if (send(s, "s", 1, 0) != 1 || recv(s, &c, 1, MSG_WAITALL) != 1) die("settle");
    (void)!read(go, &c, 1);
    std::vector<unsigned char> got;
    unsigned char buf[65536];
    ssize_t n;
    while ((n = recv(s, buf, sizeof buf, 0)) > 0) got.insert(got.end(), buf, buf + n);
    bool prefix = n == 0;
    for (size_t i = 0; prefix && i < got.size(); ++i) prefix = got[i] == pattern(i);
    if (whole) std::printf("  peer: read %zu bytes of the pattern in order, then EOF: %s\n", got.size(), prefix ? "yes" : "NO");
    else std::printf("  peer: read a prefix of the pattern, then EOF: %s\n", prefix ? "yes" : "NO");
    std::exit(0);  // (the shim's statistics line for this end, at exit)
}

void client(const sockaddr_in& a, int go, bool by_exit) {
    g_sock = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(g_sock, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) die("connect");
    char c;
    for (int i = 0; i < 3; ++i)
        if (recv(g_sock, &c, 1, MSG_WAITALL) != 1 || send(g_sock, "c", 1, 0) != 1) die("settle");
    pthread_t t;
    pthread_create(&t, nullptr, send_all, nullptr);
    usleep(300000);  // the send fills the connection and waits
    if (by_exit) {
        std::printf("  client: exit while the send waits\n");
        std::fflush(stdout);
        std::exit(0);  // atexit handlers run (the shim's among them), the pipe closes with the process
    }
    std::printf("  client: close returned %d\n", close(g_sock));
    if (write(go, "g", 1) != 1) die("write go");
    pthread_join(t, nullptr);
    std::printf("  client: the send returned %zd\n", g_sent);
    std::fflush(stdout);
    _exit(0);
}

void run(bool by_exit) {
    std::printf("%s while another thread is blocked in send:\n", by_exit ? "exit()" : "close()");
    std::fflush(stdout);
    sockaddr_in a{};
    int listener = check::listen_local(a, 1);
    int go[2];
    if (pipe(go) != 0) die("pipe");
    const pid_t p = fork();
    if (p == 0) {
        close(go[1]);
        peer(listener, go[0], !by_exit);
    }
    close(go[0]);
    close(listener);
    const pid_t c = fork();
    if (c == 0) client(a, go[1], by_exit);
    close(go[1]);
    int st = 0;
    waitpid(c, &st, 0);
    waitpid(p, &st, 0);
}

// shutdown(SHUT_WR) with the connection full (nonblocking sends until EAGAIN)
// and a peer that reads only later: the peer reads everything, then EOF, and
// its reply still reaches this end. Over TCP the FIN waits behind the data;
// the shim's end-of-stream record did not fit a full ring and was dropped
// after a second: the peer read the bytes and then waited for good.
void shutdown_full() {
    std::printf("shutdown(SHUT_WR) on a full connection, the peer reads later:\n");
    std::fflush(stdout);
    sockaddr_in a{};
    int listener = check::listen_local(a, 1);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
    int s = accept(listener, nullptr, nullptr);
    char ch;
    for (int i = 0; i < 3; ++i)
        if (send(s, "s", 1, 0) != 1 || recv(c, &ch, 1, MSG_WAITALL) != 1 || send(c, "c", 1, 0) != 1 ||
            recv(s, &ch, 1, MSG_WAITALL) != 1)
            die("settle");
    std::vector<unsigned char> chunk(65536);
    size_t sent = 0;
    for (;;) {
        for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = pattern(sent + i);
        ssize_t n = send(c, chunk.data(), chunk.size(), MSG_DONTWAIT);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
    }
    std::printf("  client: filled, shutdown returned %d\n", shutdown(c, SHUT_WR));
    usleep(1500000);  // longer than the shim waited for room
    std::vector<unsigned char> got;
    unsigned char buf[65536];
    ssize_t n;
    while ((n = recv(s, buf, sizeof buf, 0)) > 0) got.insert(got.end(), buf, buf + n);
    bool same = n == 0 && got.size() == sent;
    for (size_t i = 0; same && i < got.size(); ++i) same = got[i] == pattern(i);
    std::printf("  peer: read every byte sent, in order, then EOF: %s\n", same ? "yes" : "NO");
    if (send(s, "bye", 3, 0) != 3) die("send bye");
    char b[4];
    n = recv(c, b, 3, MSG_WAITALL);
    std::printf("  client: still reads the peer's %zd bytes\n", n);
    close(c);
    close(s);
    close(listener);
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    run(false);
    run(true);
    shutdown_full();
    return 0;
}
