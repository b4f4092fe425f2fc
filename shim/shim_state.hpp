// Process-wide shim state: configuration, statistics, fork bookkeeping.
#pragma once

#include <memory>

#include "config.hpp"
#include "fd_table.hpp"

namespace rdmasock::shim {

const Config& config();
// Ends one fd's reference to a socket: the last one finishes the stream and
// prints the statistics line.
void release_socket(const std::shared_ptr<Socket>& s);
void print_stats(const Socket& s);

}  // namespace rdmasock::shim
