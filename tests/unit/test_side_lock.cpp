// A call waiting for a connection's direction lock sleeps until the holder
// lets go, whatever the holder was doing (side_lock.hpp): no lost wake-up.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "wait/side_lock.hpp"

using rdmasock::SideLock;

namespace {

struct Doorbell {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    std::atomic<int> rung{0};
    ~Doorbell() { close(fd); }
    static void ring(void* c) {
        auto* d = static_cast<Doorbell*>(c);
        d->rung.fetch_add(1);
        uint64_t one = 1;
        (void)!write(d->fd, &one, sizeof one);
    }
    // Sleeps until rung (a liveness bound, not a timing check: 30 s means lost).
    bool sleep() {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 30000) != 1) return false;
        uint64_t v;
        (void)!read(fd, &v, sizeof v);
        return true;
    }
};

}  // namespace

TEST_CASE("an unlock with nobody waiting rings nothing") {
    Doorbell d;
    SideLock l(Doorbell::ring, &d);
    for (int i = 0; i < 100; ++i) {
        l.lock();
        l.unlock();
        REQUIRE(l.try_lock());
        l.unlock();
    }
    CHECK(d.rung.load() == 0);
}

TEST_CASE("a waiter sleeping on the doorbell always gets the lock a holder lets go of") {
    Doorbell d;
    SideLock l(Doorbell::ring, &d);
    constexpr int kRounds = 5000;
    std::atomic<int> held{0};  // the round whose lock the holder has taken
    std::atomic<int> done{0};  // the round the waiter has finished
    std::atomic<bool> lost{false};
    // Each round the holder takes the lock, lets the waiter find it taken,
    // and lets go after a moment of varying length. It never rings the
    // doorbell itself (a rendezvous step, a hand-over): only its unlock does.
    std::thread holder([&] {
        for (int r = 1; r <= kRounds && !lost.load(); ++r) {
            l.lock();
            held.store(r);
            for (int i = 0; i < (r % 7) * 200; ++i) asm volatile("" ::: "memory");
            if (r % 5 == 0) std::this_thread::yield();
            l.unlock();
            while (done.load() < r && !lost.load()) std::this_thread::yield();
        }
    });
    int waited = 0;
    for (int r = 1; r <= kRounds && !lost.load(); ++r) {
        while (held.load() < r) std::this_thread::yield();
        {
            std::unique_lock<SideLock> lk(l, std::defer_lock);
            if (!lk.try_lock()) {
                ++waited;
                SideLock::Waiting counted(l);
                while (!lk.try_lock()) {
                    if (!d.sleep()) {
                        lost.store(true);
                        break;
                    }
                }
            }
        }
        done.store(r);
    }
    holder.join();
    CHECK_FALSE(lost.load());
    CHECK(waited > 0);  // the case under test happened
}
