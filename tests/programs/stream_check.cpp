// A plain TCP program (no shim code) used by the integration tests under
// LD_PRELOAD: an echo server, and a client whose writer and reader threads
// stream a deterministic byte sequence both ways at once and check every byte.
//
//   stream_check serve PORT                    echo one connection, then exit
//   stream_check send PORT BYTES [CHUNK]       client; exit 0 iff every byte came back
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

uint8_t byte_at(uint64_t i) { return static_cast<uint8_t>((i * 2654435761u) >> 13); }

int listen_on(int port) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 3 && std::string(argv[1]) == "serve") return serve(atoi(argv[2]));
    if (argc >= 4 && std::string(argv[1]) == "send")
        return send_and_check(atoi(argv[2]), strtoull(argv[3], nullptr, 10), argc >= 5 ? strtoul(argv[4], nullptr, 10) : 100000);
    fprintf(stderr, "usage: stream_check serve PORT | send PORT BYTES [CHUNK]\n");
    return 2;
}
