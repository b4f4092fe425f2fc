#include "sys/raw_syscall.hpp"
#include "sys/thread_cancel.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace rdmasock::cancel {

// One per thread that slept in a shim wait, found by the thread that cancels it.
struct Record {
    pthread_t self{};
    pid_t tid = 0;
    uint64_t generation = 0;           // the process it was listed in (a forked child lists anew)
    std::atomic<bool> asked{false};    // pthread_cancel named this thread
    std::atomic<bool> sleeping{false}; // inside a shim wait's kernel sleep (or about to be)
    std::atomic<bool> kicked{false};   // our SIGCANCEL is on its way to that sleep
    int app_state = -1;                // inside a Span: the application's cancel state (the live one is disabled)
};

namespace {

std::atomic<bool> g_any{false};
std::mutex g_mu;  // the list; held across fork so a child never inherits it locked
auto* g_list = new std::vector<Record*>();  // never destroyed: threads may outlive static destructors
std::atomic<uint64_t> g_generation{1};

void lock_for_fork() { g_mu.lock(); }
void unlock_after_fork() { g_mu.unlock(); }
// The child's other threads are gone: its one thread lists itself again at its next sleep.
void child_after_fork() {
    g_list->clear();
    g_generation.fetch_add(1);
    g_mu.unlock();
}

// Constant-initialized, trivially destroyed: no lazy initialization or exit
// registration (which allocate) on a thread's first call, which may come from
// a signal handler. A pthread key lets go of it when the thread exits.
thread_local Record t_rec __attribute__((tls_model("initial-exec")));
pthread_key_t g_exit_key;

void unlist(void* rec) {
    std::lock_guard<std::mutex> lk(g_mu);
    g_list->erase(std::remove(g_list->begin(), g_list->end(), static_cast<Record*>(rec)), g_list->end());
}

Record& mine() {
    Record& r = t_rec;
    const uint64_t gen = g_generation.load(std::memory_order_acquire);
    if (r.generation != gen) {
        static std::once_flag once;
        std::call_once(once, [] {
            pthread_key_create(&g_exit_key, unlist);
            pthread_atfork(lock_for_fork, unlock_after_fork, child_after_fork);
        });
        std::lock_guard<std::mutex> lk(g_mu);
        r.self = pthread_self();
        r.tid = static_cast<pid_t>(raw_syscall(SYS_gettid));
        r.generation = gen;
        if (std::find(g_list->begin(), g_list->end(), &r) == g_list->end()) g_list->push_back(&r);
        pthread_setspecific(g_exit_key, &r);
    }
    return r;
}

// The application's cancel state: the one a Span put aside, else the live one.
bool enabled() {
    const int kept = t_rec.app_state;
    if (kept >= 0) return kept == PTHREAD_CANCEL_ENABLE;
    int state = PTHREAD_CANCEL_DISABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
    pthread_setcancelstate(state, nullptr);
    return state == PTHREAD_CANCEL_ENABLE;
}

}  // namespace

void requested(pthread_t target) {
    g_any.store(true);
    std::lock_guard<std::mutex> lk(g_mu);
    for (Record* r : *g_list) {
        if (!pthread_equal(r->self, target)) continue;
        r->asked.store(true);  // seq_cst: ordered before the load of `sleeping` (Sleep's mirror image)
        if (r->sleeping.load()) {
            r->kicked.store(true);
#ifdef __GLIBC__
            // glibc's SIGCANCEL (__SIGRTMIN): libc's pthread_cancel installed its
            // handler, which for a deferred thread only notes the request.
            raw_syscall(SYS_tgkill, getpid(), r->tid, __SIGRTMIN);
#endif
        }
        break;
    }
}

bool any() { return g_any.load(std::memory_order_relaxed); }

// A request for `r`'s thread that would act now (cancellation enabled).
bool acts(const Record& r) { return r.asked.load() && enabled(); }

bool pending() { return any() && acts(mine()); }

void point() {
    mine();  // listed before the look: a request from here on finds this thread
    if (!g_any.load()) return;
    const int saved = errno;
    pthread_testcancel();
    errno = saved;
}

Span::Span(bool act_at_entry) {
    if (act_at_entry) point();
    else mine();
    int state = PTHREAD_CANCEL_ENABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
    Record& r = t_rec;
    outer_ = r.app_state;
    app_state_ = outer_ >= 0 ? outer_ : state;
    r.app_state = app_state_;
}

void Span::restore() {
    if (app_state_ < 0) return;
    t_rec.app_state = outer_;
    // Deferred mode: enabling again never acts here (leave()'s point() does).
    if (outer_ < 0) pthread_setcancelstate(app_state_, nullptr);
    app_state_ = -1;
}

Sleep::Sleep(int64_t timeout_us) : timeout_us_(timeout_us) {
    rec_ = &mine();
    rec_->sleeping.store(true);  // seq_cst: before the loads of g_any and `asked` (requested()'s mirror image)
    if (!g_any.load()) return;
    skip_ = acts(*rec_);
    if (timeout_us_ < 0 || timeout_us_ > kNapAfterRequestUs) timeout_us_ = kNapAfterRequestUs;
}

Sleep::~Sleep() { rec_->sleeping.store(false, std::memory_order_release); }

bool Sleep::only_a_request(bool handler_ran) {
    if (!rec_->kicked.exchange(false)) return false;
    return !handler_ran && !acts(*rec_);
}

}  // namespace rdmasock::cancel
