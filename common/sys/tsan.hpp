// ThreadSanitizer annotations (empty outside a TSan build: make tsan).
//
// For the one access TSan cannot judge: memory shared with a peer (another process,
// or the NIC) that a thread rewrites while another thread may still look at it, and
// whose every word is validated before use (docs/protocol.md, "Only reads break a
// ring"). An annotation in the code rather than a suppression file, because the
// preloaded runs cannot symbolize (tests/robustness/tsan_symbolize.py says why) and
// suppressions match symbol names.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace rdmasock::tsan {

// While in scope, this thread's writes are not checked for races.
struct IgnoreWrites {
#if defined(__SANITIZE_THREAD__)
    IgnoreWrites() { AnnotateIgnoreWritesBegin(__FILE__, __LINE__); }
    ~IgnoreWrites() { AnnotateIgnoreWritesEnd(__FILE__, __LINE__); }
#else
    IgnoreWrites() {}  // user-provided: a scope guard, not an unused variable
    ~IgnoreWrites() {}
#endif
    IgnoreWrites(const IgnoreWrites&) = delete;
    IgnoreWrites& operator=(const IgnoreWrites&) = delete;
};

}  // namespace rdmasock::tsan
