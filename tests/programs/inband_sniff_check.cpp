// A plain client's first bytes reach a shimmed server's program unchanged and at
// once, whatever they are (issue 36 item 7). Two roles:
//
//   inband_sniff_check server N     echo server (run shimmed, or not): prints its
//                                   port, then echoes each of N connections, one
//                                   after the other, until the client closes
//   inband_sniff_check client PORT  plain client (never preloaded): per case, a
//                                   new connection sends the case's bytes and
//                                   prints what came back within the bound
//
// The cases: the byte 0xF7 alone (the first byte of the handshake magic), the
// magic alone, a complete HELLO (common/handshake.hpp's encoding, as a shimmed
// client sends it), and a HELLO followed by more bytes.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "check_common.hpp"
#include "negotiation/handshake.hpp"

namespace {

// The echo must come within this. A TCP echo on one host takes microseconds;
// the test runs the shimmed server with RDMASOCK_HANDSHAKE_TIMEOUT_MS=600000, so
// a server that reads these bytes as the start of a handshake holds them for ten
// minutes: the bound only ever fails on that bug, never on a slow machine.
constexpr int kBoundMs = 60000;

std::string hex(const std::vector<uint8_t>& b) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (uint8_t c : b) s += d[c >> 4], s += d[c & 15];
    return s.empty() ? "(nothing)" : s;
}

int serve(int n) {
    sockaddr_in a;
    int l = check::listen_local(a);
    std::printf("%d\n", ntohs(a.sin_port));
    std::fflush(stdout);
    // A child per connection (the accepting parent never reads, as a postmaster):
    // each case stands alone, whatever another one's bytes did to its server.
    for (int i = 0; i < n; ++i) {
        int s = accept(l, nullptr, nullptr);
        if (s < 0) check::die("accept");
        std::fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) check::die("fork");
        if (pid > 0) {
            close(s);
            continue;
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // a server killed by the test takes its children along
        close(l);
        char buf[4096];
        for (;;) {
            ssize_t r = read(s, buf, sizeof buf);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            for (ssize_t off = 0; off < r;) {
                ssize_t w = write(s, buf + off, static_cast<size_t>(r - off));
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) check::die("server write");
                off += w;
            }
        }
        close(s);
        _exit(0);
    }
    close(l);
    int failed = 0;
    for (int i = 0; i < n; ++i) {
        int st = 0;
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failed;
    }
    return failed ? 1 : 0;
}

// Sends `bytes` on a new connection and collects the echo: as many bytes as were
// sent, or what came before the bound or the server's close.
void one_case(int port, const char* name, const std::vector<uint8_t>& bytes) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) check::die("connect");
    if (write(c, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) check::die("client write");
    std::vector<uint8_t> got;
    bool in_time = true;
    while (got.size() < bytes.size()) {
        pollfd p{c, POLLIN, 0};
        int r = poll(&p, 1, kBoundMs);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) {
            in_time = false;
            break;
        }
        uint8_t buf[2048];
        ssize_t n = read(c, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got.insert(got.end(), buf, buf + n);
    }
    std::printf("%-16s sent %s\n%-16s got  %s%s\n", name, hex(bytes).c_str(), "", hex(got).c_str(),
                in_time ? "" : " (no echo within the bound)");
    std::fflush(stdout);
    close(c);
}

int client(int port) {
    using namespace rdmasock;
    handshake::Message m;
    m.type = handshake::Type::hello;
    m.offers = handshake::kOfferRdma;
    m.uid = 1000;
    m.ring_bytes = 1 << 20;
    const std::vector<uint8_t> hello = handshake::encode(m);
    std::vector<uint8_t> more = hello;
    for (char ch : std::string("GET / HTTP/1.0\r\n\r\n")) more.push_back(static_cast<uint8_t>(ch));
    one_case(port, "0xF7 alone", {0xF7});
    one_case(port, "magic alone", std::vector<uint8_t>(handshake::kMagic, handshake::kMagic + sizeof handshake::kMagic));
    one_case(port, "HELLO", hello);
    one_case(port, "HELLO and more", more);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "server") return serve(std::atoi(argv[2]));
    if (argc == 3 && std::string(argv[1]) == "client") return client(std::atoi(argv[2]));
    std::fprintf(stderr, "usage: inband_sniff_check server N | client PORT\n");
    return 2;
}
