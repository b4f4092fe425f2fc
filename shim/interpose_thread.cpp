// pthread_cancel: libc's, then the shim's part, so a thread asleep in a shim
// wait is woken to be cancelled as glibc would cancel it in the kernel's
// (common/thread_cancel.hpp).
#include <dlfcn.h>
#include <pthread.h>

#include "thread_cancel.hpp"

extern "C" int pthread_cancel(pthread_t thread) {
    using Fn = int (*)(pthread_t);
    static const auto real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_cancel"));
    if (!real) return ENOSYS;
    const int rc = real(thread);
    if (rc == 0) rdmasock::cancel::requested(thread);
    return rc;
}
