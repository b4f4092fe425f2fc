// The checks of `rdmasock doctor`, one result line each (doctor.cpp prints them).
#pragma once

#include <string>
#include <vector>

#include "base/config.hpp"

namespace rdmasock::cli {

enum class Level { ok, warn, fail };

struct Check {
    Level level;
    std::string name;    // "shm: memfd sealing"
    std::string detail;  // what was found and, unless ok, what to fix
};

using Checks = std::vector<Check>;

// doctor_shm.cpp: the kernel features the same-host transport uses.
void check_shm(const Config& cfg, Checks& out);
// doctor_rdma.cpp: libibverbs, devices and ports, the device and GID the
// transport would pick, the memlock limit RDMA registration needs.
void check_rdma(const Config& cfg, Checks& out);

}  // namespace rdmasock::cli
