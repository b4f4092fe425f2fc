// uring_check PORT: one connection in one process (both ends, so both shimmed
// under LD_PRELOAD), used first through libc (long enough for the shim to move
// it to shared memory), then through an io_uring set up with liburing, then
// through libc again. Prints a transcript: what each step moved and its
// checksum. Over TCP every step completes; a shim that left the connection on
// its ring would leave io_uring's reads waiting (a 5 s bound per completion)
// and the bytes io_uring wrote behind the ring's.
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

uint64_t checksum(const std::vector<char>& b) {
    uint64_t h = 1469598103934665603ull;
    for (char c : b) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return h;
}

std::vector<char> pattern(size_t n, int seed) {
    std::vector<char> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>((i * 131 + seed * 7) % 251);
    return b;
}

bool libc_all(int fd, char* p, size_t n, bool sending) {
    while (n > 0) {
        ssize_t r = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

// One io_uring send or recv, repeated until n bytes moved; false on an error,
// EOF or a completion that took over 5 s.
bool uring_all(io_uring& ring, int fd, char* p, size_t n, bool sending, const char** why) {
    while (n > 0) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (!sqe) return *why = "no sqe", false;
        if (sending) io_uring_prep_send(sqe, fd, p, n, MSG_NOSIGNAL);
        else io_uring_prep_recv(sqe, fd, p, n, 0);
        if (io_uring_submit(&ring) != 1) return *why = "submit failed", false;
        io_uring_cqe* cqe = nullptr;
        __kernel_timespec ts{5, 0};
        if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) != 0) return *why = "no completion within 5 s", false;
        const int r = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        if (r <= 0) return *why = r == 0 ? "EOF" : strerror(-r), false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: uring_check PORT\n");
        return 2;
    }
    setvbuf(stdout, nullptr, _IONBF, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(atoi(argv[1])));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 4) != 0) {
        perror("bind/listen");
        return 2;
    }
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        perror("connect");
        return 2;
    }
    int s = accept(l, nullptr, nullptr);
    // libc: request and answer, enough times for the same-host rendezvous.
    for (int i = 0; i < 8; ++i) {
        auto q = pattern(100 + i, i), r = std::vector<char>(q.size());
        bool ok = libc_all(c, q.data(), q.size(), true) && libc_all(s, r.data(), r.size(), false) &&
                  libc_all(s, r.data(), r.size(), true) && libc_all(c, q.data(), q.size(), false);
        printf("libc round %d: %s %zu bytes %016llx\n", i, ok ? "ok" : "FAILED", q.size(),
               static_cast<unsigned long long>(checksum(q)));
        if (!ok) return 1;
    }
    // Bytes the server wrote through libc just before the ring is set up, read through io_uring.
    auto early = pattern(70000, 9);
    libc_all(s, early.data(), early.size(), true);
    io_uring ring;
    int rc = io_uring_queue_init(8, &ring, 0);
    printf("io_uring_queue_init: %d\n", rc);
    if (rc != 0) return 1;
    const char* why = "";
    std::vector<char> got(early.size());
    bool ok = uring_all(ring, c, got.data(), got.size(), false, &why);
    printf("io_uring recv of what libc sent: %s %016llx\n", ok ? "ok" : why, static_cast<unsigned long long>(checksum(got)));
    // io_uring both ways.
    auto up = pattern(300000, 3), down = pattern(250000, 4);
    std::vector<char> up_got(up.size()), down_got(down.size());
    ok = uring_all(ring, c, up.data(), up.size(), true, &why) && uring_all(ring, s, up_got.data(), up_got.size(), false, &why);
    printf("io_uring up: %s %016llx\n", ok ? "ok" : why, static_cast<unsigned long long>(checksum(up_got)));
    ok = uring_all(ring, s, down.data(), down.size(), true, &why) &&
         uring_all(ring, c, down_got.data(), down_got.size(), false, &why);
    printf("io_uring down: %s %016llx\n", ok ? "ok" : why, static_cast<unsigned long long>(checksum(down_got)));
    // libc again, after io_uring wrote.
    auto last = pattern(5000, 5), last_got = std::vector<char>(last.size());
    ok = libc_all(c, last.data(), last.size(), true) && libc_all(s, last_got.data(), last_got.size(), false);
    printf("libc after io_uring: %s %016llx\n", ok ? "ok" : "FAILED", static_cast<unsigned long long>(checksum(last_got)));
    io_uring_queue_exit(&ring);
    close(c);
    char b;
    printf("EOF: %zd\n", recv(s, &b, 1, 0));
    close(s);
    close(l);
    return 0;
}
