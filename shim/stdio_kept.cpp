#include "stdio_kept.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/log.hpp"
#include "io_path.hpp"

namespace rdmasock::shim {
namespace {

int fd_of(void* cookie) { return static_cast<int>(reinterpret_cast<intptr_t>(cookie)); }

// read, write and close are this library's own interposers: the kept bytes
// first, then the kernel's, and the last close's RST where they went unread.
ssize_t stream_read(void* cookie, char* buf, size_t n) { return ::read(fd_of(cookie), buf, n); }
ssize_t stream_write(void* cookie, const char* buf, size_t n) { return ::write(fd_of(cookie), buf, n); }
int stream_close(void* cookie) { return ::close(fd_of(cookie)); }
int stream_seek(void*, off64_t*, int) { return errno = ESPIPE, -1; }  // a socket, as fseek finds it

}  // namespace

FILE* kept_bytes_stream(int fd, const char* mode) {
    if (!mode || (mode[0] != 'r' && mode[0] != 'w' && mode[0] != 'a')) return errno = EINVAL, nullptr;
    cookie_io_functions_t io{stream_read, stream_write, stream_seek, stream_close};
    FILE* f = fopencookie(reinterpret_cast<void*>(static_cast<intptr_t>(fd)), mode, io);
    if (!f) return nullptr;
    f->_fileno = fd;  // fileno(), as for fdopen's stream (glibc marks a cookie stream -2 and reads through the cookie)
    if (std::strchr(mode, 'e')) fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
    RS_LOG(debug, "fd %d: a stdio stream over kept bytes reads through the shim", fd);
    return f;
}

void stdin_through_kept_bytes() {
    if (!kept_owed(0)) return;
    const int saved = errno;
    if (FILE* f = kept_bytes_stream(0, "r")) stdin = f;
    else RS_LOG(error, "stdin: cannot make a stream over its kept bytes (%s); stdio reads of fd 0 miss them", std::strerror(errno));
    errno = saved;
}

}  // namespace rdmasock::shim
