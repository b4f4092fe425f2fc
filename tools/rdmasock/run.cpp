// rdmasock run: start a program with librdmasock preloaded and the RDMASOCK_*
// variables the options name, after checking the preload can reach it.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "commands.hpp"
#include "base/config.hpp"
#include "exec_check.hpp"
#include "library_path.hpp"

namespace rdmasock::cli {

namespace {

constexpr int kUsageError = 2;

void run_usage(FILE* to) {
    std::fputs(
        "usage: rdmasock run [OPTIONS] [--] CMD [ARGS...]\n"
        "  --transport auto|shm|rdma|tcp   RDMASOCK_TRANSPORT (default auto)\n"
        "  --peers LIST                    RDMASOCK_PEERS: hosts offered RDMA (addresses, CIDR)\n"
        "  --stats                         RDMASOCK_STATS=1: one line per connection at close\n"
        "  --spin-us N                     RDMASOCK_SPIN_US: spin before sleeping (0..1000000)\n"
        "  --shm-after-us N                RDMASOCK_SHM_AFTER_US: a same-host connection lives this long\n"
        "                                  before it switches to shared memory (0..60000000)\n"
        "  --log off|error|warn|info|debug RDMASOCK_LOG\n"
        "See rdmasock(1).\n",
        to);
}

// Option name -> the variable it sets; --stats is the only flag without a value.
const std::map<std::string, std::string> kValueOptions = {
    {"--transport", "RDMASOCK_TRANSPORT"},
    {"--peers", "RDMASOCK_PEERS"},
    {"--spin-us", "RDMASOCK_SPIN_US"},
    {"--shm-after-us", "RDMASOCK_SHM_AFTER_US"},
    {"--log", "RDMASOCK_LOG"},
};

// Same checks as the shim itself (common/config.cpp), but here a bad value is a
// usage error instead of a warning at run time.
bool validate(const std::map<std::string, std::string>& vars) {
    std::vector<std::string> errors;
    parse_config(
        [&](const char* name) -> const char* {
            auto it = vars.find(name);
            return it == vars.end() ? nullptr : it->second.c_str();
        },
        errors);
    for (auto e : errors) {
        // "RDMASOCK_X='v' is invalid (...); using D": drop what the shim would do instead.
        if (auto cut = e.rfind(')'); cut != std::string::npos) e.resize(cut + 1);
        for (const auto& [opt, var] : kValueOptions)
            if (e.rfind(var + "=", 0) == 0) e = opt + " " + e.substr(var.size() + 1);
        std::fprintf(stderr, "rdmasock run: %s\n", e.c_str());
    }
    return errors.empty();
}

// LD_PRELOAD with the library first; an existing list is kept after it, once.
std::string preload_value(const std::string& lib) {
    const char* old = std::getenv("LD_PRELOAD");
    if (!old || !*old) return lib;
    std::string rest, item;
    std::string s = old;
    for (size_t i = 0; i <= s.size(); ++i) {
        if (i == s.size() || s[i] == ' ' || s[i] == ':') {
            if (!item.empty() && item != lib) rest += " " + item;
            item.clear();
        } else {
            item += s[i];
        }
    }
    return lib + rest;
}

}  // namespace

int cmd_run(int argc, char** argv) {
    std::map<std::string, std::string> vars;
    int i = 1;
    for (; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a == "-h" || a == "--help") {
            run_usage(stdout);
            return 0;
        }
        if (a == "--stats") {
            vars["RDMASOCK_STATS"] = "1";
            continue;
        }
        if (a.rfind("-", 0) != 0) break;  // the command
        std::string name = a, value;
        bool inline_value = false;
        if (auto eq = a.find('='); eq != std::string::npos) {
            name = a.substr(0, eq), value = a.substr(eq + 1), inline_value = true;
        }
        auto opt = kValueOptions.find(name);
        if (opt == kValueOptions.end()) {
            std::fprintf(stderr, "rdmasock run: unknown option '%s'\n", a.c_str());
            run_usage(stderr);
            return kUsageError;
        }
        if (!inline_value) {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "rdmasock run: %s needs a value\n", name.c_str());
                return kUsageError;
            }
            value = argv[++i];
        }
        if (value.empty()) {
            std::fprintf(stderr, "rdmasock run: %s needs a non-empty value\n", name.c_str());
            return kUsageError;
        }
        vars[opt->second] = value;
    }
    if (i >= argc) {
        std::fputs("rdmasock run: no command given\n", stderr);
        run_usage(stderr);
        return kUsageError;
    }
    if (!validate(vars)) return kUsageError;

    const char* cmd = argv[i];
    std::string path = resolve_command(cmd);
    if (path.empty()) {
        std::fprintf(stderr, "rdmasock run: %s: command not found or not executable\n", cmd);
        return 127;
    }
    if (std::string why = preload_blocker(path); !why.empty()) {
        std::fprintf(stderr, "rdmasock run: refusing to run %s: %s\n", cmd, why.c_str());
        return 1;
    }
    std::string err;
    std::string lib = find_library(err);
    if (lib.empty()) {
        std::fprintf(stderr, "rdmasock run: %s\n", err.c_str());
        return 1;
    }
    for (const auto& [var, value] : vars) setenv(var.c_str(), value.c_str(), 1);
    setenv("LD_PRELOAD", preload_value(lib).c_str(), 1);
    // The resolved path: the program checked is the program run.
    execv(path.c_str(), argv + i);
    if (errno == ENOEXEC) {  // a script without #!: run it with /bin/sh as execvp does
        std::vector<char*> sh{const_cast<char*>("/bin/sh"), const_cast<char*>(path.c_str())};
        for (int k = i + 1; k < argc; ++k) sh.push_back(argv[k]);
        sh.push_back(nullptr);
        execv("/bin/sh", sh.data());
    }
    std::fprintf(stderr, "rdmasock run: cannot execute %s: %s\n", path.c_str(), std::strerror(errno));
    return errno == ENOENT ? 127 : 126;
}

}  // namespace rdmasock::cli
