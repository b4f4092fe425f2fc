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

bool same(const struct stat& a, const struct stat& b) { return a.st_ino == b.st_ino && a.st_dev == b.st_dev; }

}  // namespace

bool thread_in_socket_netns(int fd, std::string& why) {
    int saved = errno;
    struct stat mine{}, its{};
    bool ok = false;
    if (!thread_netns(mine)) {
        why = "cannot read this thread's network namespace (/proc/thread-self/ns/net)";
    } else if (int ns = kernel::ioctl(fd, SIOCGSKNS, nullptr); ns >= 0) {
        ok = kernel::fstat(ns, &its) == 0 && same(mine, its);
        kernel::close(ns);
        if (!ok) why = "this thread's network namespace is not its socket's";
    } else {
        ok = g_initial.known && same(mine, g_initial.st);
        if (!ok) why = "this thread left the process's network namespace and the socket's is unknown";
    }
    errno = saved;
    return ok;
}

}  // namespace rdmasock::netns
