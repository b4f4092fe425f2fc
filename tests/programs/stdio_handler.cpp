// An inetd-style handler written in C: it reads its request with stdio, as such
// handlers do, from a socket it inherited through an exec (tests/integration/
// handover_peer_stopped.sh, the stdio variants). glibc's stdio reads through
// its own internal read, which a preloaded library never sees: bytes the shim
// keeps for the socket (a hand-over claimed them from a client that did not
// answer) must reach it all the same (shim/stdio_kept.hpp).
//
// Usage: stdio_handler HOW FD STATEDIR REQUEST_BYTES
//   HOW: stdin (fread from stdin, the socket dup'ed onto fd 0 by the server),
//        getchar (stdin made unbuffered, a byte at a time), fdopen (fread from
//        fdopen(FD)).
// Prints what it read (the request's bytes are 0..255 repeated), touches
// STATEDIR/read, reads the rest to the end of stream, prints it, and answers
// "bye" on FD. Built twice: dynamically, and statically linked (stdio_handler_static:
// no loader, so no shim in it).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: stdio_handler stdin|getchar|fdopen FD STATEDIR REQUEST_BYTES\n");
        return 2;
    }
    const std::string how = argv[1];
    const int fd = std::atoi(argv[2]);
    const size_t want = std::strtoul(argv[4], nullptr, 10);
    FILE* in = stdin;
    if (how == "fdopen") in = fdopen(fd, "r");
    else if (how == "getchar") setvbuf(stdin, nullptr, _IONBF, 0);
    if (!in) {
        std::perror("fdopen");
        return 1;
    }
    std::string got(want, '\0');
    size_t n = 0;
    if (how == "getchar") {
        for (int c; n < want && (c = getchar()) != EOF;) got[n++] = static_cast<char>(c);
    } else {
        n = std::fread(got.data(), 1, want, in);
    }
    bool intact = n == want;
    for (size_t i = 0; intact && i < n; ++i) intact = static_cast<unsigned char>(got[i]) == i % 256;
    std::printf("handler (stdio %s) read %zu bytes: %s\n", how.c_str(), n, intact ? "intact" : "DIFFERENT");
    std::fflush(stdout);
    const std::string state = std::string(argv[3]) + "/read";
    close(open(state.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));  // the test lets the client run again
    std::string rest;
    char buf[256];
    if (how == "getchar") {
        for (int c; (c = getchar()) != EOF;) rest += static_cast<char>(c);
    } else {
        for (size_t m; (m = std::fread(buf, 1, sizeof buf, in)) > 0;) rest.append(buf, m);
    }
    std::printf("handler then read '%s' and the end of stream\n", rest.c_str());
    std::fflush(stdout);
    if (write(fd, "bye", 3) != 3) std::perror("write");
    return 0;
}
