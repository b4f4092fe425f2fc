// Orphaned segment names (creator killed before its peer attached) are swept;
// names of live creators, of other users and of our own process are not.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "shm_channel.hpp"
#include "shm_sweep.hpp"

using namespace rdmasock;

namespace {

int dead_pid() {  // a pid that existed and is gone (reaped)
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, nullptr, 0);
    return static_cast<int>(p);
}

std::string make_segment(int pid, const char* tail) {
    std::string name = "/rdmasock-" + std::to_string(pid) + "-" + tail;
    int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    close(fd);
    return name;
}

bool exists(const std::string& name) {
    struct stat st{};
    return stat(("/dev/shm" + name).c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("segments of dead creators are swept, live ones are kept") {
    std::string err;
    auto mine = ShmChannel::create(1 << 16, err);  // our own pid (may run the periodic sweep first)
    REQUIRE(mine);
    std::string orphan = make_segment(dead_pid(), "00c0ffee00c0ffee");
    std::string live = make_segment(static_cast<int>(getppid()), "00c0ffee00c0ffef");
    std::string odd = make_segment(dead_pid(), "not-hex");  // not a name we create
    CHECK(sweep_orphan_segments() >= 1);
    CHECK_FALSE(exists(orphan));
    CHECK(exists(live));
    CHECK(exists(odd));
    CHECK(exists(mine->name()));
    shm_unlink(live.c_str());
    shm_unlink(odd.c_str());
}

TEST_CASE("another user's orphaned segment is left alone") {
    if (geteuid() != 0) {
        WARN("not root: cannot create a segment as another user");
        return;
    }
    std::string name = make_segment(dead_pid(), "00c0ffee00c0fff0");
    REQUIRE(chown(("/dev/shm" + name).c_str(), 65534, 65534) == 0);
    sweep_orphan_segments();
    CHECK(exists(name));
    shm_unlink(name.c_str());
}
