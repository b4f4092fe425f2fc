// A look-alike of a TCP connection in another network namespace (issue 38 item 4;
// tests/integration/netns_rendezvous.sh). Run in the namespace a server's thread moved
// to, as another user: it makes a loopback pair with the real connection's address
// pair (server 127.0.0.1:SPORT, client 127.0.0.1:CPORT), binds the side-channel name
// of its own client socket and answers the server's OFFER as a client shim would:
// ACCEPT with sealed rings of its own and a doorbell ring end.
//   netns_forger SPORT CPORT SECONDS
// Prints "ready", then one of: "confirmed" (the server took our rings: it would
// write root's stream where we read), "refused" (it closed the side channel), "no-offer".
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "shm/shm_channel.hpp"

using namespace rdmasock;

static int eventfd_like() { return eventfd(0, EFD_NONBLOCK); }

static sockaddr_in lo(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET, a.sin_port = htons(static_cast<uint16_t>(port)), a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

int main(int argc, char** argv) {
    if (argc < 4) return 2;
    const int sport = atoi(argv[1]), cport = atoi(argv[2]), secs = atoi(argv[3]);
    int one = 1;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa = lo(sport), ca = lo(cport);
    if (bind(l, (sockaddr*)&sa, sizeof sa) || listen(l, 4)) return perror("listener"), 1;
    int c = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(c, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(c, (sockaddr*)&ca, sizeof ca)) return perror("bind client"), 1;
    struct stat st{};
    fstat(c, &st);
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    int n = snprintf(un.sun_path + 1, sizeof un.sun_path - 1, "rdmasock/v2/tcp-inode/%lu", (unsigned long)st.st_ino);
    if (bind(u, (sockaddr*)&un, offsetof(sockaddr_un, sun_path) + 1 + n) || listen(u, 4)) return perror("side channel"), 1;
    if (connect(c, (sockaddr*)&sa, sizeof sa)) return perror("connect"), 1;
    int s = accept(l, nullptr, nullptr);
    (void)s;
    printf("ready\n");
    fflush(stdout);
    pollfd p{u, POLLIN, 0};
    if (poll(&p, 1, secs * 1000) <= 0) return printf("no-offer\n"), 0;
    int ch = accept(u, nullptr, nullptr);
    unsigned char offer[24];
    p = {ch, POLLIN, 0};
    poll(&p, 1, 5000);
    if (recv(ch, offer, sizeof offer, 0) != 24) return printf("refused\n"), 0;
    std::string err;
    auto rings = ShmChannel::create_sealed(1 << 16, err);
    if (!rings) return printf("cannot create rings: %s\n", err.c_str()), 1;
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
    unsigned char w[24] = {};
    uint32_t magic = 0x32565352;
    uint16_t version;
    memcpy(&version, offer + 4, 2);  // whatever the server speaks
    int32_t claimed = c;
    uint64_t ring = 1 << 16;
    memcpy(w, &magic, 4), memcpy(w + 4, &version, 2), w[6] = 2, memcpy(w + 8, &claimed, 4), memcpy(w + 16, &ring, 8);
    // v1: memfd + two eventfds; v2: memfd + a ring end
    int fds[3] = {rings->memfd_fd(), sv[1], sv[1]};
    const int nfds = version == 1 ? 3 : 2;
    if (version == 1) fds[1] = eventfd_like(), fds[2] = eventfd_like();
    iovec v{w, sizeof w};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 3)] = {};
    msghdr m{};
    m.msg_iov = &v, m.msg_iovlen = 1, m.msg_control = ctl, m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS, cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
    if (sendmsg(ch, &m, 0) != 24) return printf("refused (ACCEPT not sent: %s)\n", strerror(errno)), 0;
    p = {ch, POLLIN, 0};
    poll(&p, 1, 10000);
    unsigned char b = 0;
    if (recv(ch, &b, 1, 0) == 1 && b == 3) return printf("confirmed\n"), 0;
    printf("refused\n");
    return 0;
}
