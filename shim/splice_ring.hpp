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
// sendfile() from a connection on a ring (in_fd): the kernel would read its
// TCP socket, where none of the ring's bytes are. Into a pipe as
// splice_from_ring (nonblocking when the pipe is), with the kernel's errors
// otherwise: ESPIPE for an offset (a socket has no position), EINVAL for any
// other out_fd (the kernel sends only a regular file or a block device there).
ssize_t sendfile_from_ring(Socket& s, int out_fd, off_t* offset, size_t count);
// pipe -> socket: the pipe's bytes are copied by tee() into a private pipe
// (the pipe keeps them), sent, and only what the send took is read off it.
ssize_t splice_to_ring(int pipe_fd, loff_t* off_in, Socket& s, loff_t* off_out, size_t len, unsigned flags);

}  // namespace rdmasock::shim
