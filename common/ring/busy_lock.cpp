#include "ring/busy_lock.hpp"

#include <sys/syscall.h>
#include <time.h>

#include <cerrno>

#include "sys/raw_syscall.hpp"

namespace rdmasock::busy_lock {

namespace {

int64_t now_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000ll + ts.tv_nsec / 1000;
}

void nap(int64_t ns) {
    timespec ts{0, static_cast<long>(ns)};
    raw_syscall(SYS_nanosleep, &ts, nullptr);  // EINTR: we look again, no harm
}

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

bool try_take(std::atomic<int32_t>& word, int32_t from, int32_t self) {
    return word.compare_exchange_strong(from, self, std::memory_order_seq_cst);
}

// An honest holder keeps the word for one copy: a short spin covers it.
constexpr int kSpins = 256;
// A holder's verdict is taken again this often while we wait (it may die).
constexpr int64_t kRejudgeUs = 20'000;
constexpr int64_t kMaxNapNs = 1'000'000;

}  // namespace

Who by_kill(int32_t pid, int32_t self, Who alive_as) {
    if (pid <= 0) return Who::dead;  // no pid at all (kill() would name a group): nobody's lock
    if (pid == self) return Who::self;
    const int saved = errno;
    const bool gone = raw_syscall(SYS_kill, pid, 0) != 0 && errno == ESRCH;
    errno = saved;
    return gone ? Who::dead : alive_as;
}

Who AliveJudge::who(int32_t pid) { return by_kill(pid, -1, Who::relative); }

Got lock(std::atomic<int32_t>& word, int32_t self, Judge& judge, const Policy& policy) {
    if (try_take(word, 0, self)) return Got::locked;
    for (int i = 0; i < kSpins; ++i) {
        relax();
        if (word.load(std::memory_order_relaxed) == 0 && try_take(word, 0, self)) return Got::locked;
    }
    // Taken for some microseconds: from here on we sleep and ask who holds it.
    const int64_t start = now_us();
    int32_t judged = 0;
    Who verdict = Who::dead;
    int64_t judged_at = 0, foreign_since = 0;
    int64_t nap_ns = 2'000;
    for (;;) {
        const int32_t holder = word.load(std::memory_order_acquire);
        if (holder == 0) {
            if (try_take(word, 0, self)) return Got::locked;
            continue;
        }
        const int64_t now = now_us();
        if (holder != judged || now - judged_at >= kRejudgeUs) {
            verdict = judge.who(holder);
            if (verdict == Who::self && policy.self_is_foreign) verdict = Who::foreign;
            if (holder != judged || verdict != Who::foreign) foreign_since = now;
            judged = holder;
            judged_at = now;
        }
        switch (verdict) {
            case Who::dead:
                if (try_take(word, holder, self)) return Got::locked;
                continue;  // it changed under us: judge the new value
            case Who::foreign:
                if (now - foreign_since >= policy.foreign_grace_us) return Got::abused;
                break;
            case Who::relative:
            case Who::self:
                if (now - start >= policy.patience_us) return Got::patience;
                break;
        }
        nap(nap_ns);
        if (nap_ns < kMaxNapNs) nap_ns *= 2;
    }
}

}  // namespace rdmasock::busy_lock
