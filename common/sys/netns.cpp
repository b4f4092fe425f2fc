#include "sys/netns.hpp"

#include <linux/sockios.h>
#include <sys/stat.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "sys/kernel_calls.hpp"

namespace rdmasock::netns {

namespace {

// The thread's namespace, read once per thread: a stat of /proc/thread-self/ns/net
// walks procfs (~9 us here, three of them per side of every connection before
// this cache). A thread changes namespace only by setns or unshare, which the
// shim sees (thread_moved()), or becomes a new task (clone with CLONE_NEWNET,
// a vfork child writing into its parent's copy): keyed by the thread id, such
// a task reads its own. Written so that a signal handler's check in between
// reads either the old entry or the new one whole.
struct ThreadEntry {
    pid_t tid = 0;
    struct stat st{};
};
thread_local ThreadEntry t_entry __attribute__((tls_model("initial-exec")));

bool read_thread_netns(struct stat& st) { return kernel::stat("/proc/thread-self/ns/net", &st) == 0; }

bool thread_netns(struct stat& st) {
    const pid_t tid = gettid();
    if (t_entry.tid == tid) {
        st = t_entry.st;
        return true;
    }
    if (!read_thread_netns(st)) return false;
    t_entry.tid = 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_entry.st = st;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_entry.tid = tid;
    return true;
}

// The process's namespace when the library loaded (before any unshare of the program's).
struct Initial {
    struct stat st{};
    bool known = false;
    Initial() {
        int saved = errno;
        known = read_thread_netns(st);
        errno = saved;
    }
} g_initial;

}  // namespace

Id thread_id_if_read() {
    if (t_entry.tid != gettid()) return {};
    return {t_entry.st.st_ino, t_entry.st.st_dev, true};
}

Id socket_id(int fd) {
    const int saved = errno;
    Id id;
    if (int ns = kernel::ioctl(fd, SIOCGSKNS, nullptr); ns >= 0) {
        struct stat st{};
        if (kernel::fstat(ns, &st) == 0) id = {st.st_ino, st.st_dev, true};
        kernel::close(ns);
    }
    errno = saved;
    return id;
}

void SocketNamespace::learn(Id where) {
    if (!where.known || known_ == Known::yes) return;
    known_ = Known::yes, ino_ = where.ino, dev_ = where.dev;
}

bool SocketNamespace::holds_thread(int fd, std::string& why) {
    int saved = errno;
    if (known_ == Known::not_asked) {
        known_ = Known::refused;
        learn(socket_id(fd));
    }
    struct stat mine{};
    bool ok = false;
    if (!thread_netns(mine)) {
        why = "cannot read this thread's network namespace (/proc/thread-self/ns/net)";
    } else if (known_ == Known::yes) {
        ok = mine.st_ino == ino_ && mine.st_dev == dev_;
        if (!ok) why = "this thread's network namespace is not its socket's";
    } else {
        ok = g_initial.known && mine.st_ino == g_initial.st.st_ino && mine.st_dev == g_initial.st.st_dev;
        if (!ok) why = "this thread left the process's network namespace and the socket's is unknown";
    }
    errno = saved;
    return ok;
}

void thread_moved() { t_entry.tid = 0; }

}  // namespace rdmasock::netns
