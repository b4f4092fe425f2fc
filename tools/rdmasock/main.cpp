// rdmasock: start programs with the preload, list live connections, check the host.
#include <cstdio>
#include <cstring>

#include "commands.hpp"

namespace {

void usage(FILE* to) {
    std::fputs(
        "usage: rdmasock run [OPTIONS] -- CMD [ARGS...]   start CMD with librdmasock preloaded\n"
        "       rdmasock stat [-p PID] [--json]            list live shimmed connections\n"
        "       rdmasock doctor                            check this host\n"
        "See rdmasock(1) and rdmasock(7).\n",
        to);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char* sub = argv[1];
    if (!std::strcmp(sub, "-h") || !std::strcmp(sub, "--help") || !std::strcmp(sub, "help")) {
        usage(stdout);
        return 0;
    }
    if (!std::strcmp(sub, "run")) return rdmasock::cli::cmd_run(argc - 1, argv + 1);
    if (!std::strcmp(sub, "stat")) return rdmasock::cli::cmd_stat(argc - 1, argv + 1);
    if (!std::strcmp(sub, "doctor")) return rdmasock::cli::cmd_doctor(argc - 1, argv + 1);
    std::fprintf(stderr, "rdmasock: unknown command '%s'\n", sub);
    usage(stderr);
    return 2;
}
