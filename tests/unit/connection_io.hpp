// Whole-string I/O through a Connection, for the unit tests that drive two of them.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <string>

#include "connection/connection.hpp"

namespace rdmasock::test {

inline ssize_t send_str(Connection& c, const std::string& s) {
    iovec v{const_cast<char*>(s.data()), s.size()};
    return c.send(&v, 1, MSG_NOSIGNAL);
}

// Up to n bytes: fewer only at end of stream or on an error.
inline std::string recv_n(Connection& c, size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
        iovec v{out.data() + got, n - got};
        ssize_t r = c.recv(&v, 1, 0);
        if (r <= 0) break;
        got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
}

}  // namespace rdmasock::test
