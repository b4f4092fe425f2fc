// Calls after which the shim no longer sees a socket's bytes: exec (the new
// program reads the kernel socket), SCM_RIGHTS (another process does),
// and fdopen (stdio reads and writes through libc's internal calls). (splice:
// the shim moves the bytes itself, splice_ring.hpp.) Before each, the connection goes back to TCP
// in order (Connection::hand_over; docs/protocol.md, "Downgrade"), so the
// bytes are where the new reader or writer looks, and it stays plain TCP.
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "sys/exec_image.hpp"
#include "sys/raw_syscall.hpp"
#include "real_calls.hpp"
#include "errno_keep.hpp"
#include "fd_table.hpp"
#include "base/log.hpp"
#include "sys/sandbox.hpp"
#include "shim_state.hpp"
#include "io_path.hpp"
#include "splice_ring.hpp"
#include "stdio_kept.hpp"
#include "shm/leftover.hpp"
#include "shm/peer_check.hpp"

using namespace rdmasock;
using namespace rdmasock::shim;

namespace {

#define REAL(name) static auto real_##name = rdmasock::real::next<decltype(&::name)>(#name)

// A connection the shim carries on something other than its TCP socket.
bool carried(const Socket& s) { return s.conn && !s.conn->is_plain(); }

// The carried connection behind `fd`, or null.
std::shared_ptr<Connection> carried_at(int fd) {
    if (fd < 0 || !fd_table().contains(fd)) return nullptr;
    auto s = fd_table().get(fd);
    return s && carried(*s) ? s->conn : nullptr;
}

void hand_over_fd(int fd, const char* why) {
    if (auto c = carried_at(fd)) c->hand_over(why);
}

// Several at once (Connection::hand_over_all): both ends of one connection may
// be among them.
void hand_over_fds(const std::vector<int>& fds, const char* why, Connection::Unread unread = Connection::Unread::ask_peer) {
    std::vector<std::shared_ptr<Connection>> cs;
    for (int fd : fds)
        if (auto c = carried_at(fd)) cs.push_back(std::move(c));
    Connection::hand_over_all(cs, why, unread);
}

// Socket inodes that an exec keeps: every fd without FD_CLOEXEC, by the
// kernel's own list (raw syscalls: a vfork child may run this, and its fd
// table can differ from ours, e.g. after its dup2 onto 0, 1 or 2).
std::vector<ino_t> inherited_socket_inodes(unsigned skip_first = 1, unsigned skip_last = 0) {
    std::vector<ino_t> out;
    int dir = static_cast<int>(raw_syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir < 0) {
        // No /proc (a chroot, a sandbox): the numbers the shim knows, as they are here.
        for (int fd : fd_table().present_in(0, INT_MAX)) {
            if (static_cast<unsigned>(fd) >= skip_first && static_cast<unsigned>(fd) <= skip_last) continue;
            int fl = static_cast<int>(raw_syscall(SYS_fcntl, fd, F_GETFD));
            struct stat st;
            if (fl >= 0 && !(fl & FD_CLOEXEC) && raw_syscall(SYS_fstat, fd, &st) == 0 && S_ISSOCK(st.st_mode)) out.push_back(st.st_ino);
        }
        return out;
    }
    alignas(8) char buf[4096];
    for (;;) {
        long n = raw_syscall(SYS_getdents64, dir, buf, sizeof buf);
        if (n <= 0) break;
        for (long off = 0; off < n;) {
            auto* d = reinterpret_cast<struct dirent64*>(buf + off);
            off += d->d_reclen;
            char* end;
            long fd = strtol(d->d_name, &end, 10);
            if (*end || end == d->d_name || fd == dir) continue;
            if (static_cast<unsigned long>(fd) >= skip_first && static_cast<unsigned long>(fd) <= skip_last) continue;
            int fl = static_cast<int>(raw_syscall(SYS_fcntl, static_cast<int>(fd), F_GETFD));
            struct stat st;
            if (fl < 0 || (fl & FD_CLOEXEC) || raw_syscall(SYS_fstat, static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode))
                continue;
            out.push_back(st.st_ino);
        }
    }
    raw_syscall(SYS_close, dir);
    return out;
}

// Before exec, posix_spawn, system or popen: every carried connection whose
// socket the new program inherits, under whatever fd number it has there.
std::vector<std::shared_ptr<Connection>> inherited_connections(unsigned skip_first, unsigned skip_last) {
    std::vector<std::shared_ptr<Connection>> cs;
    std::vector<ino_t> kept = inherited_socket_inodes(skip_first, skip_last);
    if (kept.empty()) return cs;
    // By inode: a vfork child may have closed our number (close_fds) and
    // dup2'ed the socket onto another.
    for (int fd : fd_table().present_in(0, INT_MAX)) {
        auto c = carried_at(fd);
        if (c && std::find(kept.begin(), kept.end(), c->socket_inode()) != kept.end()) cs.push_back(std::move(c));
    }
    return cs;
}

void hand_over_inherited(const char* why, unsigned skip_first = 1, unsigned skip_last = 0) {
    const int saved = errno;
    auto cs = inherited_connections(skip_first, skip_last);
    if (!cs.empty()) Connection::hand_over_all(cs, why, Connection::Unread::ask_peer);
    errno = saved;
}

// Whether an exec's environment loads the shim into the new image (which then
// reads the kept bytes of RDMASOCK_LEFTOVER).
bool preloads_shim(char* const* envp) {
    for (char* const* e = envp; e && *e; ++e)
        if (std::strncmp(*e, "LD_PRELOAD=", 11) == 0 && std::strstr(*e, "librdmasock")) return true;
    return false;
}

// The program an exec is about to run, as the kernel finds it: `fd` (fexecve),
// else `path` relative to `dirfd`; a name without a slash (execvp) through
// PATH, as libc searches it. False when it cannot be found.
bool exec_target(int dirfd, const char* path, int fd, bool search, struct ::stat& st, std::string& found) {
    if (fd >= 0) return fstat(fd, &st) == 0;
    if (!path || !*path) return dirfd >= 0 && fstat(dirfd, &st) == 0;  // execveat's AT_EMPTY_PATH
    if (!search || std::strchr(path, '/')) {
        found = path;
        return fstatat(dirfd, path, &st, 0) == 0;
    }
    const char* dirs = getenv("PATH");
    std::string list = dirs ? dirs : "/bin:/usr/bin";
    for (size_t at = 0; at <= list.size();) {
        size_t end = list.find(':', at);
        if (end == std::string::npos) end = list.size();
        std::string dir = list.substr(at, end - at);
        found = (dir.empty() ? std::string(".") : dir) + "/" + path;
        if (access(found.c_str(), X_OK) == 0 && ::stat(found.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return true;
        at = end + 1;
    }
    return false;
}

// Whether the program an exec is about to run will serve kept bytes: the shim
// is preloaded there and stands between its reads and the kernel. Not where
// the loader ignores LD_PRELOAD (set-user-ID or set-group-ID, file
// capabilities), nor where the program reads around libc's calls or has no
// loader at all (sys/exec_image.hpp: a static or Go program). A file that
// cannot be found or read (execute-only): as if it did not (the exec then
// waits for the writer, as for a program without the shim).
bool serves_kept_bytes(char* const* envp, int dirfd, const char* path, int fd, bool search) {
    if (!preloads_shim(envp)) return false;
    struct ::stat st{};
    std::string found;
    if (!exec_target(dirfd, path, fd, search, st, found)) return false;
    if (st.st_mode & (S_ISUID | S_ISGID)) return false;
    int f = fd >= 0 ? fd : found.empty() ? dirfd : -1;
    if (f < 0) f = static_cast<int>(raw_syscall(SYS_openat, dirfd, found.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (f < 0) return false;
    char cap[64];
    const bool capabilities = fgetxattr(f, "security.capability", cap, sizeof cap) > 0;
    const bool reaches = !capabilities && exec_image::preload_reaches(f);
    if (f != fd && f != dirfd) raw_syscall(SYS_close, f);
    return reaches;
}

// Before an exec: a new image with the shim can take what a peer that does not
// answer left in a ring (kept bytes), so the exec need not wait for that peer.
// Only where the shim will be there to serve them (serves_kept_bytes).
// True when the new image serves kept bytes (exec_env says so where it cannot).
bool hand_over_for_exec(char* const* envp, int dirfd, const char* path, int fd = -1, bool search = false) {
    const int saved = errno;
    auto cs = inherited_connections(1, 0);
    // The program's headers are read only where the answer is used: a connection
    // to hand over, or kept bytes that travel (exec_env).
    bool serves = true;
    if (!cs.empty() || leftover::any()) serves = serves_kept_bytes(envp, dirfd, path, fd, search);
    if (!cs.empty()) Connection::hand_over_all(cs, "exec", serves ? Connection::Unread::may_claim : Connection::Unread::ask_peer);
    errno = saved;
    return serves;
}

// The fds an SCM_RIGHTS message carries, in order.
std::vector<int> passed_fds(const msghdr* msg) {
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(const_cast<msghdr*>(msg)); c; c = CMSG_NXTHDR(const_cast<msghdr*>(msg), c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) continue;
        const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            fds.push_back(fd);
        }
    }
    return fds;
}

// SCM_RIGHTS: the receiver reads the kernel socket.
// `via` is the Unix socket that carries them, -1 where the kept bytes cannot
// travel with them (sendmmsg): a receiver that loads the shim (its process,
// by SO_PEERCRED, maps it; not ourselves: a socket pair's credentials are its
// creator's, whichever process holds the other end now) and is no Go program
// (peer_check::serves_kept_bytes) adopts kept bytes beside the socket, so a
// peer that does not answer is not waited for.
void hand_over_passed(const msghdr* msg, int via) {
    if (!msg || !msg->msg_control || msg->msg_controllen < sizeof(cmsghdr)) return;
    const int saved = errno;
    const std::vector<int> fds = passed_fds(msg);
    auto unread = Connection::Unread::ask_peer;
    ucred cr{};
    socklen_t len = sizeof cr;
    // (Only when a carried connection is among them: the maps are read once per pass.)
    if (via >= 0 && std::any_of(fds.begin(), fds.end(), [](int fd) { return carried_at(fd) != nullptr; }) &&
        getsockopt(via, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.pid > 0 && cr.pid != getpid() && peer_check::serves_kept_bytes(cr.pid))
        unread = Connection::Unread::may_claim;
    hand_over_fds(fds, "passed to another process (SCM_RIGHTS)", unread);
    errno = saved;
}

// File actions may dup2 a close-on-exec socket into the child; their list is
// libc's private layout, so with any file actions every connection goes back.
void before_spawn(const posix_spawn_file_actions_t* fa) {
    if (!fa) return hand_over_inherited("posix_spawn");
    const int saved = errno;
    hand_over_fds(fd_table().present_in(0, INT_MAX), "posix_spawn with file actions");
    errno = saved;
}

std::vector<char*> collect_args(const char* first, va_list ap, char*** envp) {
    std::vector<char*> argv{const_cast<char*>(first)};
    while (argv.back()) argv.push_back(va_arg(ap, char*));
    if (envp) *envp = va_arg(ap, char**);
    return argv;
}

// Kept bytes (leftover.hpp) of inherited sockets go to the new image: their
// memfds stay open across the exec, named in RDMASOCK_LEFTOVER, which the new
// image's shim reads at load. `envp` as the exec gets it; `out` holds the copy;
// `serves`: the new image can serve them (serves_kept_bytes).
char* const* exec_env(char* const* envp, std::vector<char*>& out, std::string& var, bool serves) {
    if (!leftover::any()) return envp;
    const std::string list = leftover::for_exec();
    if (list.empty()) return envp;
    if (!serves)
        RS_LOG(error, "exec: the new program does not read through the shim (not preloaded, set-user-ID, static or Go); "
                      "bytes a closed peer left in a ring for an inherited socket are lost to it");
    var = "RDMASOCK_LEFTOVER=" + list;
    for (char* const* e = envp; e && *e; ++e)
        if (std::strncmp(*e, "RDMASOCK_LEFTOVER=", 18) != 0) out.push_back(*e);
    out.push_back(var.data());
    out.push_back(nullptr);
    return out.data();
}

}  // namespace

namespace rdmasock::shim {
// sendmsg/sendmmsg (interpose_io.cpp, interpose_mmsg.cpp) call this first.
void before_passing_fds(const msghdr* msg, int via) { hand_over_passed(msg, via); }

// A vfork child can only exec or exit, and it closes fds before its exec
// (subprocess's close_fds): the connection's doorbells among them, without
// which its peer cannot be woken to take back. So the hand-over happens at
// the child's dup2 of the socket, and at its close_range for the sockets it
// keeps (interpose_fd.cpp), while those doorbells are still open.
void vfork_child_dup(int oldfd) { hand_over_fd(oldfd, "exec (a vfork child's dup2)"); }
void vfork_child_closing(unsigned first, unsigned last) { hand_over_inherited("exec (a vfork child's close_range)", first, last); }
}  // namespace rdmasock::shim

namespace rdmasock::shim {

using rdmasock::real::calls;

// Kept bytes (leftover.hpp) travel with their socket: their memfd rides in the
// same SCM_RIGHTS message, after the program's fds.
const msghdr* with_leftovers(const msghdr* msg, msghdr& out, std::vector<char>& ctl) {
    if (!leftover::any() || !msg->msg_control || msg->msg_controllen < sizeof(cmsghdr)) return msg;
    std::vector<int> extra;
    for (int fd : passed_fds(msg)) {
        const int m = leftover::memfd_of(leftover::inode_of(fd));
        if (m >= 0 && std::find(extra.begin(), extra.end(), m) == extra.end()) extra.push_back(m);
    }
    if (extra.empty()) return msg;
    const size_t base = CMSG_ALIGN(msg->msg_controllen);
    ctl.assign(base + CMSG_SPACE(extra.size() * sizeof(int)), 0);
    std::memcpy(ctl.data(), msg->msg_control, msg->msg_controllen);
    auto* c = reinterpret_cast<cmsghdr*>(ctl.data() + base);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(extra.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), extra.data(), extra.size() * sizeof(int));
    out = *msg;
    out.msg_control = ctl.data();
    out.msg_controllen = ctl.size();
    return &out;
}

// The kernel's recvmsg into a control buffer with room for the memfds too;
// then the program's buffer gets the message without them, truncated as the
// kernel truncates (MSG_CTRUNC; fds that do not fit are closed).
ssize_t recvmsg_taking_leftovers(int fd, msghdr* msg, int flags) {
    if (!msg || !msg->msg_control || msg->msg_controllen < sizeof(cmsghdr)) return calls().recvmsg(fd, msg, flags);
    const size_t room = msg->msg_controllen;
    std::vector<char> big(room + CMSG_SPACE(16 * sizeof(int)));
    msghdr m = *msg;
    m.msg_control = big.data();
    m.msg_controllen = big.size();
    const ssize_t r = calls().recvmsg(fd, &m, flags);
    if (r < 0) return r;
    const int saved = errno;
    // First the memfds out (adopted only for a socket passed in the same
    // message: holding the socket is the authority, as for the rings).
    std::vector<int> fds, memfds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; ++i) {
            int f;
            std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
            (leftover::memfd_inode(f) ? memfds : fds).push_back(f);
        }
    }
    for (int f : memfds) {
        const uint64_t ino = leftover::memfd_inode(f);
        bool passed = false;
        for (int g : fds) passed = passed || leftover::inode_of(g) == ino;
        if (!passed)
            raw_syscall(SYS_close, f);
        else
            leftover::adopt(f, ino);  // (closes it when refused, and says why)
    }
    // Then the message as the program's buffer holds it.
    char* dst = static_cast<char*>(msg->msg_control);
    size_t used = 0;
    int mflags = m.msg_flags;
    bool full = false;  // past what fits: fds there are closed, as the kernel does
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        const bool rights = c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS;
        std::vector<int> keep;
        if (rights) {
            const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < n; ++i) {
                int f;
                std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
                if (std::find(memfds.begin(), memfds.end(), f) == memfds.end()) keep.push_back(f);
            }
            if (keep.empty()) continue;
            const size_t fit = !full && room >= used + CMSG_LEN(0) ? (room - used - CMSG_LEN(0)) / sizeof(int) : 0;
            if (fit < keep.size()) {
                mflags |= MSG_CTRUNC;
                full = true;
                for (size_t i = fit; i < keep.size(); ++i) raw_syscall(SYS_close, keep[i]);
                keep.resize(fit);
            }
            if (keep.empty()) continue;
            auto* o = reinterpret_cast<cmsghdr*>(dst + used);
            o->cmsg_level = SOL_SOCKET;
            o->cmsg_type = SCM_RIGHTS;
            o->cmsg_len = CMSG_LEN(keep.size() * sizeof(int));
            std::memcpy(CMSG_DATA(o), keep.data(), keep.size() * sizeof(int));
            used += std::min(room - used, static_cast<size_t>(CMSG_SPACE(keep.size() * sizeof(int))));
            continue;
        }
        if (full || used + c->cmsg_len > room) {
            mflags |= MSG_CTRUNC;
            full = true;
            continue;
        }
        std::memcpy(dst + used, c, c->cmsg_len);
        used += std::min(room - used, static_cast<size_t>(CMSG_ALIGN(c->cmsg_len)));
    }
    msg->msg_controllen = used;
    msg->msg_namelen = m.msg_namelen;
    msg->msg_flags = mflags;
    errno = saved;
    return r;
}

}  // namespace rdmasock::shim

extern "C" {

int execve(const char* path, char* const argv[], char* const envp[]) {
    REAL(execve);
    const bool serves = hand_over_for_exec(envp, AT_FDCWD, path);
    std::vector<char*> env;
    std::string var;
    return real_execve(path, argv, exec_env(envp, env, var, serves));
}

int execv(const char* path, char* const argv[]) {
    REAL(execv);
    REAL(execve);
    const bool serves = hand_over_for_exec(environ, AT_FDCWD, path);
    std::vector<char*> env;
    std::string var;
    if (char* const* e = exec_env(environ, env, var, serves); e != environ) return real_execve(path, argv, e);
    return real_execv(path, argv);
}

int execvp(const char* file, char* const argv[]) {
    REAL(execvp);
    REAL(execvpe);
    const bool serves = hand_over_for_exec(environ, AT_FDCWD, file, -1, true);
    std::vector<char*> env;
    std::string var;
    if (char* const* e = exec_env(environ, env, var, serves); e != environ) return real_execvpe(file, argv, e);
    return real_execvp(file, argv);
}

int execvpe(const char* file, char* const argv[], char* const envp[]) {
    REAL(execvpe);
    const bool serves = hand_over_for_exec(envp, AT_FDCWD, file, -1, true);
    std::vector<char*> env;
    std::string var;
    return real_execvpe(file, argv, exec_env(envp, env, var, serves));
}

int fexecve(int fd, char* const argv[], char* const envp[]) {
    REAL(fexecve);
    const bool serves = hand_over_for_exec(envp, AT_FDCWD, nullptr, fd);
    std::vector<char*> env;
    std::string var;
    return real_fexecve(fd, argv, exec_env(envp, env, var, serves));
}

int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) {
    const bool serves = hand_over_for_exec(envp, dirfd, path);
    std::vector<char*> env;
    std::string var;
    return static_cast<int>(raw_syscall(SYS_execveat, dirfd, path, argv, exec_env(envp, env, var, serves), flags));
}

// The list forms reach execve inside libc, where no interposer sees them.
int execl(const char* path, const char* arg, ...) {
    va_list ap;
    va_start(ap, arg);
    auto argv = collect_args(arg, ap, nullptr);
    va_end(ap);
    return execv(path, argv.data());
}

int execlp(const char* file, const char* arg, ...) {
    va_list ap;
    va_start(ap, arg);
    auto argv = collect_args(arg, ap, nullptr);
    va_end(ap);
    return execvp(file, argv.data());
}

int execle(const char* path, const char* arg, ...) {
    va_list ap;
    va_start(ap, arg);
    char** envp = nullptr;
    auto argv = collect_args(arg, ap, &envp);
    va_end(ap);
    return execve(path, argv.data(), envp);
}

int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa, const posix_spawnattr_t* attr,
                char* const argv[], char* const envp[]) {
    REAL(posix_spawn);
    before_spawn(fa);
    return real_posix_spawn(pid, path, fa, attr, argv, envp);
}

int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa, const posix_spawnattr_t* attr,
                 char* const argv[], char* const envp[]) {
    REAL(posix_spawnp);
    before_spawn(fa);
    return real_posix_spawnp(pid, file, fa, attr, argv, envp);
}

int system(const char* command) {
    REAL(system);
    if (command) hand_over_inherited("system()");
    return real_system(command);
}

FILE* popen(const char* command, const char* type) {
    REAL(popen);
    hand_over_inherited("popen()");
    return real_popen(command, type);
}

// A seccomp filter (OpenSSH's privilege-separated child) may kill the process
// for a syscall the shim makes on a ring path (poll, doorbells, sock_diag), when
// it logs or when it closes its own fds: hand every connection to the kernel
// while it still can, start no rendezvous, write nothing, and close only what a
// plain close() may close from then on (sys/sandbox.hpp).
int prctl(int option, ...) {
    shim::ErrnoKept kept;
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long), a4 = va_arg(ap, unsigned long),
                  a5 = va_arg(ap, unsigned long);
    va_end(ap);
    if (option == PR_SET_SECCOMP) {
        const int saved = errno;
        // On TCP for good, as after an io_uring: every connection goes back now, and
        // no rendezvous starts later (its steps ask the kernel what a filter kills).
        shim::keep_every_connection_on_tcp("a seccomp filter is about to be installed");
        silence_log();
        sandbox::enter();  // no teardown syscall of the shim's from here on (sys/sandbox.hpp)
        errno = saved;
    }
    return kept(static_cast<int>(raw_syscall(SYS_prctl, option, a2, a3, a4, a5)));
}

FILE* fdopen(int fd, const char* mode) {
    REAL(fdopen);
    hand_over_fd(fd, "fdopen (stdio reads and writes it directly)");
    // Bytes the shim keeps come before the kernel's (or its end): stdio must read through it.
    if (shim::kept_owed(fd)) return shim::kept_bytes_stream(fd, mode);
    return real_fdopen(fd, mode);
}

ssize_t splice(int fd_in, loff_t* off_in, int fd_out, loff_t* off_out, size_t len, unsigned int flags) {
    shim::ErrnoKept kept;
    REAL(splice);
    // A connection on a ring: the shim moves its bytes (splice_ring.hpp), as a
    // data call (a wait a restarting signal ended runs again, never EINTR/ERESTART).
    return kept(data_call(
        fd_in, [&](Socket& s) { return splice_from_ring(s, off_in, fd_out, off_out, len, flags); },
        [&] {
            return data_call(
                fd_out, [&](Socket& s) { return splice_to_ring(fd_in, off_in, s, off_out, len, flags); },
                [&] {
                    if (kept_owed(fd_in)) return splice_from_kept(fd_in, off_in, fd_out, off_out, len, flags);
                    return real_splice(fd_in, off_in, fd_out, off_out, len, flags);
                });
        }));
}

}  // extern "C"
