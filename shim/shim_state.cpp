#include "shim_state.hpp"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "epoll_sets.hpp"
#include "shm/leftover.hpp"
#include "base/log.hpp"
#include "real_calls.hpp"
#include "stdio_kept.hpp"
#include "sys/signal_seen.hpp"
#include "sys/own_fd.hpp"
#include "sys/fork_fence.hpp"

namespace rdmasock::shim {

namespace {

Config* g_config = nullptr;

void before_fork() {
    // First: a thread making one of the shim's fds may want a lock taken below.
    fork_fence::before_fork();
    note_fork_begins();
    epoll_before_fork();
    FdTable::before_fork();
}

void after_fork_parent() {
    FdTable::after_fork_parent();
    epoll_after_fork_parent();
    note_fork();
    fork_fence::after_fork_parent();
}

void after_fork_child() {
    fork_fence::after_fork_child();
    refresh_current_pid();
    // Only the forking thread is here: locks the others held are nobody's.
    fd_table().forget_other_threads();
    epoll_after_fork_child();
    signals::note_process();  // its copy of the signal records is its own
}

// At exit, connections the program never closed still report their statistics
// and send their end-of-stream record.
void at_exit() {
    if (!g_config) return;
    for (int fd = 0; fd < 65536; ++fd) {
        if (!fd_table().contains(fd)) continue;
        auto s = fd_table().take(fd);
        if (s && s->conn) release_socket(s, true);
    }
}

// Connection::set_local_end_lookup: the connection of ours on TCP socket `ino`.
std::shared_ptr<Connection> local_end(uint64_t ino) {
    if (!fd_table_built()) return nullptr;
    for (int fd : fd_table().present_in(0, INT_MAX))
        if (auto s = fd_table().get(fd); s && s->conn && s->conn->socket_inode() == ino) return s->conn;
    return nullptr;
}

// Connection::set_peer_in_process_lookup: the server connection of ours, with
// no HELLO read yet, whose socket is the other end of TCP socket `fd`
// (its address our peer's, its peer our address). Asked only by a client whose
// HELLO went unanswered for 10 ms: the candidates are few and it is rare.
std::shared_ptr<Connection> peer_in_process(int fd) {
    if (!fd_table_built()) return nullptr;
    sockaddr_storage mine{}, theirs{};
    socklen_t ml = sizeof mine, tl = sizeof theirs;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &ml) != 0 ||
        real::calls().getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &tl) != 0)
        return nullptr;
    for (int other : fd_table().present_in(0, INT_MAX)) {
        auto s = fd_table().get(other);
        if (other == fd || !s || !s->conn || s->conn->role() != Role::server || s->conn->phase() != Phase::undecided) continue;
        sockaddr_storage a{}, b{};
        socklen_t al = sizeof a, bl = sizeof b;
        if (::getsockname(other, reinterpret_cast<sockaddr*>(&a), &al) == 0 &&
            real::calls().getpeername(other, reinterpret_cast<sockaddr*>(&b), &bl) == 0 && al == tl && bl == ml &&
            std::memcmp(&a, &theirs, al) == 0 && std::memcmp(&b, &mine, bl) == 0)
            return s->conn;
    }
    return nullptr;
}

__attribute__((constructor)) void init() {
    if (g_config) return;  // config() ran it already (a call before the constructor)
    std::vector<std::string> errors;
    g_config = new Config(parse_config([](const char* n) { return std::getenv(n); }, errors));
    set_log_level(g_config->log_level);
    for (const auto& e : errors) log_message(LogLevel::error, "%s", e.c_str());
    real::calls();
    refresh_current_pid();
    signals::note_process();
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    Connection::set_local_end_lookup(local_end);
    Connection::set_peer_in_process_lookup(peer_in_process);
    std::atexit(at_exit);
    leftover::adopt_from_env();  // bytes an exec'd-from image kept for an inherited socket
    stdin_through_kept_bytes();  // and fgets(stdin) reads them (stdio_kept.hpp)
    RS_LOG(debug, "loaded: transport=%s ring=%llu spin_us=%u", to_string(g_config->transport),
           static_cast<unsigned long long>(g_config->ring_bytes), g_config->spin_us);
}

}  // namespace

const Config& config() {
    if (!g_config) init();
    return *g_config;
}

void print_stats(const Socket& s) {
    if (!config().stats || !s.conn) return;
    // A process that only accepted and handed the connection on (the postmaster) has nothing to say.
    // A connection that never carried a byte (connected and closed, or only accepted) has nothing to say either.
    const Phase ph = s.conn->phase();
    if ((ph == Phase::undecided || ph == Phase::rv_pending || ph == Phase::rv_listen) && s.conn->carried_nothing() &&
        s.plain_tx == 0 && s.plain_rx == 0)
        return;
    print_line("%s", s.conn->stats_line(s.plain_tx.load(), s.plain_rx.load()).c_str());
}

bool release_socket(const std::shared_ptr<Socket>& s, bool now) {
    if (s->fd_refs.fetch_sub(1) != 1) return false;
    if (s->registry_fd >= 0) close_own_fd(s->registry_fd);
    if (now) s->finish();  // at exit: a call in progress never returns
    s->last_fd_closing();
    return true;
}

}  // namespace rdmasock::shim

namespace rdmasock {

// In the thread of the last call out, after its result: what it set in errno stays.
void Socket::release() {
    if (!conn) return;
    const int saved = errno;
    finish();
    conn->retire_fd();
    errno = saved;
}

void Socket::finish() {
    if (!conn || finished.exchange(true, std::memory_order_acq_rel)) return;
    conn->close_last_reference();
    shim::print_stats(*this);
}

}  // namespace rdmasock

namespace rdmasock::shim {

bool in_vfork_child() { return static_cast<int>(getpid()) != current_pid(); }

}  // namespace rdmasock::shim
