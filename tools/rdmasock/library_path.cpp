#include "library_path.hpp"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>

// The Makefile passes -DRDMASOCK_LIBDIR="$(PREFIX)/lib".
#ifndef RDMASOCK_LIBDIR
#define RDMASOCK_LIBDIR "/usr/local/lib"
#endif

namespace rdmasock::cli {

namespace {

constexpr const char* kLibName = "librdmasock.so";

// Directory of this executable, via /proc/self/exe so that a staged (DESTDIR)
// or uninstalled build finds the library it was built or installed with.
std::string exe_dir() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return {};
    std::string p(buf, static_cast<size_t>(n));
    auto slash = p.rfind('/');
    return slash == std::string::npos ? std::string() : p.substr(0, slash);
}

}  // namespace

std::vector<std::string> library_candidates() {
    if (const char* env = std::getenv("RDMASOCK_LIBRARY"); env && *env) return {env};
    std::vector<std::string> c{std::string(RDMASOCK_LIBDIR) + "/" + kLibName};
    if (std::string dir = exe_dir(); !dir.empty()) {
        c.push_back(dir + "/../lib/" + kLibName);
        c.push_back(dir + "/" + kLibName);
    }
    return c;
}

std::string find_library(std::string& err) {
    std::string tried;
    for (const auto& c : library_candidates()) {
        char real[PATH_MAX];
        if (access(c.c_str(), R_OK) == 0 && realpath(c.c_str(), real)) return real;
        tried += (tried.empty() ? "" : ", ") + c;
    }
    err = "librdmasock.so not found (tried " + tried + "); set RDMASOCK_LIBRARY to its path";
    return {};
}

}  // namespace rdmasock::cli
