// Whether a spin would take a CPU that another thread needs (docs/waiting.md,
// "Busy machines"). A waiter that spins holds its CPU; when runnable threads
// outnumber the CPUs this process may use, some thread -- often the very peer
// it waits for -- is queued behind it, and the spinner also runs up its own
// virtual runtime, so the kernel runs it later once it does sleep. A sleeping
// waiter is woken ahead of busy loops. So: spin only while the machine has a
// CPU to spare, sleep at once otherwise.
//
// The count is the kernel's own: the number of runnable tasks in /proc/loadavg
// (its fourth field, "running/total"), read at most once every kSampleUs per
// process by whichever waiter asks; the CPUs are this thread's affinity mask.
#pragma once

#include <cstdint>

namespace rdmasock::cpu_load {

// 10 ms: at 2 ms, 32 PostgreSQL backends on 2 CPUs spent about a system call
// per query on it (open, read, close of /proc/loadavg), and pgbench -c32
// select-only ran 4% slower (docs/results.md, 2026-12-01).
constexpr int64_t kSampleUs = 10000;

// True while more tasks are runnable than this process has CPUs (at the last
// sample; false when /proc cannot be read). Cheap: one relaxed load between samples.
bool oversubscribed();

// What the last sample saw (for the statistics line and benchmarks).
struct Sample {
    int runnable = 0;
    int cpus = 0;
};
Sample last_sample();

// How many waits skipped their spin because the machine was busy (process-wide).
uint64_t spins_skipped();
void note_spin_skipped();

// Parses /proc/loadavg's text: the runnable count, or -1 (unit-tested).
int parse_runnable(const char* text, long len);

}  // namespace rdmasock::cpu_load
