// A multi-threaded differential fuzzer of one TCP connection (issue: several
// threads and processes on one connection). Per round, two processes (client and
// a forked server) each run several writer and reader threads on the same
// connection, both ways at once: random send sizes (1 B - 1 MiB), send/sendmsg/
// writev, MSG_DONTWAIT with poll or epoll waits, recv with MSG_PEEK / MSG_WAITALL /
// MSG_DONTWAIT, a dup'd fd, and now and then a forked child that writes a burst of
// its own. Then SHUT_WR, read to EOF, close.
//
// Every byte is tagged so that nothing lost, duplicated or reordered can pass:
// writer w's k-th byte is (w << 5) | (k & 31). TCP may interleave two threads'
// sends anywhere, but each writer's own bytes keep their order, so a single
// reader checks every writer's sequence byte by byte; with several readers (whose
// chunks' order between them is unknown) each writer's bytes are checked as a
// multiset: writer w's total and how often each of its 32 values came, which the
// sender's total fixes. The same program runs over plain TCP and preloaded; both
// must print "rounds N ok" (the test compares the transcripts).
//
// usage: mt_fuzz SEED ROUNDS
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check_common.hpp"

namespace {

constexpr int kTags = 8;        // writer ids 0..7; 7 is the forked child's
constexpr int kForkTag = 7;
constexpr int kMaxRounds = 10000;

uint8_t tag_byte(int w, uint64_t k) { return static_cast<uint8_t>((w << 5) | (k & 31)); }

struct Params {
    int writers, readers;
    uint64_t budget;        // bytes per writer
    bool settle_first;      // a few round trips before the threads start (the switch is behind)
    bool fork_burst;        // writer 0 forks a child that writes kForkTag bytes
    uint64_t fork_bytes;
};

Params params_for(uint64_t seed) {
    std::mt19937_64 r(seed);
    Params p;
    p.writers = 1 + static_cast<int>(r() % 3);
    p.readers = 1 + static_cast<int>(r() % 2);
    p.budget = (64 << 10) + r() % (3 << 20);
    p.settle_first = r() % 2;
    p.fork_burst = r() % 4 == 0;
    p.fork_bytes = 1 + r() % (256 << 10);
    return p;
}

// What one end sent and got, per writer tag.
struct Tally {
    uint64_t sent[kTags] = {};
    uint64_t got[kTags] = {};
    uint64_t hist[kTags][32] = {};
    bool order_broken = false;
    char order_what[160] = {};
};

// What a sender's total fixes: how often value k of 32 came in n bytes.
uint64_t expected_count(uint64_t n, int k) { return n / 32 + (static_cast<uint64_t>(k) < n % 32 ? 1 : 0); }

void fill(std::vector<uint8_t>& buf, size_t n, int w, uint64_t from) {
    for (size_t i = 0; i < n; ++i) buf[i] = tag_byte(w, from + i);
}

// Waits until fd is ready for `ev`, by poll or by an epoll set (the fuzzer's choice).
void wait_ready(int fd, short ev, std::mt19937_64& r) {
    if (r() % 2) {
        pollfd p{fd, ev, 0};
        (void)poll(&p, 1, 200);
        return;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event e{};
    e.events = ((ev & POLLIN) ? uint32_t{EPOLLIN} : 0u) | ((ev & POLLOUT) ? uint32_t{EPOLLOUT} : 0u) |
               (r() % 2 ? uint32_t{EPOLLET} : 0u);
    e.data.fd = fd;
    if (ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) == 0) {
        epoll_event out[2];
        (void)epoll_wait(ep, out, 2, 200);
    }
    if (ep >= 0) close(ep);
}

// Sends n tagged bytes of writer w starting at its byte `from` (may be partial:
// returns what the kernel took, or -1 for a failure other than EAGAIN).
ssize_t send_some(int fd, int w, uint64_t from, size_t n, std::vector<uint8_t>& buf, std::mt19937_64& r) {
    fill(buf, n, w, from);
    const int how = static_cast<int>(r() % 4);
    const int flags = MSG_NOSIGNAL | (r() % 4 == 0 ? MSG_DONTWAIT : 0);
    ssize_t got;
    if (how == 0) {
        got = send(fd, buf.data(), n, flags);
    } else if (how == 1 && n > 1) {
        iovec v[2] = {{buf.data(), n / 2}, {buf.data() + n / 2, n - n / 2}};
        msghdr m{};
        m.msg_iov = v;
        m.msg_iovlen = 2;
        got = sendmsg(fd, &m, flags);
    } else if (how == 2 && n > 2) {
        iovec v[3] = {{buf.data(), 1}, {buf.data() + 1, n - 2}, {buf.data() + n - 1, 1}};
        if (flags & MSG_DONTWAIT) {
            msghdr m{};
            m.msg_iov = v;
            m.msg_iovlen = 3;
            got = sendmsg(fd, &m, flags);
        } else {
            got = writev(fd, v, 3);
        }
    } else {
        got = send(fd, buf.data(), n, flags);
    }
    if (got < 0 && errno == EAGAIN) {
        wait_ready(fd, POLLOUT, r);
        return 0;
    }
    return got;
}

size_t random_size(std::mt19937_64& r, size_t max) {
    // Log-uniform: as many 1-byte sends as 512 KiB ones.
    const int bits = static_cast<int>(r() % 21);
    size_t n = (size_t{1} << bits) + r() % (size_t{1} << bits);
    return std::max<size_t>(1, std::min(n, max));
}

void writer(int fd, int w, const Params& p, uint64_t seed, Tally& t, std::atomic<bool>& failed) {
    std::mt19937_64 r(seed);
    std::vector<uint8_t> buf(1 << 20);
    uint64_t sent = 0;
    bool forked = false;
    while (sent < p.budget && !failed.load()) {
        if (p.fork_burst && w == 0 && !forked && sent >= p.budget / 2) {
            forked = true;
            // The burst is made before the fork: the child of a threaded process may call only
            // async-signal-safe functions, and a malloc there can wait forever on an allocator
            // lock another thread held at the fork. (One ThreadSanitizer run of this program hung
            // 300 s over plain TCP, no shim loaded; this vector was the child's one unsafe call.)
            std::vector<uint8_t> cb(p.fork_bytes);
            fill(cb, cb.size(), kForkTag, 0);
            pid_t c = fork();
            if (c == 0) {
                // The child writes its burst on the inherited socket and leaves.
                size_t off = 0;
                while (off < cb.size()) {
                    ssize_t n = send(fd, cb.data() + off, cb.size() - off, MSG_NOSIGNAL);
                    if (n <= 0) _exit(3);
                    off += static_cast<size_t>(n);
                }
                _exit(0);
            }
            int st = 0;
            if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                std::printf("FAILED: the forked writer did not send its burst (status %d)\n", st);
                failed = true;
                return;
            }
            t.sent[kForkTag] = p.fork_bytes;
        }
        const size_t n = random_size(r, std::min<uint64_t>(p.budget - sent, buf.size()));
        ssize_t got = send_some(fd, w, sent, n, buf, r);
        if (got < 0) {
            std::printf("FAILED: writer %d send: %s\n", w, strerror(errno));
            failed = true;
            return;
        }
        sent += static_cast<uint64_t>(got);
    }
    t.sent[w] = sent;
}

struct ReaderState {
    uint64_t next[kTags] = {};  // single reader: each writer's next byte index
};

void reader(int fd, const Params& p, uint64_t seed, Tally& t, std::atomic<bool>& failed, std::atomic<int>& eofs) {
    std::mt19937_64 r(seed);
    std::vector<uint8_t> buf(256 << 10), peekbuf(256 << 10);
    uint64_t got[kTags] = {}, hist[kTags][32] = {};
    ReaderState rs;
    const bool single = p.readers == 1;
    for (;;) {
        if (failed.load()) return;
        const size_t want = 1 + r() % buf.size();
        const int mode = static_cast<int>(r() % 6);
        ssize_t n;
        if (mode == 0) {
            n = recv(fd, buf.data(), want, MSG_DONTWAIT);
            if (n < 0 && errno == EAGAIN) {
                wait_ready(fd, POLLIN, r);
                continue;
            }
        } else if (mode == 1 && single) {
            // A peek, then the same bytes by a read: they must be the ones peeked.
            ssize_t k = recv(fd, peekbuf.data(), want, MSG_PEEK);
            if (k <= 0) {
                n = k;
            } else {
                n = recv(fd, buf.data(), static_cast<size_t>(k), MSG_WAITALL);
                if (n != k || std::memcmp(buf.data(), peekbuf.data(), static_cast<size_t>(k)) != 0) {
                    std::printf("FAILED: %zd bytes peeked, then a read of them gave %zd%s\n", k, n,
                                n == k ? " different bytes" : "");
                    failed = true;
                    return;
                }
            }
        } else if (mode == 2) {
            n = recv(fd, buf.data(), std::min<size_t>(want, 4096), MSG_WAITALL);
        } else if (mode == 3) {
            wait_ready(fd, POLLIN, r);
            continue;
        } else {
            n = recv(fd, buf.data(), want, 0);
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            std::printf("FAILED: recv: %s\n", strerror(errno));
            failed = true;
            return;
        }
        if (n == 0) break;
        for (ssize_t i = 0; i < n; ++i) {
            const int w = buf[i] >> 5, k = buf[i] & 31;
            if (single && !t.order_broken && static_cast<uint64_t>(k) != (rs.next[w] & 31)) {
                t.order_broken = true;
                std::snprintf(t.order_what, sizeof t.order_what, "writer %d's byte %" PRIu64 " has sequence %d, not %d", w,
                              rs.next[w], k, static_cast<int>(rs.next[w] & 31));
            }
            ++rs.next[w];
            ++got[w];
            ++hist[w][k];
        }
    }
    // Several readers add up their counts (relaxed: joined before they are read).
    static std::mutex* mu = new std::mutex;
    std::lock_guard<std::mutex> lk(*mu);
    for (int w = 0; w < kTags; ++w) {
        t.got[w] += got[w];
        for (int k = 0; k < 32; ++k) t.hist[w][k] += hist[w][k];
    }
    eofs.fetch_add(1);
}

// A few round trips of one byte: the connection has carried bytes both ways
// (and a same-host switch is likely behind) before the threads start.
void settle(int fd, bool first) {
    for (int i = 0; i < 8; ++i) {
        char c = 'x';
        if (first && send(fd, &c, 1, MSG_NOSIGNAL) != 1) check::die("settle send");
        if (recv(fd, &c, 1, MSG_WAITALL) != 1) check::die("settle recv");
        if (!first && send(fd, &c, 1, MSG_NOSIGNAL) != 1) check::die("settle send");
    }
}

// One end of a round: its threads, then SHUT_WR and EOF; the tally for the report.
bool run_end(int fd, bool client, const Params& p, uint64_t seed, Tally& t) {
    if (p.settle_first) settle(fd, client);
    const int fd2 = dup(fd);  // writers alternate between the number and its dup
    if (fd2 < 0) check::die("dup");
    std::atomic<bool> failed{false};
    std::atomic<int> eofs{0};
    std::vector<std::thread> ws, rs;
    for (int w = 0; w < p.writers; ++w)
        ws.emplace_back(writer, w % 2 ? fd2 : fd, w, std::cref(p), seed * 131 + w + (client ? 0 : 57), std::ref(t), std::ref(failed));
    for (int i = 0; i < p.readers; ++i)
        rs.emplace_back(reader, i % 2 ? fd2 : fd, std::cref(p), seed * 137 + i + (client ? 0 : 91), std::ref(t), std::ref(failed),
                        std::ref(eofs));
    for (auto& th : ws) th.join();
    if (!failed.load() && shutdown(fd, SHUT_WR) != 0) {
        std::printf("FAILED: shutdown: %s\n", strerror(errno));
        failed = true;
    }
    if (failed.load()) shutdown(fd, SHUT_RDWR);  // the readers end too
    for (auto& th : rs) th.join();
    close(fd2);
    return !failed.load();
}

bool write_all(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k <= 0) return false;
        c += k;
        n -= static_cast<size_t>(k);
    }
    return true;
}

bool read_all(int fd, void* p, size_t n) {
    char* c = static_cast<char*>(p);
    while (n > 0) {
        ssize_t k = read(fd, c, n);
        if (k <= 0) return false;
        c += k;
        n -= static_cast<size_t>(k);
    }
    return true;
}

// `to` got what `from` sent: each writer's total, its values' counts, and (one reader) its order.
bool compare(const char* dir, const Tally& from, const Tally& to) {
    bool ok = true;
    for (int w = 0; w < kTags; ++w) {
        if (from.sent[w] != to.got[w]) {
            std::printf("FAILED: %s: writer %d sent %" PRIu64 " bytes, %" PRIu64 " arrived\n", dir, w, from.sent[w], to.got[w]);
            ok = false;
            continue;
        }
        for (int k = 0; k < 32; ++k)
            if (to.hist[w][k] != expected_count(from.sent[w], k)) {
                std::printf("FAILED: %s: writer %d's value %d came %" PRIu64 " times, not %" PRIu64 " (lost and duplicated bytes)\n",
                            dir, w, k, to.hist[w][k], expected_count(from.sent[w], k));
                ok = false;
                break;
            }
    }
    if (to.order_broken) {
        std::printf("FAILED: %s: out of order: %s\n", dir, to.order_what);
        ok = false;
    }
    return ok;
}

bool round(uint64_t seed) {
    const Params p = params_for(seed);
    sockaddr_in a;
    int l = check::listen_local(a);
    int report[2];
    if (pipe(report) != 0) check::die("pipe");
    std::fflush(stdout);
    pid_t srv = fork();
    if (srv < 0) check::die("fork");
    if (srv == 0) {
        close(report[0]);
        int fd = accept(l, nullptr, nullptr);
        if (fd < 0) check::die("accept");
        close(l);
        Tally t;
        bool ok = run_end(fd, false, p, seed, t);
        close(fd);
        std::fflush(stdout);
        if (!write_all(report[1], &t, sizeof t)) _exit(4);
        _exit(ok ? 0 : 1);
    }
    close(report[1]);
    close(l);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) check::die("connect");
    Tally mine;
    bool ok = run_end(fd, true, p, seed, mine);
    close(fd);
    Tally theirs;
    const bool reported = read_all(report[0], &theirs, sizeof theirs);
    close(report[0]);
    int st = 0;
    waitpid(srv, &st, 0);
    if (!reported || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        std::printf("FAILED: the server end ended with status %d%s\n", st, reported ? "" : " and no report");
        ok = false;
    }
    if (reported) {
        ok = compare("client to server", mine, theirs) && ok;
        ok = compare("server to client", theirs, mine) && ok;
    }
    if (!ok)
        std::printf("  round seed %" PRIu64 ": writers %d readers %d budget %" PRIu64 " settle_first %d fork_burst %d (%" PRIu64 " B)\n", seed,
                    p.writers, p.readers, p.budget, p.settle_first, p.fork_burst, p.fork_bytes);
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s SEED ROUNDS\n", argv[0]);
        return 2;
    }
    const uint64_t seed = std::strtoull(argv[1], nullptr, 10);
    const int rounds = std::atoi(argv[2]);
    if (rounds < 1 || rounds > kMaxRounds) {
        std::fprintf(stderr, "ROUNDS must be 1..%d\n", kMaxRounds);
        return 2;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    int failed = 0;
    for (int i = 0; i < rounds; ++i)
        if (!round(seed * 100000 + static_cast<uint64_t>(i))) ++failed;
    if (failed) {
        std::printf("rounds %d: %d failed\n", rounds, failed);
        return 1;
    }
    std::printf("rounds %d ok\n", rounds);
    return 0;
}
