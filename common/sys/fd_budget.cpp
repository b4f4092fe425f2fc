#include "sys/fd_budget.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

#include "sys/own_fd.hpp"

namespace rdmasock::fd_budget {

bool may_take(int n, int app_fd) {
    const int saved = errno;
    rlimit rl{};
    const bool known = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
    errno = saved;
    if (!known) return true;
    if (app_fd >= 0 && static_cast<rlim_t>(app_fd) < rl.rlim_cur / 2) return true;
    const rlim_t share = std::max<rlim_t>(rl.rlim_cur / 8, 16);
    return static_cast<rlim_t>(own_fd_count() + n) <= share;
}

}  // namespace rdmasock::fd_budget
