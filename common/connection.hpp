// One TCP connection as the shim sees it: negotiation, the upgraded ring path,
// waiting, and the statistics line. The shim's interposers find a Connection by
// fd and call it; the kernel calls it needs come in through SocketOps, so tests
// can drive it without LD_PRELOAD.
//
// Phases:
//   client: undecided -> offered -> upgraded | plain | failed
//   server: undecided -> accepted -> upgraded | plain | failed
//           undecided -> strip_hello -> plain   (the app wrote before any HELLO came)
// plain means every call passes straight through to the kernel.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "config.hpp"
#include "handshake.hpp"
#include "spin_policy.hpp"
#include "transport.hpp"

namespace rdmasock {

struct SocketOps {
    ssize_t (*recv)(int, void*, size_t, int);
    ssize_t (*send)(int, const void*, size_t, int);
    ssize_t (*recvmsg)(int, msghdr*, int);
    ssize_t (*sendmsg)(int, const msghdr*, int);
    int (*poll)(pollfd*, nfds_t, int);
};

enum class Role : uint8_t { client, server };
enum class Phase : uint8_t { undecided, offered, accepted, strip_hello, upgraded, plain, failed };

const char* to_string(Phase p);

class Connection {
public:
    Connection(int fd, Role role, bool nonblocking, const Config& config, const SocketOps& ops);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    Phase phase() const { return phase_.load(std::memory_order_acquire); }
    bool is_plain() const { return phase() == Phase::plain; }
    Role role() const { return role_; }
    int fd() const { return fd_; }
    void set_fd(int fd) { fd_ = fd; }
    void set_nonblocking(bool on) { nonblocking_.store(on, std::memory_order_relaxed); }
    bool nonblocking() const { return nonblocking_.load(std::memory_order_relaxed); }
    void set_timeouts(int64_t recv_us, int64_t send_us);
    // Client side: whether to send a HELLO at the first I/O (else plain at once).
    void set_offer(uint32_t offers);

    // Byte-stream calls for non-plain phases; return -1 with errno set on error.
    // `flags` are the socket MSG_* flags of the application call.
    ssize_t send(const iovec* iov, int iovcnt, int flags);
    ssize_t recv(const iovec* iov, int iovcnt, int flags);
    // Bytes readable now (FIONREAD), for upgraded connections.
    size_t readable_bytes();
    // Grows with every byte that lands and once more when the end of stream
    // lands: a change since the last EPOLLIN report is a new edge for EPOLLET.
    uint64_t arrivals();

    // Readiness for poll/epoll. `wanted` is POLLIN|POLLOUT|POLLRDHUP...; the
    // result holds the poll bits true now. `kernel_events` receives what to
    // wait for on the kernel fd while sleeping (0: nothing of ours, use the
    // app's own events verbatim because the connection is plain).
    short ready_events(short wanted, short* kernel_events);
    // Before sleeping in poll/epoll: ask the peer for doorbells (Dekker).
    // Returns a token of what was armed, to pass to disarm(); *may_sleep turns
    // false when the transport saw progress in flight (re-check, don't sleep).
    int arm(short wanted, bool* may_sleep);
    void disarm(int token);
    // How long poll/epoll should spin for this connection, learned from its waits.
    SpinPolicy& spin_policy() { return spin_; }
    // Sleep bracket for poll/epoll: try to own the doorbell stream while the
    // caller sleeps in the kernel; false when another thread owns it (the caller
    // must then sleep only briefly). end_sleep drains doorbells if owned.
    bool try_begin_sleep();
    void end_sleep(bool owned);

    // shutdown(2) and the last close(2) of this connection.
    int shutdown(int how);
    void close_last_reference();
    // The process that owns the transport (set at upgrade). A forked child that
    // inherits an upgraded connection must not touch its rings.
    bool owned_by_this_process() const;

    // One line: transport, role and bytes each way (plain bytes are counted by the shim).
    std::string stats_line(uint64_t plain_tx, uint64_t plain_rx) const;
    const char* transport_name() const { return phase() == Phase::upgraded ? transport_->name() : "tcp"; }
    const std::string& fallback_reason() const { return fallback_reason_; }  // final once plain/failed
    // How often a send found the ring full: TCP's SOCK_NOSPACE, after which
    // freed space is a new EPOLLOUT edge.
    uint64_t send_full_count() const { return send_full_.load(std::memory_order_relaxed); }

private:
    // Advances the handshake without blocking; true when it moved.
    bool progress();
    bool progress_locked(bool app_wants_to_write);
    bool progress_client_offer();
    bool progress_client_reply();
    bool progress_server_hello(bool app_wants_to_write);
    bool progress_server_ready();
    bool progress_strip_hello();
    // Server: fill `reply` with an ACCEPT (and set pending_) or a refusal reason.
    void accept_shm(const handshake::Message& hello, handshake::Message& reply);
    void accept_rdma(const handshake::Message& hello, handshake::Message& reply);
    // Blocks (honouring timeouts) until the handshake leaves its waiting phase.
    bool settle(int flags, bool for_write);
    // Peeks at the kernel buffer: the parsed message, or eof/empty.
    handshake::ParseResult peek_message(bool* eof, bool* empty);
    bool send_message(const handshake::Message& m);
    bool consume(size_t n);
    void become_plain(const char* why);
    void become_failed(const char* why);
    void upgrade(std::unique_ptr<Transport> t);

    ssize_t ring_send(const iovec* iov, int iovcnt, int flags);
    ssize_t ring_recv(const iovec* iov, int iovcnt, int flags);
    void ring_doorbell();
    bool transport_failed();
    // Doorbells are single bytes on the TCP stream: 1 = "I wrote / I freed
    // space"; kAbortByte = "my transport broke" (the peer resets the connection).
    static constexpr char kAbortByte = static_cast<char>(0xEE);
    // Spin, then sleep on the kernel fd until `ready()` or the deadline.
    enum class Wait { ready, timeout, interrupted };
    template <class Ready> Wait wait_for(Ready ready, bool reader, int64_t timeout_us);
    int64_t timeout_for(bool write) const;

    int fd_;
    const Role role_;
    std::atomic<bool> nonblocking_;
    const Config& config_;
    const SocketOps& ops_;
    std::atomic<Phase> phase_{Phase::undecided};
    uint32_t offers_ = 0;
    std::unique_ptr<Transport> transport_;
    std::unique_ptr<Transport> pending_;  // server: created, waiting for READY
    int64_t need_more_since_ms_ = 0;      // a partial handshake message arrived at
    std::mutex handshake_mu_, read_mu_, write_mu_;
    // Held from a sleeper's last re-check until it has drained the doorbells it
    // woke on, so no other thread can swallow its doorbell in between.
    std::mutex drain_mu_;
    // Several threads may sleep on one connection: the shared "wake me" flag is
    // cleared only when the last of them stops waiting.
    std::mutex arm_mu_;
    int reader_sleepers_ = 0, writer_sleepers_ = 0;
    // False when the transport knows the peer already made progress: don't sleep.
    bool arm_side(bool reader);
    void disarm_side(bool reader);
    void drain_locked();
    std::atomic<bool> peer_closed_{false};  // kernel EOF seen on the doorbell stream
    std::atomic<bool> peer_reset_{false};
    std::atomic<bool> failure_reported_{false};  // transport_failed() sent its abort byte
    bool shut_rd_ = false, shut_wr_ = false;
    int64_t recv_timeout_us_ = -1, send_timeout_us_ = -1;
    int owner_pid_ = 0;
    uint64_t tx_bytes_ = 0, rx_bytes_ = 0;
    std::atomic<uint64_t> send_full_{0};
    std::string fallback_reason_;
    SpinPolicy spin_;
};

// The pid cache the shim keeps current across fork (getpid() is a syscall).
int current_pid();
void refresh_current_pid();

}  // namespace rdmasock
