#include "shm/registry.hpp"
#include "sys/kernel_calls.hpp"
#include "sys/own_fd.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstddef>
#include <algorithm>
#include <cstring>

namespace rdmasock::registry {

namespace {

socklen_t entry_name(uint16_t port, sockaddr_un& a) {
    std::memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int n = std::snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "rdmasock/tcp/%u", port);
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

bool is_loopback(const sockaddr* a) {
    if (a->sa_family == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
    if (a->sa_family == AF_INET6) {
        const auto& s6 = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(&s6)) return true;
        if (IN6_IS_ADDR_V4MAPPED(&s6)) return s6.s6_addr[12] == 127;
    }
    return false;
}

}  // namespace

int publish(uint16_t port) {
    int fd = kernel::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_un a;
    socklen_t len = entry_name(port, a);
    if (kernel::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
        close_own_fd(fd);  // EADDRINUSE: another shimmed listener already published it
        return -1;
    }
    return adopt_own_fd(fd);
}

bool is_published(uint16_t port) {
    int fd = kernel::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_un a;
    socklen_t len = entry_name(port, a);
    int saved = errno;
    // connect() only looks: probing by bind() would itself occupy the name for an
    // instant, and a concurrent client could take that for a shimmed listener.
    bool taken = kernel::connect(fd, reinterpret_cast<sockaddr*>(&a), len) == 0;
    close_own_fd(fd);
    errno = saved;
    return taken;
}

bool same_host(const sockaddr* peer, socklen_t len) {
    if (!peer || len < sizeof(sockaddr_in) || (peer->sa_family != AF_INET && peer->sa_family != AF_INET6)) return false;
    if (is_loopback(peer)) return true;
    // An address we can bind to is one of ours.
    int fd = kernel::socket(peer->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_storage probe{};
    std::memcpy(&probe, peer, std::min<size_t>(len, sizeof probe));
    if (probe.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&probe)->sin_port = 0;
    else reinterpret_cast<sockaddr_in6*>(&probe)->sin6_port = 0;
    int saved = errno;
    bool local = kernel::bind(fd, reinterpret_cast<sockaddr*>(&probe), len) == 0;
    close_own_fd(fd);
    errno = saved;
    return local;
}

uint16_t port_of(const sockaddr* addr, socklen_t len) {
    if (!addr) return 0;
    if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in))
        return ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
    if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6))
        return ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
    return 0;
}

}  // namespace rdmasock::registry
