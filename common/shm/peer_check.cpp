#include "shm/peer_check.hpp"
#include "sys/exec_image.hpp"
#include "sys/kernel_calls.hpp"
#include "sys/own_fd.hpp"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>

namespace rdmasock::peer_check {

namespace {

// Fills a diag endpoint from an address; the port in network order as the kernel wants.
bool fill(const sockaddr_storage& a, __be16& port, __be32 (&addr)[4], int& family) {
    std::memset(addr, 0, sizeof addr);
    if (a.ss_family == AF_INET) {
        auto& s = reinterpret_cast<const sockaddr_in&>(a);
        port = s.sin_port;
        addr[0] = s.sin_addr.s_addr;
        family = AF_INET;
        return true;
    }
    if (a.ss_family == AF_INET6) {
        auto& s = reinterpret_cast<const sockaddr_in6&>(a);
        port = s.sin6_port;
        std::memcpy(addr, &s.sin6_addr, 16);
        family = AF_INET6;
        return true;
    }
    return false;
}

}  // namespace

bool find_socket(const sockaddr_storage& src, const sockaddr_storage& dst, SocketId& out, std::string& err,
                 bool* queued) {
    if (queued) *queued = false;
    struct {
        nlmsghdr nlh;
        inet_diag_req_v2 req;
    } msg{};
    int fam_src = 0, fam_dst = 0;
    if (!fill(src, msg.req.id.idiag_sport, msg.req.id.idiag_src, fam_src) ||
        !fill(dst, msg.req.id.idiag_dport, msg.req.id.idiag_dst, fam_dst) || fam_src != fam_dst)
        return err = "not an IP address pair", false;
    msg.nlh.nlmsg_len = sizeof msg;
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST;  // an exact lookup, not a dump
    msg.req.sdiag_family = static_cast<uint8_t>(fam_src);
    msg.req.sdiag_protocol = IPPROTO_TCP;
    msg.req.idiag_states = ~0u;
    msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

    int saved = errno;
    int nl = kernel::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0) {
        err = std::string("sock_diag socket: ") + strerror(errno);
        errno = saved;
        return false;
    }
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    bool ok = false;
    // The kernel's call, not the shim's interposer (which would look the number up
    // in the program's fd table).
    if (kernel::sendto(nl, &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) == sizeof msg) {
        alignas(nlmsghdr) char buf[1024];
        ssize_t n = kernel::recv(nl, buf, sizeof buf, 0);
        auto* h = reinterpret_cast<nlmsghdr*>(buf);
        if (n >= static_cast<ssize_t>(sizeof(nlmsghdr)) && NLMSG_OK(h, static_cast<unsigned>(n))) {
            if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY && h->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
                auto* m = static_cast<inet_diag_msg*>(NLMSG_DATA(h));
                out.inode = m->idiag_inode;
                out.uid = m->idiag_uid;
                ok = out.inode != 0;
                // No inode: no process holds it. Not accepted yet (still established
                // in the accept queue, or closed there by its client), or an orphan.
                const bool in_queue = m->idiag_state == TCP_ESTABLISHED || m->idiag_state == TCP_SYN_RECV;
                if (!ok && in_queue) err = "the server has not accepted the connection yet";
                else if (!ok) err = "the peer closed before the switch";  // an orphan socket (FIN_WAIT, TIME_WAIT)
                if (!ok && queued) *queued = in_queue;
            } else if (h->nlmsg_type == NLMSG_ERROR) {
                auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
                err = std::string("sock_diag: ") + strerror(-e->error);
            } else {
                err = "sock_diag: unexpected answer";
            }
        } else {
            err = "sock_diag: short answer";
        }
    } else {
        err = std::string("sock_diag request: ") + strerror(errno);
    }
    close_own_fd(nl);
    errno = saved;
    return ok;
}

uint64_t inode_of(int fd) {
    struct stat st {};
    int saved = errno;
    uint64_t ino = kernel::fstat(fd, &st) == 0 ? st.st_ino : 0;
    errno = saved;
    return ino;
}

bool holds(pid_t pid, uid_t uid, int claimed_fd, const SocketId& expected, bool same_user_only, std::string& why) {
    if (pid <= 0) return why = "no sender credentials", false;
    if (uid != expected.uid) return why = "the sender does not own the peer socket (uid " + std::to_string(uid) + ", socket uid " + std::to_string(expected.uid) + ")", false;
    if (same_user_only && uid != geteuid()) return why = "the peer is another user (RDMASOCK_SHM_USERS=same)", false;
    if (claimed_fd < 0) return why = "no socket fd claimed", false;
    char path[64], link[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(pid), claimed_fd);
    int saved = errno;
    ssize_t n = ::readlink(path, link, sizeof link - 1);
    int e = errno;
    errno = saved;
    if (n < 0) {
        // Another user's process: /proc hides its fds from us; the uid check stands.
        if (e == EACCES || e == EPERM) return true;
        if (e == ENOENT || e == ESRCH) return why = "the peer closed before the switch", false;
        return why = std::string("cannot see the sender's socket: ") + strerror(e), false;
    }
    link[n] = 0;
    char want[64];
    std::snprintf(want, sizeof want, "socket:[%llu]", static_cast<unsigned long long>(expected.inode));
    if (std::strcmp(link, want) != 0) return why = "the sender does not hold the peer socket", false;
    return true;
}

namespace {

// The entries of a /proc directory, by getdents64 (no libc DIR: its calls may
// be the program's interposed ones); `each` returns false to stop.
template <class Each>
bool each_entry(const char* dir, Each each) {
    const int d = kernel::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) return false;
    alignas(8) char buf[4096];
    bool go = true;
    while (go) {
        const long n = raw_syscall(SYS_getdents64, d, buf, sizeof buf);
        if (n <= 0) break;
        for (long off = 0; off < n && go;) {
            struct Dirent {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            };
            auto* e = reinterpret_cast<Dirent*>(buf + off);
            off += e->reclen;
            if (e->name[0] >= '0' && e->name[0] <= '9') go = each(e->name);
        }
    }
    kernel::close(d);
    return true;
}

// Whether /proc link text `link` (`len` bytes) names socket `inode`.
bool names_socket(const char* link, ssize_t len, uint64_t inode) {
    char want[48];
    const int n = std::snprintf(want, sizeof want, "socket:[%llu]", static_cast<unsigned long long>(inode));
    return len == n && std::memcmp(link, want, static_cast<size_t>(n)) == 0;
}

// Calls on_fd(fd) for each descriptor of process `pid` (0: this one, through
// /proc/self) that names socket `inode`, until it returns false. False when
// the fd table cannot be read (another user's process, or one that is not dumpable).
template <class OnFd>
bool each_descriptor_naming(pid_t pid, uint64_t inode, OnFd on_fd) {
    char dir[48];
    if (pid == 0) std::snprintf(dir, sizeof dir, "/proc/self/fd");
    else std::snprintf(dir, sizeof dir, "/proc/%d/fd", static_cast<int>(pid));
    return each_entry(dir, [&](const char* name) {
        char path[96], link[64];
        std::snprintf(path, sizeof path, "%s/%s", dir, name);
        if (!names_socket(link, kernel::readlink(path, link, sizeof link - 1), inode)) return true;
        return on_fd(std::strtoul(name, nullptr, 10));
    });
}

// How many of process `pid`'s descriptors name socket `inode`, counting up
// to `enough`; -1 when its fd table cannot be read.
int count_socket(pid_t pid, uint64_t inode, int enough) {
    int found = 0;
    const bool read = each_descriptor_naming(pid, inode, [&](unsigned long) { return ++found < enough; });
    return read || found > 0 ? found : -1;
}

}  // namespace

int descriptors_left_after(uint64_t inode, unsigned first, unsigned last, int* inside) {
    *inside = -1;
    if (inode == 0) return 0;
    const int saved = errno;
    int left = 0;
    const bool read = each_descriptor_naming(0, inode, [&](unsigned long fd) {
        if (fd >= first && fd <= last) *inside = static_cast<int>(fd);
        else ++left;
        return left < 2 || *inside < 0;
    });
    errno = saved;
    return read ? std::min(left, 2) : -1;
}

int descriptors_here(uint64_t inode) {
    if (inode == 0) return 0;
    const int saved = errno;
    const int n = count_socket(kernel::getpid(), inode, 2);
    errno = saved;
    return n;
}

bool holds_socket(pid_t pid, uint64_t inode) {
    if (pid <= 0 || inode == 0) return false;
    const int saved = errno;
    const bool held = count_socket(pid, inode, 1) > 0;
    errno = saved;
    return held;
}

bool held_only_here(uint64_t inode) {
    if (inode == 0) return false;
    const int saved = errno;
    const pid_t self = kernel::getpid();
    const uid_t me = geteuid();
    bool alone = true;
    const bool listed = each_entry("/proc", [&](const char* name) {
        const pid_t pid = static_cast<pid_t>(std::atol(name));
        if (pid == self) return true;
        const int held = count_socket(pid, inode, 1);
        if (held > 0) return alone = false;
        if (held < 0) {
            // A process of our user whose table we may not read (not dumpable)
            // may hold it; one of another user may not: the socket reaches
            // another user only through an exec or SCM_RIGHTS, whose hand-over
            // takes the connection off the rings first. Gone meanwhile: not a holder.
            char path[32];
            std::snprintf(path, sizeof path, "/proc/%d", static_cast<int>(pid));
            struct stat st {};
            if (kernel::stat(path, &st) == 0 && st.st_uid == me) return alone = false;
        }
        return true;
    });
    errno = saved;
    return listed && alone;
}

}  // namespace rdmasock::peer_check

namespace rdmasock::peer_check {

bool loads_shim(pid_t pid) {
    if (pid <= 0) return false;
    char path[48];
    std::snprintf(path, sizeof path, "/proc/%d/maps", static_cast<int>(pid));
    const int saved = errno;
    const int f = kernel::open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) return errno = saved, false;
    // The name may straddle two reads: keep its length minus one from the last.
    static constexpr char kName[] = "librdmasock";
    constexpr size_t kLen = sizeof kName - 1;
    char buf[8192 + kLen];
    size_t kept = 0;
    bool found = false;
    for (;;) {
        const ssize_t n = kernel::read(f, buf + kept, sizeof buf - kept);
        if (n <= 0) break;
        const size_t have = kept + static_cast<size_t>(n);
        if (memmem(buf, have, kName, kLen)) {
            found = true;
            break;
        }
        kept = std::min(have, kLen - 1);
        std::memmove(buf, buf + have - kept, kept);
    }
    kernel::close(f);
    errno = saved;
    return found;
}

bool serves_kept_bytes(pid_t pid) {
    if (!loads_shim(pid)) return false;
    char path[48];
    std::snprintf(path, sizeof path, "/proc/%d/exe", static_cast<int>(pid));
    const int saved = errno;
    const int f = kernel::open(path, O_RDONLY | O_CLOEXEC);
    const bool go = f >= 0 && exec_image::inspect(f) == exec_image::Image::go;
    if (f >= 0) kernel::close(f);
    errno = saved;
    return !go;
}

}  // namespace rdmasock::peer_check
