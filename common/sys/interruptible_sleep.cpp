#include "sys/interruptible_sleep.hpp"

#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <ctime>

#include "sys/thread_cancel.hpp"

namespace rdmasock::sleep {

namespace {
constexpr long kSigsetBytes = 8;  // the kernel's sigset_t (_NSIG / 8), not glibc's 128-byte one
}

#if defined(__x86_64__)

// long rdmasock_sleep_syscall(const long call[7] /* nr, six arguments */,
//                             const volatile uint32_t* delivered, uint32_t seen)
// From `entry` to the syscall instruction the thread has not yet asked the
// kernel to sleep: cancel_entry() moves it to `cancelled`.
asm(R"(
    .text
    .p2align 4
    .globl rdmasock_sleep_syscall
    .hidden rdmasock_sleep_syscall
    .type rdmasock_sleep_syscall, @function
rdmasock_sleep_syscall:
    .cfi_startproc
    endbr64
    movq %rdi, %r11
    movq %rsi, %rcx
    movl %edx, %eax
    movq 8(%r11), %rdi
    movq 16(%r11), %rsi
    movq 24(%r11), %rdx
    movq 32(%r11), %r10
    movq 40(%r11), %r8
    movq 48(%r11), %r9
    .globl rdmasock_sleep_entry
    .hidden rdmasock_sleep_entry
rdmasock_sleep_entry:
    cmpl (%rcx), %eax
    jne rdmasock_sleep_cancelled
    movq (%r11), %rax
    .globl rdmasock_sleep_insn
    .hidden rdmasock_sleep_insn
rdmasock_sleep_insn:
    syscall
    ret
    .globl rdmasock_sleep_cancelled
    .hidden rdmasock_sleep_cancelled
rdmasock_sleep_cancelled:
    movq $-4, %rax
    ret
    .cfi_endproc
    .size rdmasock_sleep_syscall, .-rdmasock_sleep_syscall
)");

extern "C" {
long rdmasock_sleep_syscall(const long* call, const volatile uint32_t* delivered, uint32_t seen);
extern const char rdmasock_sleep_entry[], rdmasock_sleep_insn[], rdmasock_sleep_cancelled[];
}

namespace {
long enter(long nr, long a1, long a2, long a3, long a4, long a5, long a6, const signals::Seen& since) {
    const long call[7] = {nr, a1, a2, a3, a4, a5, a6};
    long r = rdmasock_sleep_syscall(call, signals::delivered_counter(), since.delivered);
    if (r < 0 && r > -4096) {
        errno = static_cast<int>(-r);
        return -1;
    }
    return r;
}
}  // namespace

void cancel_entry(void* ucv) {
    auto* uc = static_cast<ucontext_t*>(ucv);
    const auto ip = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
    if (ip >= reinterpret_cast<uintptr_t>(rdmasock_sleep_entry) && ip <= reinterpret_cast<uintptr_t>(rdmasock_sleep_insn))
        uc->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(reinterpret_cast<uintptr_t>(rdmasock_sleep_cancelled));
}

#else

namespace {
// Elsewhere the last look and the system call are not one step: a signal in
// between is seen by the next wait, not this one.
long enter(long nr, long a1, long a2, long a3, long a4, long a5, long a6, const signals::Seen& since) {
    if (signals::since(since)) {
        errno = EINTR;
        return -1;
    }
    return syscall(nr, a1, a2, a3, a4, a5, a6);
}
}  // namespace

void cancel_entry(void*) {}

#endif

namespace {
// One kernel sleep, with what a pending pthread_cancel asks of it
// (thread_cancel.hpp): not begun, capped, or a wake-up that says nothing.
template <class Enter>
long cancellable(int64_t timeout_us, const signals::Seen& since, Enter&& enter_with) {
    cancel::Sleep c(timeout_us);
    if (c.skip()) {
        errno = EINTR;
        return -1;
    }
    long r = enter_with(c.timeout_us());
    if (r < 0 && errno == EINTR && c.only_a_request(signals::since(since))) return 0;
    return r;
}
}  // namespace

int poll(pollfd* fds, nfds_t n, int64_t timeout_us, const sigset_t* mask, const signals::Seen& since) {
    return static_cast<int>(cancellable(timeout_us, since, [&](int64_t us) {
        timespec ts{us / 1000000, (us % 1000000) * 1000};
        return enter(SYS_ppoll, reinterpret_cast<long>(fds), static_cast<long>(n),
                     us < 0 ? 0 : reinterpret_cast<long>(&ts), reinterpret_cast<long>(mask), kSigsetBytes, 0, since);
    }));
}

int epoll_wait(int epfd, epoll_event* events, int max, int timeout_ms, const sigset_t* mask,
               const signals::Seen& since) {
    const int64_t timeout_us = timeout_ms < 0 ? -1 : int64_t{timeout_ms} * 1000;
    return static_cast<int>(cancellable(timeout_us, since, [&](int64_t us) {
        // Rounded up: a capped sleep is never shorter than the cap's whole milliseconds.
        const int ms = us < 0 ? -1 : static_cast<int>((us + 999) / 1000);
        return enter(SYS_epoll_pwait, epfd, reinterpret_cast<long>(events), max, ms, reinterpret_cast<long>(mask),
                     kSigsetBytes, since);
    }));
}

}  // namespace rdmasock::sleep
