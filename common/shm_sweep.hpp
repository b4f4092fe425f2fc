// Removes shared-memory segment names left behind by dead processes.
//
// A creator unlinks its segment at READY/ABORT/close, and the attaching peer
// unlinks it too; only a creator killed while its peer never attaches (a raw or
// dead client between ACCEPT and READY) leaves the name in /dev/shm for good.
#pragma once

namespace rdmasock {

// Unlinks /dev/shm/rdmasock-PID-* owned by our user whose creator PID no longer
// exists. Returns how many names it removed. Cheap (one readdir of /dev/shm).
int sweep_orphan_segments();

// The sweep as the segment creator runs it: at the first creation in this
// process, then at most once a minute.
void sweep_orphan_segments_now_and_then();

}  // namespace rdmasock
