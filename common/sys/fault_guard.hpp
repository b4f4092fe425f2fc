// Copies between the rings and application buffers that report a bad
// application buffer instead of crashing, as the kernel's copy_to_user does:
// recv into an unmapped or read-only page, send from an unmapped one, gets
// EFAULT (issue #13 item 5), with no syscall on the fast path.
//
// How: on x86-64 the copy is one `rep movsb` at a known address. A fault there
// lands in the shim's SIGSEGV/SIGBUS handler, which checks that the faulting
// instruction is that copy and the faulting address is on the application's
// side of it, and then resumes the copy's epilogue with RCX (the bytes not
// copied, exact: rep movsb stops at the faulting byte) as the result. Every
// other fault goes to the application's own disposition exactly as the kernel
// would deliver it: its handler (SA_SIGINFO or not, its mask, SA_NODEFER,
// SA_RESETHAND), SIG_IGN or SIG_DFL (the program dies of the signal, as it
// would without the shim). The shim's sigaction/signal interposers keep the
// application's disposition here, so the program sees what it set.
//
// The handler is installed lazily, at the first upgraded connection
// (Connection::upgrade); until then, and on other architectures, the copies are
// plain memcpy and a bad buffer faults as it always did.
#pragma once

#include <signal.h>

#include <cstddef>

namespace rdmasock::guard {

// Copy n bytes; return how many were NOT copied because the application's side
// faulted (0: everything copied). "to_user": dst is the application's buffer;
// "from_user": src is. Bytes before the fault are copied, in order.
size_t copy_to_user(void* dst, const void* src, size_t n);
size_t copy_from_user(void* dst, const void* src, size_t n);

// Installs (or re-installs, when something replaced it behind the
// interposers' back) the fault handler. Idempotent, cheap after the first call
// when still in place. False where unsupported (not x86-64) or when
// sigaction failed; the copies are then unguarded.
bool install();
bool installed();
bool supported();

// The application's view of SIGSEGV/SIGBUS once the handler is installed
// (the shim's sigaction and signal interposers): records act, returns the
// previously recorded one in old, and keeps the shim's handler in place with
// the application's mask and flags. Returns -1 with errno for a bad signal.
// Before installation (or for any other signal) it is plain sigaction.
bool covers(int sig);
int app_sigaction(int sig, const struct sigaction* act, struct sigaction* old);

// The sigaction the shim calls itself (libc's, found with dlsym(RTLD_NEXT) so
// that the shim's own interposer is bypassed).
int real_sigaction(int sig, const struct sigaction* act, struct sigaction* old);

}  // namespace rdmasock::guard
