// Same-host transport prerequisites, each tried for real on a throwaway object:
// a sealed memfd whose pages are allocated as used (the rings), eventfd (doorbells), an
// abstract Unix socket with SO_PEERCRED and SCM_RIGHTS (the side channel),
// TCP_INFO and a NETLINK_SOCK_DIAG lookup (proving who holds a TCP connection).
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "doctor_checks.hpp"

namespace rdmasock::cli {

namespace {

struct Fd {
    int fd = -1;
    explicit Fd(int f = -1) : fd(f) {}
    ~Fd() {
        if (fd >= 0) close(fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
};

std::string sys_error(const char* call) { return std::string(call) + " failed: " + std::strerror(errno); }

// Empty on success, else what failed. What the rings do: size, seal, map,
// and allocate a first window's pages (the rest comes as windows grow).
std::string try_sealed_memfd(uint64_t bytes) {
    Fd m(memfd_create("rdmasock-doctor", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (m.fd < 0) return sys_error("memfd_create(MFD_ALLOW_SEALING)");
    if (ftruncate(m.fd, static_cast<off_t>(bytes)) != 0) return sys_error("ftruncate");
    const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    if (fcntl(m.fd, F_ADD_SEALS, seals) != 0) return sys_error("fcntl(F_ADD_SEALS)");
    if ((fcntl(m.fd, F_GET_SEALS) & seals) != seals) return "F_GET_SEALS does not report the seals just added";
    if (ftruncate(m.fd, 0) == 0) return "ftruncate succeeded on a memfd sealed against shrinking";
    struct statfs fs {};
    if (fstatfs(m.fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) return "the memfd is not on the kernel's shmem mount";
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
    if (p == MAP_FAILED) return sys_error("mmap(MAP_SHARED)");
    const size_t first = std::min<uint64_t>(bytes, 16 * 1024);
    std::string err;
    if (madvise(p, first, 23 /* MADV_POPULATE_WRITE */) != 0 && errno != EINVAL) err = sys_error("madvise(MADV_POPULATE_WRITE)");
    else static_cast<volatile char*>(p)[first - 1] = 1;
    munmap(p, bytes);
    return err;
}

std::string try_eventfd() {
    Fd e(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (e.fd < 0) return sys_error("eventfd");
    uint64_t one = 1, got = 0;
    if (write(e.fd, &one, sizeof one) != sizeof one) return sys_error("eventfd write");
    if (read(e.fd, &got, sizeof got) != sizeof got || got != 1) return "eventfd did not count the write";
    return {};
}

// Passes `fd_to_send` over `s` with SCM_RIGHTS; returns the received fd or -1.
int pass_fd(int from, int to, int fd_to_send) {
    char byte = 'x';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &iov, m.msg_iovlen = 1, m.msg_control = ctl, m.msg_controllen = sizeof ctl;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd_to_send, sizeof(int));
    if (sendmsg(from, &m, MSG_NOSIGNAL) != 1) return -1;
    std::memset(ctl, 0, sizeof ctl);
    msghdr r{};
    r.msg_iov = &iov, r.msg_iovlen = 1, r.msg_control = ctl, r.msg_controllen = sizeof ctl;
    if (recvmsg(to, &r, MSG_CMSG_CLOEXEC) != 1) return -1;
    c = CMSG_FIRSTHDR(&r);
    if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
    int got = -1;
    std::memcpy(&got, CMSG_DATA(c), sizeof(int));
    return got;
}

std::string try_abstract_unix() {
    Fd l(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (l.fd < 0) return sys_error("socket(AF_UNIX)");
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string name = "rdmasock-doctor-" + std::to_string(getpid());
    std::memcpy(a.sun_path + 1, name.data(), name.size());  // sun_path[0] == 0: abstract, never on disk
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (bind(l.fd, reinterpret_cast<sockaddr*>(&a), len) != 0) return sys_error("bind(abstract Unix socket)");
    if (listen(l.fd, 1) != 0) return sys_error("listen(abstract Unix socket)");
    Fd c(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (c.fd < 0 || connect(c.fd, reinterpret_cast<sockaddr*>(&a), len) != 0)
        return sys_error("connect(abstract Unix socket)");
    Fd s(accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (s.fd < 0) return sys_error("accept(abstract Unix socket)");
    ucred cred{};
    socklen_t cl = sizeof cred;
    if (getsockopt(s.fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) return sys_error("getsockopt(SO_PEERCRED)");
    if (cred.pid != getpid()) return "SO_PEERCRED names pid " + std::to_string(cred.pid) + ", not this process";
    Fd e(eventfd(0, EFD_CLOEXEC));
    Fd got(pass_fd(c.fd, s.fd, e.fd));
    if (got.fd < 0) return sys_error("passing a file descriptor with SCM_RIGHTS");
    return {};
}

// A loopback TCP connection for the TCP_INFO and sock_diag checks.
struct TcpPair {
    Fd listener, client, server;
    sockaddr_in local{}, peer{};  // the client's end
    std::string error;
};

void open_tcp_pair(TcpPair& p) {
    p.listener.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (p.listener.fd < 0 || bind(p.listener.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(p.listener.fd, 1) != 0 || getsockname(p.listener.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        p.error = sys_error("a TCP listener on 127.0.0.1");
        return;
    }
    p.client.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p.client.fd < 0 || connect(p.client.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        p.error = sys_error("connect to 127.0.0.1");
        return;
    }
    p.server.fd = accept4(p.listener.fd, nullptr, nullptr, SOCK_CLOEXEC);
    len = sizeof p.local;
    getsockname(p.client.fd, reinterpret_cast<sockaddr*>(&p.local), &len);
    len = sizeof p.peer;
    getpeername(p.client.fd, reinterpret_cast<sockaddr*>(&p.peer), &len);
    if (p.server.fd < 0) p.error = sys_error("accept on 127.0.0.1");
}

std::string try_tcp_info(const TcpPair& p) {
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (getsockopt(p.client.fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return sys_error("getsockopt(TCP_INFO)");
    if (ti.tcpi_state != TCP_ESTABLISHED) return "TCP_INFO reports state " + std::to_string(ti.tcpi_state);
    return {};
}

// Looks the client end up by its exact address pair and expects its inode back.
std::string try_sock_diag(const TcpPair& p) {
    Fd nl(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
    if (nl.fd < 0) return sys_error("socket(NETLINK_SOCK_DIAG)");
    struct {
        nlmsghdr nlh;
        inet_diag_req_v2 req;
    } msg{};
    msg.nlh.nlmsg_len = sizeof msg;
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST;
    msg.nlh.nlmsg_seq = 1;
    msg.req.sdiag_family = AF_INET;
    msg.req.sdiag_protocol = IPPROTO_TCP;
    msg.req.idiag_states = 1u << TCP_ESTABLISHED;
    msg.req.id.idiag_sport = p.local.sin_port;
    msg.req.id.idiag_dport = p.peer.sin_port;
    msg.req.id.idiag_src[0] = p.local.sin_addr.s_addr;
    msg.req.id.idiag_dst[0] = p.peer.sin_addr.s_addr;
    msg.req.id.idiag_if = 0;
    msg.req.id.idiag_cookie[0] = msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (sendto(nl.fd, &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
        return sys_error("sendto(NETLINK_SOCK_DIAG)");
    timeval tv{2, 0};  // the kernel answers at once; never hang the doctor
    setsockopt(nl.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    alignas(nlmsghdr) char buf[8192];
    ssize_t n = recv(nl.fd, buf, sizeof buf, 0);
    if (n < 0) return sys_error("recv(NETLINK_SOCK_DIAG)");
    auto* h = reinterpret_cast<nlmsghdr*>(buf);
    if (!NLMSG_OK(h, static_cast<unsigned>(n))) return "a malformed sock_diag answer";
    if (h->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
        return std::string("inet_diag lookup refused: ") + std::strerror(-e->error);
    }
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) return "an unexpected sock_diag answer";
    auto* d = static_cast<inet_diag_msg*>(NLMSG_DATA(h));
    struct stat st{};
    fstat(p.client.fd, &st);
    if (d->idiag_inode != st.st_ino) return "inet_diag named another socket than the one asked for";
    return {};
}

void add(Checks& out, const std::string& name, const std::string& err, const std::string& ok_detail,
         const std::string& fix) {
    if (err.empty()) out.push_back({Level::ok, name, ok_detail});
    else out.push_back({Level::fail, name, err + "; " + fix});
}

}  // namespace

void check_shm(const Config& cfg, Checks& out) {
    const uint64_t bytes = 2 * cfg.ring_bytes;
    add(out, "shm: sealed memfd", try_sealed_memfd(bytes),
        "memfd_create of " + std::to_string(bytes >> 10) + " KiB, F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL, a first window allocated",
        "the kernel needs memfd sealing (Linux 3.17+) and room in shmem (memory cgroup, tmpfs limits)");
    add(out, "shm: eventfd doorbells", try_eventfd(), "eventfd", "the kernel needs eventfd support");
    add(out, "shm: side channel", try_abstract_unix(), "abstract Unix socket, SO_PEERCRED, SCM_RIGHTS",
        "abstract Unix sockets need the process's own network namespace to allow them (seccomp or an "
        "LSM may block them)");
    TcpPair p;
    open_tcp_pair(p);
    if (!p.error.empty()) {
        out.push_back({Level::fail, "shm: TCP loopback", p.error + "; the loopback interface must be up"});
        return;
    }
    add(out, "shm: TCP_INFO", try_tcp_info(p), "getsockopt(TCP_INFO) on a loopback connection",
        "the kernel must support TCP_INFO");
    add(out, "shm: sock_diag", try_sock_diag(p), "NETLINK_SOCK_DIAG finds a connection by its address pair",
        "load the inet_diag and tcp_diag modules (modprobe tcp_diag)");
}

}  // namespace rdmasock::cli
