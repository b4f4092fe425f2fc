// rdmasock doctor: what works on this host and what to fix. One line per check;
// exit 0 when nothing failed (no RDMA is a warning: same-host shm still works).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "commands.hpp"
#include "base/config.hpp"
#include "doctor_checks.hpp"
#include "library_path.hpp"

namespace rdmasock::cli {

namespace {

const char* label(Level l) {
    switch (l) {
        case Level::ok: return "ok  ";
        case Level::warn: return "warn";
        case Level::fail: return "FAIL";
    }
    return "?";
}

}  // namespace

int cmd_doctor(int argc, char** argv) {
    if (argc > 1) {
        bool help = !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help");
        std::fputs("usage: rdmasock doctor   (checks this host; see rdmasock(1))\n", help ? stdout : stderr);
        return help ? 0 : 2;
    }
    Checks checks;
    std::vector<std::string> errors;
    Config cfg = parse_config([](const char* n) { return std::getenv(n); }, errors);
    for (const auto& e : errors) checks.push_back({Level::warn, "config", e});

    std::string err;
    std::string lib = find_library(err);
    if (lib.empty()) checks.push_back({Level::fail, "library", err});
    else checks.push_back({Level::ok, "library", lib});

    check_shm(cfg, checks);
    check_rdma(cfg, checks);

    int fails = 0, warns = 0;
    for (const auto& c : checks) {
        std::printf("%s  %-22s %s\n", label(c.level), c.name.c_str(), c.detail.c_str());
        fails += c.level == Level::fail;
        warns += c.level == Level::warn;
    }
    bool shm_ok = true;
    for (const auto& c : checks)
        if (c.name.rfind("shm:", 0) == 0 && c.level != Level::ok) shm_ok = false;
    std::printf("summary: same-host shm %s; %d warning(s), %d failure(s)\n", shm_ok ? "works" : "does NOT work", warns,
                fails);
    return fails ? 1 : 0;
}

}  // namespace rdmasock::cli
