// Which signal handlers ran on this thread: how a wait that spins in user
// space learns that a signal arrived while the kernel would have been asleep.
//
// Over TCP a blocked recv or poll sleeps in the kernel, and a signal with a
// handler ends that sleep (EINTR, or a restart after SA_RESTART). The shim
// first spins in user space: a signal then runs its handler right there, and
// nothing tells the spin. A program whose handler only sets a flag (alarm()
// timeouts, "stop on SIGTERM" loops, Python's signal module, which runs its
// handlers once the call returns) would wait on.
//
// So the application's handlers are installed behind a trampoline: the shim's
// sigaction and signal() interposers keep the application's handler here and
// point the kernel at on_signal() with the application's own mask and flags
// (SA_RESTART, SA_ONSTACK, SA_NODEFER, SA_RESETHAND: the kernel shapes the
// delivery exactly as before). The trampoline counts the delivery per thread,
// and whether it would interrupt a socket call (no SA_RESTART), then calls the
// application's handler with the same arguments. A wait compares the counts
// with those it took when it began (wait_engine.hpp). sigaction reports the
// kernel's view with the application's handler in place of the trampoline.
//
// Not covered: SIGSEGV and SIGBUS (the fault guard owns them), and handlers
// installed with a raw rt_sigaction system call (the wait then behaves as
// before: a signal during the spin is noticed only in the kernel sleep).
#pragma once

#include <signal.h>

#include <cstdint>

namespace rdmasock::signals {

// Deliveries seen on one thread so far; compare two to learn what happened between.
struct Seen {
    uint32_t delivered = 0;    // handlers run by the trampoline
    uint32_t interrupting = 0; // of those, without SA_RESTART
};

// A wait's starting point: the counts now, or, while handlers are held back
// (below), the counts from before the first of them, so a wait that begins
// then ends for them at once.
Seen seen();
// The counts now, held-back handlers included (what a wait compares with its start).
Seen counted();
// Whether a handler ran on this thread since `before` (one thread-local load).
bool since(const Seen& before);
// The counter since() reads, for the sleep stub that checks it as the last
// thing before entering the kernel (interruptible_sleep.hpp).
const volatile uint32_t* delivered_counter();

// The application's sigaction, for every signal but SIGSEGV/SIGBUS (passed to
// libc as they are, as is everything a vfork child sets). Same contract as
// sigaction(2).
int app_sigaction(int sig, const struct sigaction* act, struct sigaction* old);
// This process owns the records: at load and in a forked child (whose copy of
// them is its own), not in a vfork child.
void note_process();

// Whether the kernel's action for `sig` is the trampoline (tests).
bool wrapped(int sig);

// Handlers held back while this thread holds a lock of a connection
// (side_lock.hpp). The kernel runs a handler only on the way out of a system
// call, so a handler never finds its own thread halfway through a send on the
// socket it writes to; the shim's calls run in user space, where a handler
// that ran at once and sent on the same connection waited for a lock its own
// thread held: for good. So a delivery that finds the thread inside such a
// section is counted at once (a wait still ends, signal_seen's contract) and
// its handler runs later, with the mask the kernel would have set: when the
// last section ends, or, inside an interposer (HandlersAtReturn), once the
// interposer has let go of everything (a handler may leave with siglongjmp).
// A wait that would restart after such a handler ends instead
// (Connection::Wait::restart): the interposer runs the handler, then the
// call again from the top, as the kernel's restart does.
namespace held {
// This thread's sections (DeferHandlers, SideLock holders), interposers that
// will run what is held back (HandlersAtReturn), and how much is. Inline:
// every data call and every lock passes here.
struct Counts {
    volatile uint32_t depth;
    volatile uint32_t outer;
    volatile uint32_t held;
};
extern __thread Counts tls_counts __attribute__((tls_model("initial-exec")));
void run();  // the held-back handlers, oldest first
inline void run_if_due() {
    const Counts& c = tls_counts;
    if (c.depth == 0 && c.outer == 0 && c.held > 0) run();
}
}  // namespace held

inline void defer_begin() { held::tls_counts.depth = held::tls_counts.depth + 1; }
// The last one out runs what was held back (unless an interposer will).
inline void defer_end() {
    held::tls_counts.depth = held::tls_counts.depth - 1;
    held::run_if_due();
}
struct DeferHandlers {
    DeferHandlers() { defer_begin(); }
    ~DeferHandlers() { defer_end(); }
    DeferHandlers(const DeferHandlers&) = delete;
    DeferHandlers& operator=(const DeferHandlers&) = delete;
};
// Whether this thread holds handlers back now.
inline bool deferring() { return held::tls_counts.depth > 0; }
// An interposer's whole call: handlers held back inside it run when it ends,
// after every lock and reference of the shim is given back.
struct HandlersAtReturn {
    HandlersAtReturn() { held::tls_counts.outer = held::tls_counts.outer + 1; }
    ~HandlersAtReturn() {
        held::tls_counts.outer = held::tls_counts.outer - 1;
        held::run_if_due();
    }
    HandlersAtReturn(const HandlersAtReturn&) = delete;
    HandlersAtReturn& operator=(const HandlersAtReturn&) = delete;
};
// Around a system call that may block inside such a section (a kernel send
// while the connection is back on TCP): handlers held back so far run, and
// new ones run at once, as before, since a restarted system call would hold
// them back for as long as it blocks.
struct HandlersNow {
    HandlersNow();
    ~HandlersNow();
    HandlersNow(const HandlersNow&) = delete;
    HandlersNow& operator=(const HandlersNow&) = delete;
    uint32_t depth, outer;
};

// The signal mask of a ppoll, pselect or epoll_pwait, in force for the whole
// wait as the kernel has it for the whole call: during the spin too, so that a
// signal the mask holds back does not end the wait, and one it lets through
// does. No mask: nothing changes.
class MaskDuring {
public:
    explicit MaskDuring(const sigset_t* mask);
    ~MaskDuring();
    MaskDuring(const MaskDuring&) = delete;
    MaskDuring& operator=(const MaskDuring&) = delete;

private:
    sigset_t old_;
    bool set_ = false;
};

}  // namespace rdmasock::signals
