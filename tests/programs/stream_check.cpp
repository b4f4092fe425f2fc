// A plain TCP program (no shim code) used by the integration tests under
// LD_PRELOAD: an echo server, and a client whose writer and reader threads
// stream a deterministic byte sequence both ways at once and check every byte.
//
//   stream_check serve PORT                    echo one connection, then exit
//   stream_check send PORT BYTES [CHUNK]       client; exit 0 iff every byte came back
//   stream_check pingpong PORT ROUNDS          client: random-size round trips with random
//                                              pauses on both sides (the sleep/wake race);
//                                              fails on a wrong byte or a round trip > 10 s
//   stream_check pause-echo PORT               server for pingpong: echoes after random pauses
// STREAM_CHECK_ADDR=IPv4 replaces the loopback address on both sides.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

// STREAM_CHECK_ADDR: the IPv4 address to listen on / connect to (default
// loopback; the RDMA VM tests use the test network's addresses).
in_addr_t test_addr() {
    const char* a = getenv("STREAM_CHECK_ADDR");
    in_addr_t v = a ? inet_addr(a) : htonl(INADDR_LOOPBACK);
    return v == INADDR_NONE ? htonl(INADDR_LOOPBACK) : v;
}

uint8_t byte_at(uint64_t i) { return static_cast<uint8_t>((i * 2654435761u) >> 13); }

int listen_on(int port) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = test_addr();
    if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(l, 8)) {
        perror("bind/listen");
        exit(2);
    }
    return l;
}

int connect_to(int port) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = test_addr();
    for (int i = 0; connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0; ++i) {
        if (i > 300) {
            perror("connect");
            exit(2);
        }
        usleep(10000);
    }
    return c;
}

int serve(int port) {
    int l = listen_on(port);
    int s = accept(l, nullptr, nullptr);
    close(l);
    std::vector<char> buf(65536);
    for (;;) {
        ssize_t n = recv(s, buf.data(), buf.size(), 0);
        if (n == 0) break;
        if (n < 0) {
            perror("server recv");
            return 1;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = send(s, buf.data() + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
            if (w < 0) {
                perror("server send");
                return 1;
            }
            off += w;
        }
    }
    close(s);
    return 0;
}

int send_and_check(int port, uint64_t total, size_t chunk) {
    int c = connect_to(port);
    bool ok = true;
    uint64_t received = 0;
    std::thread reader([&] {
        std::vector<uint8_t> buf(70000);
        for (;;) {
            size_t want = 1 + static_cast<size_t>(rand()) % buf.size();
            ssize_t n = recv(c, buf.data(), want, 0);
            if (n == 0) break;
            if (n < 0) {
                perror("client recv");
                ok = false;
                break;
            }
            for (ssize_t i = 0; i < n; ++i)
                if (buf[static_cast<size_t>(i)] != byte_at(received + static_cast<uint64_t>(i))) {
                    fprintf(stderr, "mismatch at byte %llu\n", static_cast<unsigned long long>(received + i));
                    ok = false;
                    break;
                }
            received += static_cast<uint64_t>(n);
            if (!ok) break;
        }
    });
    std::vector<uint8_t> out(chunk);
    for (uint64_t sent = 0; sent < total && ok;) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, total - sent));
        for (size_t i = 0; i < n; ++i) out[i] = byte_at(sent + i);
        for (size_t off = 0; off < n;) {
            ssize_t w = send(c, out.data() + off, n - off, MSG_NOSIGNAL);
            if (w < 0) {
                fprintf(stderr, "client send after %llu bytes: %s\n", static_cast<unsigned long long>(sent + off),
                        strerror(errno));
                ok = false;
                break;
            }
            off += static_cast<size_t>(w);
        }
        sent += n;
    }
    shutdown(c, SHUT_WR);
    reader.join();
    close(c);
    if (received != total) {
        fprintf(stderr, "received %llu of %llu bytes\n", static_cast<unsigned long long>(received),
                static_cast<unsigned long long>(total));
        ok = false;
    }
    printf("%s %llu bytes\n", ok ? "ok" : "FAILED", static_cast<unsigned long long>(received));
    return ok ? 0 : 1;
}

// Pauses of 0-200 us around the spin budget, so waits end sometimes while
// spinning and sometimes after sleeping in the kernel.
void random_pause(unsigned& seed) {
    unsigned r = rand_r(&seed) % 8;
    if (r < 3) return;
    if (r < 6) {
        auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(rand_r(&seed) % 60);
        while (std::chrono::steady_clock::now() < end) {}
    } else {
        usleep(rand_r(&seed) % 200);
    }
}

bool read_full(int fd, uint8_t* p, size_t n) {
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EAGAIN) {  // SO_RCVTIMEO expired: was the data there all along?
            int avail = -1;
            ioctl(fd, FIONREAD, &avail);
            pollfd pf{fd, POLLIN, 0};
            int pr = poll(&pf, 1, 0);
            fprintf(stderr, "stalled 3 s waiting for %zu bytes: FIONREAD=%d poll=%d revents=0x%x\n", n, avail, pr, pf.revents);
            continue;
        }
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

int pause_echo(int port) {
    int l = listen_on(port);
    int s = accept(l, nullptr, nullptr);
    close(l);
    unsigned seed = 7;
    uint8_t len;
    uint8_t buf[256];
    while (read_full(s, &len, 1) && read_full(s, buf, len)) {
        random_pause(seed);
        if (send(s, &len, 1, MSG_NOSIGNAL) != 1 || send(s, buf, len, MSG_NOSIGNAL) != len) return 1;
    }
    close(s);
    return 0;
}

int pingpong(int port, uint64_t rounds) {
    int c = connect_to(port);
    timeval tv{3, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    unsigned seed = 11;
    uint8_t buf[256], back[256];
    double worst = 0;
    for (uint64_t i = 0; i < rounds; ++i) {
        uint8_t len = static_cast<uint8_t>(1 + rand_r(&seed) % 200);
        for (int k = 0; k < len; ++k) buf[k] = byte_at(i * 256 + k);
        auto t0 = std::chrono::steady_clock::now();
        uint8_t got_len = 0;
        if (send(c, &len, 1, MSG_NOSIGNAL) != 1 || send(c, buf, len, MSG_NOSIGNAL) != len || !read_full(c, &got_len, 1) ||
            got_len != len || !read_full(c, back, len) || memcmp(buf, back, len) != 0) {
            fprintf(stderr, "round %llu: wrong or missing bytes\n", static_cast<unsigned long long>(i));
            return 1;
        }
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        worst = std::max(worst, s);
        if (s > 10) {  // a liveness bound, not a speed check: a lost wake-up never returns
            fprintf(stderr, "round %llu took %.1f s\n", static_cast<unsigned long long>(i), s);
            return 1;
        }
        random_pause(seed);
    }
    close(c);
    printf("ok %llu round trips, slowest %.3f ms\n", static_cast<unsigned long long>(rounds), worst * 1000);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 3 && std::string(argv[1]) == "serve") return serve(atoi(argv[2]));
    if (argc >= 4 && std::string(argv[1]) == "send")
        return send_and_check(atoi(argv[2]), strtoull(argv[3], nullptr, 10), argc >= 5 ? strtoul(argv[4], nullptr, 10) : 100000);
    if (argc >= 4 && std::string(argv[1]) == "pingpong") return pingpong(atoi(argv[2]), strtoull(argv[3], nullptr, 10));
    if (argc >= 3 && std::string(argv[1]) == "pause-echo") return pause_echo(atoi(argv[2]));
    fprintf(stderr, "usage: stream_check serve PORT | send PORT BYTES [CHUNK] | pingpong PORT ROUNDS | pause-echo PORT\n");
    return 2;
}
