// The shim's share of the application's file descriptors (issue 37; docs/robustness.md,
// "File descriptors").
//
// Over TCP a connection costs its program one descriptor. The shim adds its own:
// a side-channel listener from connect() until the rendezvous ends, side-channel
// sockets, doorbells. Those must never make a call of the program fail that would
// succeed without the shim. Two rules, both cheap:
// - a share: once the program's own numbers reach half the soft RLIMIT_NOFILE,
//   the shim starts no rendezvous while its own descriptors (own_fd.hpp) fill an
//   eighth of it (at least 16); the connection stays on TCP, which needs none;
// - give back on EMFILE: when a descriptor-making call of the program (socket,
//   accept, dup...) finds the table full and the shim holds descriptors of
//   rendezvous that have made no rings yet, those rendezvous end (their
//   connections stay on TCP, nothing was switched) and the call is made again.
//   (shim/interpose_socket.cpp, give_back_fds)
#pragma once

namespace rdmasock::fd_budget {

// What the descriptors are for.
// - rendezvous: a side-channel listener and sockets, given back on EMFILE;
//   within the share above. `app_fd` is the program's newest descriptor (its
//   new socket: the kernel hands out the lowest free number, so it tells how
//   full the program's part of the table is).
// - doorbells: kept for the connection's life and never given back, so only
//   while the program's part of the table is below half the limit and the
//   shim's own descriptors stay within a quarter of it (a program that opens
//   connection after connection, each used at once, keeps three quarters of
//   its table: 10,000 connections under a limit of 20,000 open as over TCP,
//   the first ones on shared memory). `app_fd` (the TCP socket) may be old: the program's lowest free
//   number is probed. Asked BEFORE the doorbells are made: the shim's own
//   numbers are high by design (own_fd.hpp) and say nothing of the program's.
enum class For { rendezvous, doorbells };

// True when the shim may take `n` more descriptors of its own beside the
// program's descriptor `app_fd`.
bool may_take(int n, int app_fd, For what = For::rendezvous);

}  // namespace rdmasock::fd_budget
