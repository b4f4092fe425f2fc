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
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "raw_syscall.hpp"
#include "real_calls.hpp"
#include "errno_keep.hpp"
#include "fd_table.hpp"
#include "log.hpp"
#include "shim_state.hpp"
#include "io_path.hpp"
#include "splice_ring.hpp"

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
void hand_over_fds(const std::vector<int>& fds, const char* why) {
    std::vector<std::shared_ptr<Connection>> cs;
    for (int fd : fds)
        if (auto c = carried_at(fd)) cs.push_back(std::move(c));
    Connection::hand_over_all(cs, why);
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
void hand_over_inherited(const char* why, unsigned skip_first = 1, unsigned skip_last = 0) {
    const int saved = errno;
    std::vector<ino_t> kept = inherited_socket_inodes(skip_first, skip_last);
    if (!kept.empty()) {
        // By inode: a vfork child may have closed our number (close_fds) and
        // dup2'ed the socket onto another.
        std::vector<std::shared_ptr<Connection>> cs;
        for (int fd : fd_table().present_in(0, INT_MAX)) {
            auto c = carried_at(fd);
            if (c && std::find(kept.begin(), kept.end(), c->socket_inode()) != kept.end()) cs.push_back(std::move(c));
        }
        Connection::hand_over_all(cs, why);
    }
    errno = saved;
}

// SCM_RIGHTS: the receiver reads the kernel socket.
void hand_over_passed(const msghdr* msg) {
    if (!msg || !msg->msg_control || msg->msg_controllen < sizeof(cmsghdr)) return;
    const int saved = errno;
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
    hand_over_fds(fds, "passed to another process (SCM_RIGHTS)");
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

}  // namespace

namespace rdmasock::shim {
// sendmsg/sendmmsg (interpose_io.cpp, interpose_mmsg.cpp) call this first.
void before_passing_fds(const msghdr* msg) { hand_over_passed(msg); }

// A vfork child can only exec or exit, and it closes fds before its exec
// (subprocess's close_fds): the connection's eventfds among them, without
// which its peer cannot be woken to take back. So the hand-over happens at
// the child's dup2 of the socket, and at its close_range for the sockets it
// keeps (interpose_fd.cpp), while those eventfds are still open.
void vfork_child_dup(int oldfd) { hand_over_fd(oldfd, "exec (a vfork child's dup2)"); }
void vfork_child_closing(unsigned first, unsigned last) { hand_over_inherited("exec (a vfork child's close_range)", first, last); }
}  // namespace rdmasock::shim

extern "C" {

int execve(const char* path, char* const argv[], char* const envp[]) {
    REAL(execve);
    hand_over_inherited("exec");
    return real_execve(path, argv, envp);
}

int execv(const char* path, char* const argv[]) {
    REAL(execv);
    hand_over_inherited("exec");
    return real_execv(path, argv);
}

int execvp(const char* file, char* const argv[]) {
    REAL(execvp);
    hand_over_inherited("exec");
    return real_execvp(file, argv);
}

int execvpe(const char* file, char* const argv[], char* const envp[]) {
    REAL(execvpe);
    hand_over_inherited("exec");
    return real_execvpe(file, argv, envp);
}

int fexecve(int fd, char* const argv[], char* const envp[]) {
    REAL(fexecve);
    hand_over_inherited("exec");
    return real_fexecve(fd, argv, envp);
}

int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) {
    hand_over_inherited("exec");
    return static_cast<int>(raw_syscall(SYS_execveat, dirfd, path, argv, envp, flags));
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
// for a syscall the shim makes on a ring path (poll, eventfd, sock_diag) or
// when it logs: hand every connection to the kernel while it still can, and
// write nothing from then on.
int prctl(int option, ...) {
    shim::ErrnoKept kept;
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long), a4 = va_arg(ap, unsigned long),
                  a5 = va_arg(ap, unsigned long);
    va_end(ap);
    if (option == PR_SET_SECCOMP) {
        const int saved = errno;
        hand_over_fds(fd_table().present_in(0, INT_MAX), "a seccomp filter is about to be installed");
        silence_log();
        errno = saved;
    }
    return kept(static_cast<int>(raw_syscall(SYS_prctl, option, a2, a3, a4, a5)));
}

FILE* fdopen(int fd, const char* mode) {
    REAL(fdopen);
    hand_over_fd(fd, "fdopen (stdio reads and writes it directly)");
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
                [&] { return real_splice(fd_in, off_in, fd_out, off_out, len, flags); });
        }));
}

}  // extern "C"
