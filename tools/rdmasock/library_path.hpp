// Where the launcher finds librdmasock.so (docs/install.md, "Which library").
#pragma once

#include <string>
#include <vector>

namespace rdmasock::cli {

// The candidates in lookup order: $RDMASOCK_LIBRARY (alone, when set), the
// compiled-in $(PREFIX)/lib, then ../lib and ./ next to this executable.
std::vector<std::string> library_candidates();

// The first readable candidate as an absolute path; empty (and `err` says what
// was tried) when none exists.
std::string find_library(std::string& err);

}  // namespace rdmasock::cli
