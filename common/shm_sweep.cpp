#include "shm_sweep.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>

namespace rdmasock {

int sweep_orphan_segments() {
    DIR* d = opendir("/dev/shm");
    if (!d) return 0;
    int removed = 0;
    const int self = static_cast<int>(getpid());
    while (dirent* e = readdir(d)) {
        int pid = 0, end = 0;
        if (sscanf(e->d_name, "rdmasock-%d-%*[0-9a-f]%n", &pid, &end) != 1 || e->d_name[end] != '\0') continue;
        if (pid <= 0 || pid == self) continue;
        // Alive, or alive as another user (EPERM): not an orphan. A pid reused
        // since only delays the sweep.
        if (kill(pid, 0) == 0 || errno != ESRCH) continue;
        struct stat st{};
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
        if (shm_unlink(("/" + std::string(e->d_name)).c_str()) == 0) ++removed;
    }
    closedir(d);
    return removed;
}

void sweep_orphan_segments_now_and_then() {
    static std::atomic<int64_t> next_s{0};
    int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::steady_clock::now().time_since_epoch()).count();
    int64_t due = next_s.load(std::memory_order_relaxed);
    if (now < due || !next_s.compare_exchange_strong(due, now + 60)) return;
    sweep_orphan_segments();
}

}  // namespace rdmasock
