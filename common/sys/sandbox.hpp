// A process under a seccomp filter (OpenSSH's privilege-separated child): from
// the filter on, a syscall outside its list kills the process (SIGSYS). The
// shim hands every connection to the kernel just before the filter
// (shim/interpose_handover.cpp, prctl) and from then on makes no syscall of
// its own beyond what any such filter that lets a program do I/O allows
// (read, write, close, shutdown, poll). The doorbells and the side channel
// are socket pairs whose careful teardown asks the kernel first
// (getsockopt, ioctl SIOCINQ, a reaper thread): in a sandbox they are left
// open instead, as a process of few connections and a short life can afford.
#pragma once

namespace rdmasock::sandbox {

void enter();      // the filter is about to be installed (after the hand-over)
bool inside();     // whether it was

}  // namespace rdmasock::sandbox
