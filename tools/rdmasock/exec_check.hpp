// Can an LD_PRELOAD library reach this program? common/sys/exec_image.hpp reads
// it (the shim's exec hand-over asks the same): a static binary (no PT_INTERP:
// no dynamic loader, so LD_PRELOAD is ignored), a Go binary (its runtime makes
// raw system calls, past any libc hook) or one of another machine cannot.
#pragma once

#include <string>

namespace rdmasock::cli {

// CMD resolved as execvp would: as given when it contains '/', else the first
// executable regular file in $PATH. Empty when not found.
std::string resolve_command(const std::string& cmd);

// Empty when the preload can reach `path` (dynamic ELF, a #! script whose
// interpreter is one, or a file whose format we do not know and leave to
// exec); otherwise why not.
std::string preload_blocker(const std::string& path);

}  // namespace rdmasock::cli
