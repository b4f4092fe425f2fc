#include "sys/raw_syscall.hpp"
#include "sys/fault_guard.hpp"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "sys/handler_slots.hpp"

namespace rdmasock::guard {

#if defined(__x86_64__)

// The two copies, the same code (one macro) at two addresses so the handler
// knows which side is the application's. Below 2 KiB, 64- then 16-byte SSE moves (rep movsb
// starts slowly); the rest, and everything from 2 KiB, `rep movsb` (as fast as
// memcpy there). They return RCX, the bytes not copied: 0 normally.
// Invariant for the handler: in the vector part RDI/RSI/RDX describe what is
// left before the current block (they move only after its stores), so a fault
// there resumes at `_bytes`, which redoes the rest with rep movsb; that faults
// on the exact byte, RCX counting what is left, and resumes at `_done`.
// endbr64 keeps them callable under CET/IBT.
asm(R"(
    .macro RDMASOCK_GUARD_COPY fn, tag
    .text
    .p2align 4
    .globl \fn
    .hidden \fn
    .type \fn, @function
\fn:
    .cfi_startproc
    endbr64
    cmpq $2048, %rdx
    jae 3f
    .globl rdmasock_guard_\tag\()_vec
    .hidden rdmasock_guard_\tag\()_vec
rdmasock_guard_\tag\()_vec:
    cmpq $64, %rdx
    jb 2f
1:  movdqu (%rsi), %xmm0
    movdqu 16(%rsi), %xmm1
    movdqu 32(%rsi), %xmm2
    movdqu 48(%rsi), %xmm3
    movdqu %xmm0, (%rdi)
    movdqu %xmm1, 16(%rdi)
    movdqu %xmm2, 32(%rdi)
    movdqu %xmm3, 48(%rdi)
    addq $64, %rsi
    addq $64, %rdi
    subq $64, %rdx
    cmpq $64, %rdx
    jae 1b
2:  cmpq $16, %rdx
    jb 3f
    movdqu (%rsi), %xmm0
    movdqu %xmm0, (%rdi)
    addq $16, %rsi
    addq $16, %rdi
    subq $16, %rdx
    jmp 2b
    .globl rdmasock_guard_\tag\()_bytes
    .hidden rdmasock_guard_\tag\()_bytes
rdmasock_guard_\tag\()_bytes:
3:  movq %rdx, %rcx
    .globl rdmasock_guard_\tag\()_insn
    .hidden rdmasock_guard_\tag\()_insn
rdmasock_guard_\tag\()_insn:
    rep movsb
    .globl rdmasock_guard_\tag\()_done
    .hidden rdmasock_guard_\tag\()_done
rdmasock_guard_\tag\()_done:
    movq %rcx, %rax
    ret
    .cfi_endproc
    .size \fn, .-\fn
    .endm

    RDMASOCK_GUARD_COPY rdmasock_guard_copy_to_user, to
    RDMASOCK_GUARD_COPY rdmasock_guard_copy_from_user, from
    .purgem RDMASOCK_GUARD_COPY
)");

extern "C" {
size_t rdmasock_guard_copy_to_user(void* dst, const void* src, size_t n);
size_t rdmasock_guard_copy_from_user(void* dst, const void* src, size_t n);
extern const char rdmasock_guard_to_vec[], rdmasock_guard_to_bytes[], rdmasock_guard_to_insn[], rdmasock_guard_to_done[];
extern const char rdmasock_guard_from_vec[], rdmasock_guard_from_bytes[], rdmasock_guard_from_insn[], rdmasock_guard_from_done[];
}

size_t copy_to_user(void* dst, const void* src, size_t n) { return rdmasock_guard_copy_to_user(dst, src, n); }
size_t copy_from_user(void* dst, const void* src, size_t n) { return rdmasock_guard_copy_from_user(dst, src, n); }
bool supported() { return true; }

#else

size_t copy_to_user(void* dst, const void* src, size_t n) {
    std::memcpy(dst, src, n);
    return 0;
}
size_t copy_from_user(void* dst, const void* src, size_t n) {
    std::memcpy(dst, src, n);
    return 0;
}
bool supported() { return false; }

#endif

namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

SigactionFn libc_sigaction() {
    static std::atomic<SigactionFn> fn{nullptr};
    SigactionFn f = fn.load(std::memory_order_acquire);
    if (!f) {
        // The next definition after ours: libc's, or a sanitizer's interceptor in front of it.
        f = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
        if (!f) f = reinterpret_cast<SigactionFn>(dlsym(RTLD_DEFAULT, "__sigaction"));
        fn.store(f, std::memory_order_release);
    }
    return f;
}

// The application's disposition of SIGSEGV (slot 0) and SIGBUS (slot 1),
// read by the fault handler without a lock (handler_slots.hpp).
HandlerSlots<struct sigaction> g_disp[2];
std::atomic_flag g_write_lock = ATOMIC_FLAG_INIT;
std::atomic<bool> g_installed{false};

int slot_of(int sig) { return sig == SIGSEGV ? 0 : sig == SIGBUS ? 1 : -1; }

struct sigaction load(int sig) { return g_disp[slot_of(sig)].load(); }
void store(int sig, const struct sigaction& sa) { g_disp[slot_of(sig)].publish(sa); }  // under the write lock

bool is_handler(const struct sigaction& sa) {
    return sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN;
}

void on_fault(int sig, siginfo_t* si, void* ucv);

bool is_ours(const struct sigaction& sa) { return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_fault; }

// Our handler, carrying the application's mask and the flags that shape the
// delivery the kernel sets up (restart, alternate stack, no-defer), so its
// handler runs exactly as if it had been installed itself. SA_RESETHAND is
// ours to emulate. With no application handler: the alternate stack when there
// is one (a stack overflow must still reach us), restart.
int put_ours(int sig, const struct sigaction& app) {
    struct sigaction sa{};
    sa.sa_sigaction = on_fault;
    if (is_handler(app)) {
        sa.sa_mask = app.sa_mask;
        sa.sa_flags = SA_SIGINFO | (app.sa_flags & (SA_ONSTACK | SA_RESTART | SA_NODEFER));
    } else {
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    }
    return libc_sigaction()(sig, &sa, nullptr);
}

void set_default(int sig) {
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    libc_sigaction()(sig, &dfl, nullptr);
}

// A signal that is not a fault of our copies: what the kernel would have done
// with the application's disposition.
void forward(int sig, siginfo_t* si, void* uc) {
    struct sigaction app = load(sig);
    // Raised by the kernel for an instruction: it recurs once we return (not
    // an asynchronous machine-check notice).
    const bool fault = si && si->si_code > 0 && !(sig == SIGBUS && si->si_code == BUS_MCEERR_AO);
    if (app.sa_handler == SIG_IGN && !fault) return;  // a kill() of an ignored signal
    if (!is_handler(app)) {
        // SIG_DFL, or SIG_IGN of a fault (the kernel forces the default then):
        // die of it. A fault recurs once we return; a sent signal is sent
        // again, and stays pending (blocked in here) until we return.
        set_default(sig);
        if (!fault) raw_syscall(SYS_tgkill, getpid(), static_cast<pid_t>(raw_syscall(SYS_gettid)), sig);
        return;
    }
    if (app.sa_flags & SA_RESETHAND) {
        // The kernel resets only the handler: flags and mask stay as they were.
        HandlerWriteLock lk(g_write_lock);
        struct sigaction dfl = app;
        dfl.sa_handler = SIG_DFL;
        store(sig, dfl);
        put_ours(sig, dfl);
    }
    if (app.sa_flags & SA_SIGINFO) app.sa_sigaction(sig, si, uc);
    else app.sa_handler(sig);
}

void on_fault(int sig, siginfo_t* si, void* ucv) {
#if defined(__x86_64__)
    auto* uc = static_cast<ucontext_t*>(ucv);
    greg_t* g = uc->uc_mcontext.gregs;
    const auto ip = static_cast<uintptr_t>(g[REG_RIP]);
    const auto at = [ip](const char* a) { return reinterpret_cast<uintptr_t>(a); };
    const bool to_vec = ip >= at(rdmasock_guard_to_vec) && ip < at(rdmasock_guard_to_bytes);
    const bool from_vec = ip >= at(rdmasock_guard_from_vec) && ip < at(rdmasock_guard_from_bytes);
    const bool to = to_vec || ip == at(rdmasock_guard_to_insn);
    const bool from = from_vec || ip == at(rdmasock_guard_from_insn);
    if ((to || from) && si->si_code > 0) {
        // The application's side of the copy: what is left of it, from the
        // current pointer (a page of slack below it). A non-canonical address
        // faults as a general protection fault (SI_KERNEL, no address): the
        // ring never is one.
        const auto cur = static_cast<uintptr_t>(g[to ? REG_RDI : REG_RSI]);
        const auto left = static_cast<uintptr_t>(g[to_vec || from_vec ? REG_RDX : REG_RCX]);
        const auto a = reinterpret_cast<uintptr_t>(si->si_addr);
        const bool user = si->si_code == SI_KERNEL || (a + 4096 >= cur && a < cur + left);
        if (user) {
            const char* resume = to_vec ? rdmasock_guard_to_bytes
                                 : from_vec ? rdmasock_guard_from_bytes
                                 : to ? rdmasock_guard_to_done
                                      : rdmasock_guard_from_done;
            g[REG_RIP] = static_cast<greg_t>(at(resume));
            return;
        }
    }
#endif
    const int saved = errno;
    forward(sig, si, ucv);
    errno = saved;
}

}  // namespace

int real_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
    SigactionFn f = libc_sigaction();
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    return f(sig, act, old);
}

bool installed() { return g_installed.load(std::memory_order_acquire); }

bool covers(int sig) { return slot_of(sig) >= 0 && installed(); }

bool install() {
    if (!supported() || !libc_sigaction()) return false;
    HandlerWriteLock lk(g_write_lock);
    bool ok = true;
    for (int sig : {SIGSEGV, SIGBUS}) {
        struct sigaction cur{};
        if (libc_sigaction()(sig, nullptr, &cur) != 0) {
            ok = false;
            continue;
        }
        if (is_ours(cur)) continue;
        // Whatever is there now is the application's (or was installed past our
        // interposers, with a raw syscall): it keeps getting every other fault.
        store(sig, cur);
        if (put_ours(sig, cur) != 0) ok = false;
    }
    if (ok) g_installed.store(true, std::memory_order_release);
    return ok;
}

int app_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
    if (!covers(sig)) return real_sigaction(sig, act, old);
    struct sigaction prev;
    {
        HandlerWriteLock lk(g_write_lock);
        prev = load(sig);
        if (act) {
            if (put_ours(sig, *act) != 0) return -1;
            // What the kernel would report back for it: its mask (without
            // SIGKILL/SIGSTOP) and libc's restorer, as a plain sigaction would.
            struct sigaction k{};
            libc_sigaction()(sig, nullptr, &k);
            struct sigaction rec = *act;
            if (is_handler(*act)) {
                rec.sa_mask = k.sa_mask;
            } else {  // ours went in with no mask: the kernel would have kept the application's
                sigdelset(&rec.sa_mask, SIGKILL);
                sigdelset(&rec.sa_mask, SIGSTOP);
            }
#if defined(__x86_64__)
            // glibc always installs with its restorer, and reports it back.
            constexpr int kRestorer = 0x04000000;  // SA_RESTORER (not in glibc's headers)
            rec.sa_flags |= k.sa_flags & kRestorer;
            rec.sa_restorer = k.sa_restorer;
            // The kernel keeps only the flags it knows (Linux 5.11+: SA_UNSUPPORTED and
            // other unknown bits read back as 0, which programs probe for).
            rec.sa_flags &= SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER |
                            SA_RESETHAND | kRestorer;
#endif
            store(sig, rec);
        }
    }
    if (old) *old = prev;
    return 0;
}

}  // namespace rdmasock::guard
