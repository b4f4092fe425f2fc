// Keeps a fork from splitting the making of one of the shim's fds from the
// number's store in memory.
//
// fork() is no snapshot: the kernel copies the fd table first (copy_files)
// and the memory afterwards (copy_mm, page by page), while the parent's other
// threads run on. An fd a thread makes between the two, whose number it stores
// before its page is copied, is a number in the child's memory that the
// child's fd table never had; an fd closed in between, whose holder forgets
// the number only later, is the same. The child's next fd at a high number
// (its thread bell, its own dup of the TCP socket) then gets that very number,
// and the stale holder closes, shuts down or rings it: a side channel's
// shutdown(SHUT_RDWR) on the TCP socket the child shares with its parent, or a
// doorbell's 8 bytes written into the stream. (tests/unit/test_fork_fence.cpp
// shows the split without the fence: most forks beside three threads making
// fds see a number their table lacks.)
//
// So the shim's fds are made, and a holder's close-and-forget is done, inside
// a Section, and fork's prepare handler waits until no Section is under way
// while new ones wait for the fork to finish. Sections never block (a few
// nonblocking syscalls), so the wait is short; it is bounded both ways (a
// section on a thread stopped in a debugger must not hang every fork), and a
// bound reached is logged once.
#pragma once

namespace rdmasock::fork_fence {

class Section {
public:
    Section();
    ~Section();
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;

private:
    bool counted_ = false;  // the thread's outermost, counted in the process's
};

// pthread_atfork's three hooks (the shim's before_fork calls before_fork
// first, ahead of any lock a section might want).
void before_fork();
void after_fork_parent();
void after_fork_child();

// Bounds reached so far in this process (tests).
unsigned bounds_reached();

}  // namespace rdmasock::fork_fence
