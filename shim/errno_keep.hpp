// errno as the kernel leaves it: a call that succeeds does not change it.
// The shim makes calls of its own on the way (a doorbell read that finds
// nothing, a side-channel send to a peer that left); programs read errno after
// a success (nginx logs it after a recv that returned 0; code that clears errno
// before a call and tests it after), so an interposer hands back the caller's.
#pragma once

#include <cerrno>

namespace rdmasock::shim {

class ErrnoKept {
public:
    // The result, with the caller's errno back when it says success (>= 0).
    template <class T>
    T operator()(T r) const {
        if (r >= 0) errno = saved_;
        return r;
    }

private:
    int saved_ = errno;
};

}  // namespace rdmasock::shim
