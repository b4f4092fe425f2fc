// stdio over a socket with kept bytes (common/shm/leftover.hpp).
//
// glibc's stdio reads a stream's fd through its own internal read, which the
// shim never sees: a FILE over a socket whose next bytes the shim keeps (a
// hand-over claimed them from a writer that did not answer, or took them from
// one that was gone) would read the kernel's bytes and miss them, and a C
// handler an inetd-style server execs reads its request with fgets(stdin).
// Such a FILE is made a stream that reads and writes through the shim's own
// calls (fopencookie), which serve the kept bytes in their place; its fileno()
// is the socket's number, as a stream fdopen made.
#pragma once

#include <cstdio>

namespace rdmasock::shim {

// fdopen's work for a socket with kept bytes owed (io_path.hpp kept_owed);
// nullptr with errno set where it cannot (an invalid mode, no memory).
FILE* kept_bytes_stream(int fd, const char* mode);
// At load, after the kept bytes an exec named were adopted: stdin, where fd 0
// is a socket with kept bytes owed, becomes such a stream.
void stdin_through_kept_bytes();

}  // namespace rdmasock::shim
