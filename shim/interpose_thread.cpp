// pthread_cancel: libc's, then the shim's part, so a thread asleep in a shim
// wait is woken to be cancelled as glibc would cancel it in the kernel's
// (common/thread_cancel.hpp).
#include <pthread.h>

#include <cerrno>

#include "real_calls.hpp"
#include "sys/thread_cancel.hpp"

extern "C" int pthread_cancel(pthread_t thread) {
    const auto real = rdmasock::real::calls().pthread_cancel;
    if (!real) return ENOSYS;
    const int rc = real(thread);
    if (rc == 0) rdmasock::cancel::requested(thread);
    return rc;
}
