#include "sys/signal_seen.hpp"

#include <pthread.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "sys/fault_guard.hpp"
#include "sys/handler_slots.hpp"
#include "sys/interruptible_sleep.hpp"

namespace rdmasock::signals {

namespace {

// Written by the trampoline, read by the same thread's waits: volatile is
// what a signal handler and its own thread need. Initial-exec: a handler must
// not allocate a thread's TLS block (the shim is preloaded, so the static TLS
// area has room for it).
struct Counters {
    volatile uint32_t delivered;
    volatile uint32_t interrupting;
};
__thread Counters tls_counters __attribute__((tls_model("initial-exec")));

// Deliveries held back (DeferHandlers): what the kernel handed the trampoline.
struct Held {
    int sig;
    siginfo_t info;
    sigset_t mask;  // the handler's sa_mask
    int flags;      // its sa_flags (SA_NODEFER)
};
constexpr uint32_t kMaxHeld = 4;  // more in one section: the rest run at once, as before
__thread Held tls_held[kMaxHeld] __attribute__((tls_model("initial-exec")));
__thread Seen tls_held_base __attribute__((tls_model("initial-exec")));  // seen() while handlers are held back

// The application's handler of one signal (handler_slots.hpp).
struct Handler {
    void* fn = nullptr;     // sa_handler or sa_sigaction
    bool siginfo = false;   // the application asked for SA_SIGINFO
};
HandlerSlots<Handler> g_records[NSIG];
std::atomic_flag g_write_lock = ATOMIC_FLAG_INIT;

// The process the records belong to. A vfork child shares our memory: what
// it installs must not replace the parent's handlers here, so it goes to libc
// as it is. Kept here, uninstrumented: sanitizer runtimes call sigaction
// before they can run instrumented code.
std::atomic<int> g_pid{0};

bool vfork_child() {
    const int me = static_cast<int>(getpid());
    int known = g_pid.load(std::memory_order_relaxed);
    if (known == 0) return !g_pid.compare_exchange_strong(known, me) && known != me;
    return known != me;
}

Handler load(int sig) { return g_records[sig].load(); }
void publish(int sig, const Handler& h) { g_records[sig].publish(h); }  // under the write lock

// sa_handler and sa_sigaction share their storage: SIG_DFL and SIG_IGN read
// the same through either, SA_SIGINFO or not.
bool is_handler(const struct sigaction& sa) { return sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN; }

bool covered(int sig) { return sig > 0 && sig < NSIG && sig != SIGSEGV && sig != SIGBUS; }

void on_signal(int sig, siginfo_t* si, void* uc);

bool is_trampoline(const struct sigaction& k) { return (k.sa_flags & SA_SIGINFO) && k.sa_sigaction == on_signal; }

// Default action of a signal the trampoline got but the application no longer
// handles (it changed its disposition while this delivery was on its way).
void act_default(int sig) {
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    guard::real_sigaction(sig, &dfl, nullptr);
    raise(sig);  // blocked in here (unless SA_NODEFER): delivered once we return
}

void run_handler(int sig, siginfo_t* si, void* uc) {
    const Handler h = load(sig);
    if (!h.fn) {
        act_default(sig);
    } else if (h.siginfo) {
        reinterpret_cast<void (*)(int, siginfo_t*, void*)>(h.fn)(sig, si, uc);
    } else {
        const auto fn = reinterpret_cast<sighandler_t>(h.fn);
        if (fn == SIG_IGN) return;
        if (fn == SIG_DFL) act_default(sig);
        else fn(sig);
    }
}

void on_signal(int sig, siginfo_t* si, void* uc) {
    const int saved = errno;
    // The kernel's flags, not a record of ours: siginterrupt() and other libc
    // paths change them without passing our interposers.
    struct sigaction k{};
    const bool known = guard::real_sigaction(sig, nullptr, &k) == 0;
    const bool restarts = known && (k.sa_flags & SA_RESTART);
    tls_counters.delivered = tls_counters.delivered + 1;
    if (!restarts) tls_counters.interrupting = tls_counters.interrupting + 1;
    // A signal between a wait's last look and its kernel sleep: that sleep
    // must not begin (it returns EINTR instead).
    sleep::cancel_entry(uc);
    held::Counts& d = held::tls_counts;
    if (d.depth > 0 && d.held < kMaxHeld && known) {
        // The counts before the first one held back: what seen() says until
        // they have run (see seen()).
        if (d.held == 0) tls_held_base = {tls_counters.delivered - 1, tls_counters.interrupting - (restarts ? 0u : 1u)};
        Held& e = tls_held[d.held];
        e.sig = sig;
        e.info = *si;
        e.mask = k.sa_mask;
        e.flags = k.sa_flags;
        d.held = d.held + 1;
        errno = saved;
        return;
    }
    errno = saved;
    run_handler(sig, si, uc);
}

}  // namespace

// While a handler is held back (it arrived inside a section of a call: the
// handshake, a lock), the counts from before it: a wait that begins later in
// the same call (the handshake settled, then the ring's wait) must end for it
// at once, as the kernel's wait would have, not sleep with its handler held
// until the call returns, which it then never does.
Seen seen() {
    if (held::tls_counts.held > 0) return tls_held_base;
    return counted();
}

Seen counted() { return {tls_counters.delivered, tls_counters.interrupting}; }

bool since(const Seen& before) { return tls_counters.delivered != before.delivered; }

namespace held {

__thread Counts tls_counts __attribute__((tls_model("initial-exec")));

// Each under the mask the kernel would have set for it. A handler that calls
// into the shim again may hold back new ones; they queue behind and run in
// this loop.
void run() {
    Counts& d = tls_counts;
    const int saved = errno;
    while (d.held > 0 && d.depth == 0) {
        Held e = tls_held[0];
        // Taken out before it runs; the queue only moves while depth is 0 here,
        // and a delivery meanwhile runs at once (depth 0), never touching it.
        for (uint32_t i = 1; i < d.held; ++i) tls_held[i - 1] = tls_held[i];
        d.held = d.held - 1;
        sigset_t block = e.mask, old;
        if (!(e.flags & SA_NODEFER)) sigaddset(&block, e.sig);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        ucontext_t uc;
        getcontext(&uc);
        run_handler(e.sig, &e.info, &uc);
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }
    errno = saved;
}

}  // namespace held

HandlersNow::HandlersNow() : depth(held::tls_counts.depth), outer(held::tls_counts.outer) {
    held::tls_counts.depth = 0;
    held::tls_counts.outer = 0;
    if (held::tls_counts.held > 0) held::run();
}

HandlersNow::~HandlersNow() {
    held::tls_counts.depth = depth;
    held::tls_counts.outer = outer;
}

const volatile uint32_t* delivered_counter() { return &tls_counters.delivered; }

bool wrapped(int sig) {
    struct sigaction k{};
    return covered(sig) && guard::real_sigaction(sig, nullptr, &k) == 0 && is_trampoline(k);
}

MaskDuring::MaskDuring(const sigset_t* mask) {
    if (mask) set_ = pthread_sigmask(SIG_SETMASK, mask, &old_) == 0;
}

// Signals the mask held back and that are pending now are delivered here, on
// the way out, as the kernel delivers them on return from the call.
MaskDuring::~MaskDuring() {
    if (set_) pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

void note_process() { g_pid.store(static_cast<int>(getpid()), std::memory_order_relaxed); }

int app_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
    if (!covered(sig) || vfork_child()) return guard::real_sigaction(sig, act, old);
    HandlerWriteLock lk(g_write_lock);
    const Handler prev = load(sig);
    struct sigaction k{};
    int rc;
    if (act && is_handler(*act)) {
        // The record first: a delivery that already sees the trampoline finds it.
        publish(sig, {(act->sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(act->sa_sigaction)
                                                   : reinterpret_cast<void*>(act->sa_handler),
                      (act->sa_flags & SA_SIGINFO) != 0});
        struct sigaction t = *act;
        t.sa_sigaction = on_signal;
        t.sa_flags |= SA_SIGINFO;
        rc = guard::real_sigaction(sig, &t, &k);
        if (rc != 0) publish(sig, prev);
    } else {
        rc = guard::real_sigaction(sig, act, &k);
    }
    if (rc != 0) return rc;
    if (old) {
        *old = k;
        if (is_trampoline(k)) {  // the application's handler, as it installed it
            if (prev.siginfo) {
                old->sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(prev.fn);
            } else {
                old->sa_handler = reinterpret_cast<sighandler_t>(prev.fn);
                old->sa_flags &= ~SA_SIGINFO;
            }
        }
    }
    return 0;
}

}  // namespace rdmasock::signals
