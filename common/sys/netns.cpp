#include "sys/netns.hpp"

#include <linux/sockios.h>
#include <sys/stat.h>

#include <cerrno>

#include "sys/kernel_calls.hpp"

namespace rdmasock::netns {

namespace {

bool thread_netns(struct stat& st) { return kernel::stat("/proc/thread-self/ns/net", &st) == 0; }

// The process's namespace when the library loaded (before any unshare of the program's).
struct Initial {
    struct stat st{};
    bool known = false;
    Initial() {
        int saved = errno;
        known = thread_netns(st);
        errno = saved;
    }
} g_initial;

}  // namespace

bool SocketNamespace::holds_thread(int fd, std::string& why) {
    int saved = errno;
    if (known_ == Known::not_asked) {
        known_ = Known::refused;
        if (int ns = kernel::ioctl(fd, SIOCGSKNS, nullptr); ns >= 0) {
            struct stat st{};
            if (kernel::fstat(ns, &st) == 0) known_ = Known::yes, ino_ = st.st_ino, dev_ = st.st_dev;
            kernel::close(ns);
        }
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

}  // namespace rdmasock::netns
