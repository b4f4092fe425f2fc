// Two threads writing one connection, a reader in another process (issue 36).
// Each writer thread sends kSends buffers of 1 MiB; thread t writes only byte
// values t*128 + (0..127), following its own sequence (seq() below), so the
// reader can split the stream by writer however the two threads' bytes were
// interleaved, and check each writer's bytes in order (one reader thread) or
// count each byte value (two reader threads, whose reads' order is unknown).
// The requirement, TCP's: every byte of every successful send arrives once, in
// the order of that thread's sends. The shim lost a whole 1 MiB send now and
// then (accepted, counted in tx_bytes, never delivered).
//
// Every combination of: writer connects or accepts; one or two reader
// threads; switched to the ring before the threads start (three round trips)
// or switching while they run (the threads start at once); and how the
// writer's socket ends:
//   join     both threads finish, then the main thread closes
//   close    one thread closes after its sends, the other may still be sending
//   shut     one thread shuts down (SHUT_WR) after its sends, likewise
//   midway   the main thread closes while both threads are sending (they send until one fails)
// A writer stops once the socket is closed or shut (sends after that fail);
// what each thread's sends accepted is what the reader must get, then EOF.
// Prints one line per combination; tests/integration/two_writers.sh requires
// the same output over plain TCP and under the shim.
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check_common.hpp"

namespace {

using check::die;

constexpr size_t kChunk = 1u << 20;
constexpr int kSends = 8;
constexpr size_t kPerThread = kChunk * kSends;

// Writer t's byte at offset i of its own stream: differs from one send to the next.
inline uint8_t seq(int t, size_t i) {
    return static_cast<uint8_t>(t * 128 + ((i % 113) + (i >> 16) * 5) % 128);
}

std::vector<uint8_t> g_data[2];  // each writer's whole stream (built before fork)

enum class End { join, close, shut, midway };
const char* name(End e) {
    switch (e) {
        case End::join: return "join then close";
        case End::close: return "one thread closes";
        case End::shut: return "one thread shuts down";
        case End::midway: return "close while both send";
    }
    return "?";
}

struct WriterResult {
    uint64_t accepted[2];
    uint64_t partials[2];  // sends that accepted less than they were given (for the failure message)
    int end_errno[2];      // what the send that stopped the thread said
};
struct ReaderResult {
    uint64_t got[2];
    uint64_t in_order[2];  // one reader: bytes of each writer that matched its sequence so far
    uint64_t misplaced;    // one reader: bytes that did not
    int end_errno;         // 0: EOF
    uint64_t hist[256];
};

void write_all(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) die("pipe write");
        c += w;
        n -= static_cast<size_t>(w);
    }
}
void read_all(int fd, void* p, size_t n) {
    char* c = static_cast<char*>(p);
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r <= 0) die("pipe read");
        c += r;
        n -= static_cast<size_t>(r);
    }
}

// Three round trips, so both ends are on their transport before the threads start.
void settle(int s, bool writer) {
    char c;
    for (int i = 0; i < 3; ++i) {
        if (writer) {
            if (send(s, "w", 1, MSG_NOSIGNAL) != 1 || recv(s, &c, 1, MSG_WAITALL) != 1) die("settle (writer)");
        } else {
            if (recv(s, &c, 1, MSG_WAITALL) != 1 || send(s, "r", 1, MSG_NOSIGNAL) != 1) die("settle (reader)");
        }
    }
}

void writer(int s, End end, int out) {
    std::atomic<bool> stop{false};
    std::atomic<int> sends_done{0};
    WriterResult res{};
    auto body = [&](int t) {
        size_t off = 0;
        // midway: each thread sends until a send fails, as a program that learns of the
        // close from its send's EBADF; its sends right after the close meet the close's
        // own window (RDMASOCK_FAULT=close-pause widens it).
        for (int k = 0; k < kSends && (end == End::midway || !stop.load()); ++k) {
            size_t left = kChunk;
            while (left > 0) {
                ssize_t n = send(s, g_data[t].data() + off, left, MSG_NOSIGNAL);
                if (n <= 0) {
                    res.end_errno[t] = n < 0 ? errno : 0;
                    break;
                }
                if (static_cast<size_t>(n) < left) ++res.partials[t];
                off += static_cast<size_t>(n);
                left -= static_cast<size_t>(n);
            }
            if (left > 0) break;
            sends_done.fetch_add(1);
        }
        res.accepted[t] = off;
        if (t == 0 && (end == End::close || end == End::shut)) {
            stop.store(true);
            if (end == End::close) close(s);
            else shutdown(s, SHUT_WR);
        }
    };
    std::thread a(body, 0), b(body, 1);
    if (end == End::midway) {
        while (sends_done.load() < 5) usleep(200);  // both well under way (never a timing bound)
        stop.store(true);
        close(s);
    }
    a.join();
    b.join();
    if (end == End::join || end == End::shut) close(s);
    write_all(out, &res, sizeof res);
}

void reader(int s, int nreaders, int out) {
    ReaderResult res{};
    std::atomic<int> err{0};
    auto body = [&](ReaderResult* r) {
        std::vector<uint8_t> buf(65536);
        for (;;) {
            ssize_t n = recv(s, buf.data(), buf.size(), 0);
            if (n == 0) return;
            if (n < 0) {
                err.store(errno);
                return;
            }
            for (ssize_t i = 0; i < n; ++i) {
                const uint8_t v = buf[static_cast<size_t>(i)];
                ++r->hist[v];
                const int t = v >> 7;
                if (nreaders == 1) {
                    if (seq(t, r->got[t]) == v) ++r->in_order[t];
                    else ++r->misplaced;
                }
                ++r->got[t];
            }
        }
    };
    if (nreaders == 1) {
        body(&res);
    } else {
        ReaderResult two[2]{};
        std::thread a(body, &two[0]), b(body, &two[1]);
        a.join();
        b.join();
        for (int t = 0; t < 2; ++t) res.got[t] = two[0].got[t] + two[1].got[t];
        for (int v = 0; v < 256; ++v) res.hist[v] = two[0].hist[v] + two[1].hist[v];
    }
    res.end_errno = err.load();
    close(s);
    write_all(out, &res, sizeof res);
}

// The histogram of writer t's first n bytes.
void expected_hist(int t, uint64_t n, uint64_t* hist) {
    for (uint64_t i = 0; i < n; ++i) ++hist[g_data[t][i]];
}

// One run; an empty string when every accepted byte arrived once, in order, then EOF.
std::string one_run(bool writer_connects, int nreaders, bool settled, End end) {
    sockaddr_in a{};
    int l = check::listen_local(a, 1);
    int wp[2], rp[2];
    if (pipe(wp) != 0 || pipe(rp) != 0) die("pipe");
    auto side = [&](bool is_writer) {
        int s;
        if (is_writer == writer_connects) {
            close(l);
            s = socket(AF_INET, SOCK_STREAM, 0);
            if (s < 0 || connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
        } else {
            s = accept(l, nullptr, nullptr);
            if (s < 0) die("accept");
            close(l);
        }
        if (settled) settle(s, is_writer);
        if (is_writer) writer(s, end, wp[1]);
        else reader(s, nreaders, rp[1]);
        std::fflush(stdout);
        std::exit(0);  // (the shim's statistics line, at exit)
    };
    const pid_t r = fork();
    if (r == 0) side(false);
    const pid_t w = fork();
    if (w == 0) side(true);
    close(l);
    close(wp[1]);
    close(rp[1]);
    WriterResult wr{};
    ReaderResult rr{};
    read_all(wp[0], &wr, sizeof wr);
    read_all(rp[0], &rr, sizeof rr);
    close(wp[0]);
    close(rp[0]);
    int st = 0;
    waitpid(w, &st, 0);
    waitpid(r, &st, 0);
    char msg[512];
    if (rr.end_errno != 0) {
        snprintf(msg, sizeof msg, "the reader's recv failed: %s", strerror(rr.end_errno));
        return msg;
    }
    for (int t = 0; t < 2; ++t) {
        if (wr.accepted[t] % kChunk != 0 && end == End::join) {
            snprintf(msg, sizeof msg, "writer %d: its sends accepted %llu bytes", t, (unsigned long long)wr.accepted[t]);
            return msg;
        }
        if (rr.got[t] != wr.accepted[t]) {
            snprintf(msg, sizeof msg,
                     "writer %d: sends accepted %llu bytes, the reader got %llu (%+lld); both writers: accepted %llu "
                     "%llu, got %llu %llu, partial sends %llu %llu, last errno %d %d",
                     t, (unsigned long long)wr.accepted[t], (unsigned long long)rr.got[t],
                     (long long)rr.got[t] - (long long)wr.accepted[t], (unsigned long long)wr.accepted[0],
                     (unsigned long long)wr.accepted[1], (unsigned long long)rr.got[0], (unsigned long long)rr.got[1],
                     (unsigned long long)wr.partials[0], (unsigned long long)wr.partials[1], wr.end_errno[0],
                     wr.end_errno[1]);
            return msg;
        }
    }
    if (nreaders == 1) {
        if (rr.misplaced != 0) {
            snprintf(msg, sizeof msg, "%llu bytes out of their writer's order (in order: %llu, %llu)",
                     (unsigned long long)rr.misplaced, (unsigned long long)rr.in_order[0], (unsigned long long)rr.in_order[1]);
            return msg;
        }
    } else {
        uint64_t want[256]{};
        expected_hist(0, wr.accepted[0], want);
        expected_hist(1, wr.accepted[1], want);
        for (int v = 0; v < 256; ++v)
            if (want[v] != rr.hist[v]) {
                snprintf(msg, sizeof msg, "byte value %d: %llu sent, %llu received", v, (unsigned long long)want[v],
                         (unsigned long long)rr.hist[v]);
                return msg;
            }
    }
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const int runs = argc > 1 ? std::atoi(argv[1]) : 10;
    // `two_writers RUNS midway`: only the closes while both threads send.
    const bool only_midway = argc > 2 && std::strcmp(argv[2], "midway") == 0;
    for (int t = 0; t < 2; ++t) {
        g_data[t].resize(kPerThread);
        for (size_t i = 0; i < kPerThread; ++i) g_data[t][i] = seq(t, i);
    }
    std::printf("two writer threads, %d sends of 1 MiB each; %d runs of each combination\n", kSends, runs);
    for (bool connects : {true, false})
        for (bool settled : {true, false})
            for (int nreaders : {1, 2})
                for (End end : {End::join, End::close, End::shut, End::midway}) {
                    if (only_midway && end != End::midway) continue;
                    int bad = 0;
                    std::string first;
                    for (int i = 0; i < runs; ++i) {
                        std::string why = one_run(connects, nreaders, settled, end);
                        if (!why.empty() && bad++ == 0) first = "run " + std::to_string(i + 1) + ": " + why;
                    }
                    std::printf("writer %s, %s, %d reader thread%s, %s: ", connects ? "connects" : "accepts",
                                settled ? "switched before" : "switching while sending", nreaders, nreaders > 1 ? "s" : "",
                                name(end));
                    if (bad == 0) std::printf("every accepted byte arrived once, in its writer's order, then EOF\n");
                    else std::printf("FAILED in %d of %d runs; first: %s\n", bad, runs, first.c_str());
                }
    return 0;
}
