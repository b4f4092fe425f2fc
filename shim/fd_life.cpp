#include "sys/raw_syscall.hpp"
#include "fd_life.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "epoll_sets.hpp"
#include "shim_state.hpp"
#include "shm/leftover.hpp"
#include "shm/peer_check.hpp"
#include "sys/thread_cancel.hpp"

namespace rdmasock::shim {

// What a close, a dup2 over a number or a close_range undoes runs destructors
// and closes the shim's own fds: no pending pthread_cancel acts inside it
// (thread_cancel.hpp; the application's close is the cancellation point).
void forget_fd(int fd, bool for_close) {
    cancel::Shield shield;
    bool last = false;
    std::shared_ptr<Socket> dupped;  // its last fd: registrations under other numbers go too
    if (auto s = fd_table().take(fd, for_close)) {
        // The connection may live on through another fd: it must not keep using
        // this number, which the kernel may hand to the next open. (A look, not the
        // decision: a concurrent close of a dup may make this one the last after all.)
        if (s->fd_refs.load() != 1 && s->conn && s->conn->fd() == fd) s->conn->keep_own_fd();
        last = release_socket(s);
        if (last && s->dupped.load(std::memory_order_relaxed)) dupped = s;
    }
    // As in the kernel, epoll registrations last until the socket's last fd closes.
    epoll_forget(fd, last);
    if (dupped) epoll_forget_socket(dupped.get());
}

void forget_stale_fd(int fd) {
    if (fd < 0 || !fd_table().contains(fd) || in_vfork_child()) return;
    if (auto s = fd_table().get(fd); s && s->conn) s->conn->lose_fd_number(fd);
    forget_fd(fd);
}

int track_dup(int oldfd, int newfd) {
    if (newfd < 0 || oldfd == newfd || in_vfork_child()) return newfd;
    forget_stale_fd(newfd);  // the kernel says the number was free
    if (auto s = fd_table().get(oldfd)) {
        s->fd_refs.fetch_add(1);
        s->dupped.store(true, std::memory_order_relaxed);
        fd_table().put(newfd, s);
    } else {
        epoll_dup(oldfd, newfd);
    }
    return newfd;
}

void closing_kept(unsigned first, unsigned last) {
    if (!leftover::any() || in_vfork_child() || first > last) return;
    if (first == last) {  // close, dup2: one fstat unless the socket is one we keep bytes for
        const int fd = static_cast<int>(first);
        if (fd < 0 || fd_table().contains(fd)) return;
        const uint64_t inode = leftover::inode_of(fd);
        if (leftover::known(inode) && peer_check::descriptors_here(inode) == 1) leftover::closing_last(fd, inode);
        return;
    }
    for (uint64_t inode : leftover::known_inodes()) {
        int inside = -1;
        if (peer_check::descriptors_left_after(inode, first, last, &inside) == 0 && inside >= 0 &&
            !fd_table().contains(inside))
            leftover::closing_last(inside, inode);
    }
}

void before_replace(int oldfd, int newfd) {
    if (oldfd == newfd || newfd < 0 || in_vfork_child()) return;
    const bool tracked = fd_table().contains(newfd);
    if (!tracked && !epoll_any() && !leftover::any()) return;
    int saved = errno;
    const bool old_open = raw_syscall(SYS_fcntl, oldfd, F_GETFD) >= 0;
    errno = saved;
    if (!old_open) return;
    closing_kept(static_cast<unsigned>(newfd), static_cast<unsigned>(newfd));
    if (!tracked && !epoll_any()) return;
    cancel::Shield shield;
    if (tracked) forget_fd(newfd, true);  // closing until the kernel's dup2 returned (dup2's closed())
    else epoll_forget(newfd, false);  // an epoll set's fd, or a set's own eventfd, replaced
}

}  // namespace rdmasock::shim
