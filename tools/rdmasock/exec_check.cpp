#include "exec_check.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "sys/exec_image.hpp"

namespace rdmasock::cli {

namespace {

bool executable_file(const std::string& p) {
    struct stat st{};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}

}  // namespace

std::string resolve_command(const std::string& cmd) {
    if (cmd.empty()) return {};
    if (cmd.find('/') != std::string::npos) return executable_file(cmd) ? cmd : std::string();
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
        size_t end = dirs.find(':', start);
        if (end == std::string::npos) end = dirs.size();
        std::string dir = dirs.substr(start, end - start);
        std::string full = (dir.empty() ? "." : dir) + "/" + cmd;  // empty entry = current directory
        if (executable_file(full)) return full;
        start = end + 1;
    }
    return {};
}

std::string preload_blocker(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};  // exec will report it
    const exec_image::Image image = exec_image::inspect(fd);
    close(fd);
    switch (image) {
        case exec_image::Image::go:
            return path + " is a Go program: the Go runtime makes system calls directly, so an LD_PRELOAD "
                          "library never sees its sockets";
        case exec_image::Image::static_linked:
            return path + " is statically linked (no ELF interpreter): the dynamic loader never runs, so "
                          "LD_PRELOAD is ignored";
        case exec_image::Image::foreign:
            return path + " is built for another machine or word size than the library: the dynamic loader "
                          "skips the preload";
        default: return {};  // dynamic, or a format exec judges
    }
}

}  // namespace rdmasock::cli
