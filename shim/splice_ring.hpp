// splice() on a connection the shim carries: the kernel cannot move bytes that
// travel in a ring, so the shim moves them itself, with splice()'s checks,
// blocking rules and results, and never more than the other side took.
// (A hand-over back to TCP first, as before, lost the ring's last bytes when
// the peer had ended: nobody was left to send them again.)
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include "fd_table.hpp"

namespace rdmasock::shim {

// socket -> pipe: the bytes are peeked, written to the pipe, and only what
// the pipe took is consumed.
ssize_t splice_from_ring(Socket& s, loff_t* off_in, int pipe_fd, loff_t* off_out, size_t len, unsigned flags);
// The same for a plain socket with kept bytes owed (io_path.hpp kept_owed):
// through the shim's recv, which serves them in their place.
ssize_t splice_from_kept(int fd, loff_t* off_in, int pipe_fd, loff_t* off_out, size_t len, unsigned flags);
// pipe -> socket: the pipe's bytes are copied by tee() into a private pipe
// (the pipe keeps them), sent, and only what the send took is read off it.
ssize_t splice_to_ring(int pipe_fd, loff_t* off_in, Socket& s, loff_t* off_out, size_t len, unsigned flags);

}  // namespace rdmasock::shim
