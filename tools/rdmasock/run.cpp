#include <cstdio>

#include "commands.hpp"

namespace rdmasock::cli {

int cmd_run(int, char**) {
    std::fputs("rdmasock run: not implemented yet\n", stderr);
    return 1;
}

}  // namespace rdmasock::cli
