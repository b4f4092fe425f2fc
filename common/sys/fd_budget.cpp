#include "sys/fd_budget.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <fcntl.h>

#include "sys/kernel_calls.hpp"
#include "sys/own_fd.hpp"

namespace rdmasock::fd_budget {

namespace {
// The number the program's next open() would get (the shim's own live high
// up: own_fd.hpp), or INT_MAX when the table is full. Raw calls: held for two
// syscalls, never seen by the program's fd table.
int lowest_free(int app_fd) {
    const int fd = kernel::fcntl(app_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return errno == EMFILE ? INT_MAX : app_fd;
    kernel::close(fd);
    return fd;
}
rlim_t doorbell_share(rlim_t limit) { return std::max<rlim_t>(limit / 4, 16); }
}  // namespace

bool may_take(int n, int app_fd, For what) {
    const int saved = errno;
    rlimit rl{};
    const bool known = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
    int level = app_fd;
    if (known && what == For::doorbells && app_fd >= 0) level = std::max(level, lowest_free(app_fd));
    errno = saved;
    if (!known) return true;
    // Doorbells: all `n` below half (as many numbers as the program's next opens would get).
    const rlim_t top = static_cast<rlim_t>(level) + (what == For::doorbells ? static_cast<rlim_t>(n) : 1);
    const rlim_t own_after = static_cast<rlim_t>(own_fd_count() + n);
    // Doorbells stay for the connection's life: at most a quarter of the limit
    // in all, so a program that goes on opening still has three quarters.
    if (what == For::doorbells) return level >= 0 && top <= rl.rlim_cur / 2 && own_after <= doorbell_share(rl.rlim_cur);
    if (level >= 0 && top <= rl.rlim_cur / 2) return true;
    return own_after <= std::max<rlim_t>(rl.rlim_cur / 8, 16);
}

}  // namespace rdmasock::fd_budget
