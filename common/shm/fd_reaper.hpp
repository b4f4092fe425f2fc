// Closes files whose last close may block, on a thread of the shim's own.
//
// A file another process handed us (SCM_RIGHTS) or queued on a side-channel
// socket of ours can make its final close wait as long as that process likes:
// a TCP socket with unsent bytes to a zero window and SO_LINGER {1,120}, a FUSE
// file whose flush its daemon never answers, a Unix socket whose queue holds
// such files. The final fput runs in the closing thread (task work on its way
// back to user space), so a close on an application thread would hold the
// application's call. Setting SO_LINGER {1,0} first is no cure: the sender may
// share the description, set it back and close its copy in between.
//
// close_later marks the fd as the shim's (the program's closes pass over it)
// and hands it to a detached thread that closes it; the thread is created at
// the first need in each process, with every signal blocked, and sleeps on a
// futex otherwise. Honest peers never make one: side_channel.hpp closes inline
// what provably cannot block.
#pragma once

namespace rdmasock::fd_reaper {

void close_later(int fd);
// Threads started so far in this process (tests, stats).
unsigned started();

}  // namespace rdmasock::fd_reaper
