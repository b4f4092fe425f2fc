#include <cstdio>

#include "commands.hpp"

namespace rdmasock::cli {

int cmd_doctor(int, char**) {
    std::fputs("rdmasock doctor: not implemented yet\n", stderr);
    return 1;
}

}  // namespace rdmasock::cli
