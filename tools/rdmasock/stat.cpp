#include <cstdio>

#include "commands.hpp"

namespace rdmasock::cli {

int cmd_stat(int, char**) {
    std::fputs("rdmasock stat: not implemented yet\n", stderr);
    return 1;
}

}  // namespace rdmasock::cli
