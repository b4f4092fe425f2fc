// Sleep/wake race stress: a plain TCP program (no shim code) run under
// LD_PRELOAD by tests/integration/wake_stress.sh and `make stress`.
//
//   wake_stress SHAPE WAIT BYTES [SEED]
//
// Forks a client that connects to the parent; every byte either side receives
// is checked against a patterned sequence. With a small ring
// (RDMASOCK_RING_SIZE=4K) and a short spin, readers and writers keep running
// dry and sleeping, so the doorbell path carries most wake-ups. Random pauses
// on both sides move the races around.
// SHAPE:
//   echo      the client sends BYTES in rounds of a random window (up to three
//             4K rings) and takes each round's echo back before the next: both
//             ends sleep every round, writers on full rings included
//   stream    both ends send BYTES to each other at once
// WAIT picks how a side waits:
//   poll      nonblocking I/O, poll or ppoll with random timeouts
//   select    nonblocking I/O, select or pselect with random timeouts
//   epoll     nonblocking I/O, level-triggered epoll_wait or epoll_pwait2
//   epoll-et  the same, edge-triggered (I/O until EAGAIN before each wait)
//   blocking  blocking calls with SO_RCVTIMEO/SO_SNDTIMEO of 50 ms (stream: a
//             reader and a writer thread per side; echo: two client threads)
// Fails (exit 1) on a wrong or missing byte, a wait that overran its timeout by
// more than 2 s, or no progress at all for 15 s (a lost wake-up never returns).
// Prints per side the waits, timeouts, worst overrun and the I/O threads'
// kernel sleeps (voluntary context switches; pauses that slept counted apart).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kOverrunBoundUs = 2'000'000;  // liveness bounds, not speed checks
constexpr int64_t kStallBoundUs = 15'000'000;
constexpr uint64_t kClientSalt = 0x5eed1, kServerSalt = 0x5eed2;

int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

uint8_t byte_at(uint64_t i, uint64_t salt) { return static_cast<uint8_t>(((i ^ salt) * 0x9E3779B97F4A7C15ull) >> 56); }

enum class WaitKind { poll, select, epoll, epoll_et, blocking };

struct Side {
    const char* role;
    bool client;
    bool echo;  // shape: echo rounds (else both ways at once)
    int fd;
    uint64_t total;
    uint64_t tx_salt, rx_salt;
    WaitKind kind;
    unsigned seed;
    std::atomic<uint64_t> sent{0}, received{0};
    std::atomic<int64_t> last_progress{now_us()};
    std::atomic<uint64_t> waits{0}, timeouts{0};
    std::atomic<int64_t> worst_overrun_us{0};
    std::atomic<bool> done{false};
    std::atomic<uint64_t> sleeps{0};  // voluntary context switches of the I/O threads
};

std::atomic<uint64_t> g_naps{0};  // pauses that slept (each a context switch of its own)

// Adds the calling thread's voluntary context switches (its kernel sleeps) to the side.
void count_sleeps(Side& s) {
    rusage ru{};
    getrusage(RUSAGE_THREAD, &ru);
    s.sleeps.fetch_add(static_cast<uint64_t>(ru.ru_nvcsw));
}

[[noreturn]] void fail(Side& s, const char* what) {
    int avail = -1;
    ioctl(s.fd, FIONREAD, &avail);
    fprintf(stderr, "%s: FAILED: %s (sent %llu, received %llu of %llu, FIONREAD %d)\n", s.role, what,
            static_cast<unsigned long long>(s.sent.load()), static_cast<unsigned long long>(s.received.load()),
            static_cast<unsigned long long>(s.total), avail);
    _exit(1);
}

void progress(Side& s) { s.last_progress.store(now_us(), std::memory_order_relaxed); }

// Pauses around the spin budget: none, a short busy wait, a short or (rarely) a
// longer sleep, so the peer's waits end sometimes spinning, sometimes asleep.
void random_pause(unsigned& seed) {
    unsigned r = rand_r(&seed) % 1000;
    if (r < 700) return;
    if (r < 900) {
        int64_t end = now_us() + rand_r(&seed) % 20;
        while (now_us() < end) {}
    } else if (r < 999) {
        g_naps.fetch_add(1, std::memory_order_relaxed);
        usleep(rand_r(&seed) % 100);
    } else {
        g_naps.fetch_add(1, std::memory_order_relaxed);
        usleep(500 + rand_r(&seed) % 2500);
    }
}

// Sizes on a log scale up to max: many small calls (many waits per byte) and
// some that span the ring several times over.
size_t random_size(unsigned& seed, size_t max) {
    size_t cap = size_t{16} << (rand_r(&seed) % 11);
    return 1 + rand_r(&seed) % std::min(cap, max);
}

// A timeout in microseconds for one wait: 0, short, long or infinite (-1).
int64_t random_timeout_us(unsigned& seed) {
    static const int64_t choices[] = {0, 300, 1000, 3000, 20000, 200000, -1, -1};
    return choices[rand_r(&seed) % 8];
}

// A wait with a finite timeout that reported nothing: check its overrun.
void note_timeout(Side& s, int64_t timeout_us, int64_t elapsed_us) {
    s.timeouts.fetch_add(1, std::memory_order_relaxed);
    int64_t over = elapsed_us - timeout_us;
    if (over > s.worst_overrun_us.load()) s.worst_overrun_us.store(over);
    if (over > kOverrunBoundUs) {
        char m[96];
        snprintf(m, sizeof m, "a %lld us wait took %lld us", static_cast<long long>(timeout_us),
                 static_cast<long long>(elapsed_us));
        fail(s, m);
    }
}

void check_bytes(Side& s, const uint8_t* p, size_t n) {
    uint64_t base = s.received.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i)
        if (p[i] != byte_at(base + i, s.rx_salt)) {
            char m[64];
            snprintf(m, sizeof m, "wrong byte at offset %llu", static_cast<unsigned long long>(base + i));
            fail(s, m);
        }
    s.received.store(base + n, std::memory_order_relaxed);
    progress(s);
}

void fill(std::vector<uint8_t>& buf, size_t n, uint64_t at, uint64_t salt) {
    for (size_t i = 0; i < n; ++i) buf[i] = byte_at(at + i, salt);
}

// ---------------------------------------------------------------- event loops

// One wait for readability and/or writability, by the side's kind.
class Waiter {
public:
    explicit Waiter(Side& s) : s_(s) {
        if (s.kind == WaitKind::epoll || s.kind == WaitKind::epoll_et) {
            ep_ = epoll_create1(EPOLL_CLOEXEC);
            registered_ = s.kind == WaitKind::epoll_et ? uint32_t{EPOLLIN | EPOLLOUT | EPOLLET} : uint32_t{EPOLLIN};
            epoll_event ev{registered_, {}};
            ev.data.u64 = 77;
            if (ep_ < 0 || epoll_ctl(ep_, EPOLL_CTL_ADD, s.fd, &ev) != 0) fail(s, "epoll setup");
        }
    }
    ~Waiter() {
        if (ep_ >= 0) close(ep_);
    }

    void wait(bool want_read, bool want_write) {
        const int64_t timeout = random_timeout_us(s_.seed);
        const int64_t t0 = now_us();
        int rc = 0;
        switch (s_.kind) {
            case WaitKind::poll: rc = wait_poll(want_read, want_write, timeout); break;
            case WaitKind::select: rc = wait_select(want_read, want_write, timeout); break;
            default: rc = wait_epoll(want_read, want_write, timeout); break;
        }
        if (rc < 0 && errno != EINTR) fail(s_, strerror(errno));
        s_.waits.fetch_add(1, std::memory_order_relaxed);
        if (rc == 0 && timeout > 0) note_timeout(s_, timeout, now_us() - t0);
    }

private:
    int wait_poll(bool r, bool w, int64_t timeout) {
        pollfd p{s_.fd, static_cast<short>((r ? POLLIN : 0) | (w ? POLLOUT : 0)), 0};
        if (rand_r(&s_.seed) % 2) return poll(&p, 1, timeout < 0 ? -1 : static_cast<int>((timeout + 999) / 1000));
        timespec ts{timeout / 1000000, (timeout % 1000000) * 1000};
        return ppoll(&p, 1, timeout < 0 ? nullptr : &ts, nullptr);
    }

    int wait_select(bool r, bool w, int64_t timeout) {
        fd_set rs, ws;
        FD_ZERO(&rs);
        FD_ZERO(&ws);
        if (r) FD_SET(s_.fd, &rs);
        if (w) FD_SET(s_.fd, &ws);
        if (rand_r(&s_.seed) % 2) {
            timeval tv{timeout / 1000000, timeout % 1000000};
            return select(s_.fd + 1, &rs, &ws, nullptr, timeout < 0 ? nullptr : &tv);
        }
        timespec ts{timeout / 1000000, (timeout % 1000000) * 1000};
        return pselect(s_.fd + 1, &rs, &ws, nullptr, timeout < 0 ? nullptr : &ts, nullptr);
    }

    int wait_epoll(bool r, bool w, int64_t timeout) {
        if (s_.kind == WaitKind::epoll) {  // level-triggered: interest follows what we want
            uint32_t want = (r ? uint32_t{EPOLLIN} : 0u) | (w ? uint32_t{EPOLLOUT} : 0u);
            if (want != registered_) {
                epoll_event ev{want, {}};
                ev.data.u64 = 77;
                if (epoll_ctl(ep_, EPOLL_CTL_MOD, s_.fd, &ev) != 0) fail(s_, "epoll_ctl MOD");
                registered_ = want;
            }
        }
        epoll_event ev[2];
        int n;
        if (rand_r(&s_.seed) % 2) {
            n = epoll_wait(ep_, ev, 2, timeout < 0 ? -1 : static_cast<int>((timeout + 999) / 1000));
        } else {
            timespec ts{timeout / 1000000, (timeout % 1000000) * 1000};
            n = epoll_pwait2(ep_, ev, 2, timeout < 0 ? nullptr : &ts, nullptr);
        }
        if (n > 0 && ev[0].data.u64 != 77) fail(s_, "epoll returned a foreign data word");
        return n;
    }

    Side& s_;
    int ep_ = -1;
    uint32_t registered_ = 0;
};

// Single-threaded nonblocking loop: write what fits, read what is there, and
// wait only when both calls said EAGAIN (which edge-triggered epoll requires).
void event_loop(Side& s) {
    Waiter waiter(s);
    std::vector<uint8_t> out(16384), in(16384);
    bool shut = false, eof = false;
    while (!shut || !eof) {
        bool moved = false;
        uint64_t sent = s.sent.load(std::memory_order_relaxed);
        const bool may_write = s.client || s.received.load(std::memory_order_relaxed) > 0;
        if (!may_write) {
        } else if (!shut && sent == s.total) {
            if (shutdown(s.fd, SHUT_WR) != 0) fail(s, "shutdown");
            shut = true;
        } else if (!shut) {
            size_t n = std::min<uint64_t>(random_size(s.seed, out.size()), s.total - sent);
            fill(out, n, sent, s.tx_salt);
            ssize_t w = send(s.fd, out.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0) {
                s.sent.store(sent + static_cast<uint64_t>(w), std::memory_order_relaxed);
                progress(s);
                moved = true;
            } else if (w < 0 && errno != EAGAIN) {
                fail(s, strerror(errno));
            }
        }
        if (!eof) {
            ssize_t r = recv(s.fd, in.data(), random_size(s.seed, in.size()), MSG_DONTWAIT);
            if (r > 0) {
                check_bytes(s, in.data(), static_cast<size_t>(r));
                moved = true;
            } else if (r == 0) {
                if (s.received.load() != s.total) fail(s, "early end of stream");
                eof = true;
                moved = true;
            } else if (errno != EAGAIN) {
                fail(s, strerror(errno));
            }
        }
        random_pause(s.seed);
        if (!moved && (!shut || !eof)) waiter.wait(!eof, !shut && may_write);
    }
}

// ---------------------------------------------------------------- blocking threads

// Blocking calls with SO_RCVTIMEO/SO_SNDTIMEO: the shim's own wait (spin, arm,
// sleep) does the waiting; an EAGAIN is a timeout whose overrun we check.
void blocking_pair(Side& s) {
    timeval tv{0, 50000};
    setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    unsigned wseed = s.seed * 31 + 1;
    std::thread writer([&] {
        // Server: speak after the client did (the shim upgrades client-first protocols).
        while (!s.client && s.received.load() == 0) usleep(100);
        std::vector<uint8_t> out(16384);
        uint64_t sent = 0;
        while (sent < s.total) {
            size_t n = std::min<uint64_t>(random_size(wseed, out.size()), s.total - sent);
            fill(out, n, sent, s.tx_salt);
            int64_t t0 = now_us();
            ssize_t w = send(s.fd, out.data(), n, MSG_NOSIGNAL);
            if (w > 0) {
                sent += static_cast<uint64_t>(w);
                s.sent.store(sent, std::memory_order_relaxed);
                progress(s);
            } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                note_timeout(s, 50000, now_us() - t0);
            } else {
                fail(s, w < 0 ? strerror(errno) : "send returned 0");
            }
            s.waits.fetch_add(1, std::memory_order_relaxed);
            random_pause(wseed);
        }
        if (shutdown(s.fd, SHUT_WR) != 0) fail(s, "shutdown");
        count_sleeps(s);
    });
    std::vector<uint8_t> in(16384);
    for (;;) {
        int64_t t0 = now_us();
        ssize_t r = recv(s.fd, in.data(), random_size(s.seed, in.size()), 0);
        s.waits.fetch_add(1, std::memory_order_relaxed);
        if (r > 0) {
            check_bytes(s, in.data(), static_cast<size_t>(r));
        } else if (r == 0) {
            if (s.received.load() != s.total) fail(s, "early end of stream");
            break;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            note_timeout(s, 50000, now_us() - t0);
        } else {
            fail(s, strerror(errno));
        }
        random_pause(s.seed);
    }
    writer.join();
}

// ---------------------------------------------------------------- echo shape

// Echo client, event loop: sends its stream in rounds of a random window (up
// to three 4K rings) and takes the echo back before the next round, so both
// ends run dry and sleep every round, writers on full rings included.
void echo_client_loop(Side& s) {
    Waiter waiter(s);
    std::vector<uint8_t> out(16384), in(16384);
    uint64_t window = random_size(s.seed, 12288);
    bool shut = false, eof = false;
    while (!eof) {
        bool moved = false;
        uint64_t sent = s.sent.load(std::memory_order_relaxed), got = s.received.load(std::memory_order_relaxed);
        const bool may_write = !shut && sent < s.total && sent - got < window;
        if (!shut && sent == s.total) {
            if (shutdown(s.fd, SHUT_WR) != 0) fail(s, "shutdown");
            shut = moved = true;
        } else if (may_write) {
            size_t n = std::min<uint64_t>({random_size(s.seed, out.size()), window - (sent - got), s.total - sent});
            fill(out, n, sent, s.tx_salt);
            ssize_t w = send(s.fd, out.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0) {
                s.sent.store(sent + static_cast<uint64_t>(w), std::memory_order_relaxed);
                progress(s);
                moved = true;
            } else if (w < 0 && errno != EAGAIN) {
                fail(s, strerror(errno));
            }
        }
        ssize_t r = recv(s.fd, in.data(), random_size(s.seed, in.size()), MSG_DONTWAIT);
        if (r > 0) {
            check_bytes(s, in.data(), static_cast<size_t>(r));
            if (s.received.load() > s.sent.load()) fail(s, "echo of bytes never sent");
            if (s.received.load() == s.sent.load()) window = random_size(s.seed, 12288);
            moved = true;
        } else if (r == 0) {
            if (s.received.load() != s.total) fail(s, "early end of stream");
            eof = true;
            moved = true;
        } else if (errno != EAGAIN) {
            fail(s, strerror(errno));
        }
        random_pause(s.seed);
        if (!moved && !eof) waiter.wait(true, may_write);
    }
}

// Echo server, event loop: reads into a bounded buffer, writes it back.
void echo_server_loop(Side& s) {
    Waiter waiter(s);
    std::vector<uint8_t> buf(65536);
    size_t head = 0, len = 0;  // pending bytes: buf[head .. head+len), circular
    bool eof = false;
    while (!eof || len > 0) {
        bool moved = false;
        if (!eof && len < buf.size()) {
            size_t tail = (head + len) % buf.size();
            size_t room = std::min(buf.size() - len, buf.size() - tail);
            ssize_t r = recv(s.fd, buf.data() + tail, std::min(room, random_size(s.seed, room)), MSG_DONTWAIT);
            if (r > 0) {
                check_bytes(s, buf.data() + tail, static_cast<size_t>(r));
                len += static_cast<size_t>(r);
                moved = true;
            } else if (r == 0) {
                eof = moved = true;
            } else if (errno != EAGAIN) {
                fail(s, strerror(errno));
            }
        }
        if (len > 0) {
            size_t run = std::min(len, buf.size() - head);
            ssize_t w = send(s.fd, buf.data() + head, std::min(run, random_size(s.seed, run)), MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0) {
                head = (head + static_cast<size_t>(w)) % buf.size();
                len -= static_cast<size_t>(w);
                s.sent.fetch_add(static_cast<uint64_t>(w), std::memory_order_relaxed);
                progress(s);
                moved = true;
            } else if (w < 0 && errno != EAGAIN) {
                fail(s, strerror(errno));
            }
        }
        random_pause(s.seed);
        if (!moved && (!eof || len > 0)) waiter.wait(!eof && len < buf.size(), len > 0);
    }
    if (s.received.load() != s.total) fail(s, "early end of stream");
    if (shutdown(s.fd, SHUT_WR) != 0) fail(s, "shutdown");
}

// Echo with blocking calls: the server reads and writes back in one thread;
// the client's writer sends a window, then waits for its reader to see the echo.
void echo_blocking(Side& s) {
    timeval tv{0, 50000};
    setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    auto timed = [&](auto call) {  // retries EAGAIN (a timeout) after checking its overrun
        for (;;) {
            int64_t t0 = now_us();
            ssize_t n = call();
            s.waits.fetch_add(1, std::memory_order_relaxed);
            if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return n;
            note_timeout(s, 50000, now_us() - t0);
        }
    };
    std::vector<uint8_t> buf(16384);
    if (!s.client) {
        for (;;) {
            ssize_t r = timed([&] { return recv(s.fd, buf.data(), random_size(s.seed, buf.size()), 0); });
            if (r == 0) break;
            if (r < 0) fail(s, strerror(errno));
            check_bytes(s, buf.data(), static_cast<size_t>(r));
            for (ssize_t off = 0; off < r;) {
                ssize_t w = timed([&] { return send(s.fd, buf.data() + off, static_cast<size_t>(r - off), MSG_NOSIGNAL); });
                if (w <= 0) fail(s, w < 0 ? strerror(errno) : "send returned 0");
                off += w;
                s.sent.fetch_add(static_cast<uint64_t>(w));
                progress(s);
            }
            random_pause(s.seed);
        }
        if (s.received.load() != s.total) fail(s, "early end of stream");
        shutdown(s.fd, SHUT_WR);
        return;
    }
    unsigned wseed = s.seed * 31 + 1;
    std::thread writer([&] {
        std::vector<uint8_t> out(16384);
        uint64_t sent = 0;
        while (sent < s.total) {
            uint64_t end = std::min<uint64_t>(s.total, sent + random_size(wseed, 12288));
            while (sent < end) {
                size_t n = std::min<uint64_t>(random_size(wseed, out.size()), end - sent);
                fill(out, n, sent, s.tx_salt);
                ssize_t w = timed([&] { return send(s.fd, out.data(), n, MSG_NOSIGNAL); });
                if (w <= 0) fail(s, w < 0 ? strerror(errno) : "send returned 0");
                sent += static_cast<uint64_t>(w);
                s.sent.store(sent);
                progress(s);
            }
            while (s.received.load() < sent) usleep(20);  // the round's echo (the reader checks it)
            random_pause(wseed);
        }
        shutdown(s.fd, SHUT_WR);
        count_sleeps(s);
    });
    for (;;) {
        ssize_t r = timed([&] { return recv(s.fd, buf.data(), random_size(s.seed, buf.size()), 0); });
        if (r == 0) break;
        if (r < 0) fail(s, strerror(errno));
        check_bytes(s, buf.data(), static_cast<size_t>(r));
        random_pause(s.seed);
    }
    writer.join();
    if (s.received.load() != s.total) fail(s, "early end of stream");
}

// ---------------------------------------------------------------- processes

int run_side(Side& s) {
    std::thread watchdog([&] {
        while (!s.done.load()) {
            usleep(100000);
            if (!s.done.load() && now_us() - s.last_progress.load() > kStallBoundUs) fail(s, "no progress for 15 s");
        }
    });
    if (!s.echo) {
        if (s.kind == WaitKind::blocking) blocking_pair(s);
        else event_loop(s);
    } else if (s.kind == WaitKind::blocking) {
        echo_blocking(s);
    } else if (s.client) {
        echo_client_loop(s);
    } else {
        echo_server_loop(s);
    }
    count_sleeps(s);
    s.done = true;
    watchdog.join();
    close(s.fd);
    printf("%s ok: %llu bytes checked, %llu %s, %llu timeouts (worst overrun %.1f ms), %llu kernel sleeps "
           "of which %llu in pauses\n",
           s.role, static_cast<unsigned long long>(s.received.load()), static_cast<unsigned long long>(s.waits.load()),
           s.kind == WaitKind::blocking ? "blocking calls" : "waits",
           static_cast<unsigned long long>(s.timeouts.load()), s.worst_overrun_us.load() / 1000.0,
           static_cast<unsigned long long>(s.sleeps.load()), static_cast<unsigned long long>(g_naps.load()));
    return 0;
}

bool parse_kind(const std::string& w, WaitKind& k) {
    if (w == "poll") k = WaitKind::poll;
    else if (w == "select") k = WaitKind::select;
    else if (w == "epoll") k = WaitKind::epoll;
    else if (w == "epoll-et") k = WaitKind::epoll_et;
    else if (w == "blocking") k = WaitKind::blocking;
    else return false;
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    WaitKind kind{};
    const std::string shape = argc > 1 ? argv[1] : "";
    if (argc < 4 || (shape != "stream" && shape != "echo") || !parse_kind(argv[2], kind)) {
        fprintf(stderr, "usage: wake_stress stream|echo poll|select|epoll|epoll-et|blocking BYTES [SEED]\n");
        return 2;
    }
    const bool echo = shape == "echo";
    const uint64_t total = strtoull(argv[3], nullptr, 10);
    const unsigned seed = argc > 4 ? static_cast<unsigned>(strtoul(argv[4], nullptr, 10)) : 1;
    setvbuf(stdout, nullptr, _IOLBF, 0);

    int l = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(l, 1) ||
        getsockname(l, reinterpret_cast<sockaddr*>(&a), &len)) {
        perror("listen");
        return 2;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 2;
    }
    if (child == 0) {
        close(l);
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            perror("connect");
            _exit(2);
        }
        Side s{"client", true, echo, c, total, kClientSalt, echo ? kClientSalt : kServerSalt, kind, seed * 2 + 1};
        _exit(run_side(s));
    }
    int fd = accept(l, nullptr, nullptr);
    close(l);
    if (fd < 0) {
        perror("accept");
        return 2;
    }
    Side s{"server", false, echo, fd, total, kServerSalt, kClientSalt, kind, seed * 2};
    int rc = run_side(s);
    int st = 0;
    waitpid(child, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "client process failed (status 0x%x)\n", st);
        return 1;
    }
    return rc;
}
