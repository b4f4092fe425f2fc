// One TCP connection as the shim sees it: negotiation, the upgraded ring path,
// waiting, and the statistics line. Its code is split by stage:
//   connection.cpp               phases, dispatch of each call, teardown, statistics
//   connection_side_channel.cpp  same host: rendezvous steps, bytes before the switch
//   connection_inband.cpp        the in-band handshake (RDMA)
//   connection_stream.cpp        ring send/recv and what they count
//   connection_doorbell.cpp      doorbells, waiting (through wait_engine.hpp), readiness
//   connection_downgrade.cpp     the way back to TCP (downgrade.hpp)
// The shim's interposers find a Connection by fd and call it; the kernel calls it needs come in through SocketOps, so tests
// can drive it without LD_PRELOAD.
//
// Phases:
//   client: undecided -> offered -> upgraded | plain | failed
//   server: undecided -> accepted -> upgraded | plain | failed
//           undecided -> strip_hello -> plain   (the app wrote before any HELLO came)
//   same host, over the side channel (shm_rendezvous.hpp; nothing in the TCP stream):
//   client: rv_listen -> rv_accepted -> upgraded | plain
//   server: rv_pending -> rv_offered -> upgraded | plain
//           rv_pending -> undecided   (the client has no side channel: maybe an in-band HELLO)
// plain means every call passes straight through to the kernel. In the rv_*
// phases the application's bytes travel over TCP and each call advances the
// rendezvous a step; from rv_accepted on the peer may switch to the ring at any
// moment, so a sleeper also waits on the transport's eventfd.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>
#include <mutex>
#include <string>

#include "sys/owner_written.hpp"
#include "negotiation/back_marker.hpp"
#include "base/config.hpp"
#include "base/published_ptr.hpp"
#include "connection/connection_phase.hpp"
#include "negotiation/handshake.hpp"
#include "sys/process_id.hpp"
#include "shm/shm_rendezvous.hpp"
#include "wait/side_lock.hpp"
#include "wait/spin_policy.hpp"
#include "ring/busy_lock.hpp"
#include "ring/transport.hpp"

namespace rdmasock {

struct SocketOps {
    ssize_t (*recv)(int, void*, size_t, int);
    ssize_t (*send)(int, const void*, size_t, int);
    ssize_t (*recvmsg)(int, msghdr*, int);
    ssize_t (*sendmsg)(int, const msghdr*, int);
    int (*poll)(pollfd*, nfds_t, int);
};

// A call's socket timeout (SO_RCVTIMEO/SO_SNDTIMEO) as one deadline: TCP
// counts it once for the whole call (sk_wait_data), however often it sleeps.
class CallTimeout {
public:
    explicit CallTimeout(int64_t timeout_us);  // -1: none (no clock read)
    int64_t left_us() const;                   // -1: none; 0: passed (look once, then EAGAIN)

private:
    int64_t deadline_us_ = -1;
};

enum class Role : uint8_t { client, server };

class Connection {
public:
    Connection(int fd, Role role, bool nonblocking, const Config& config, const SocketOps& ops);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    Phase phase() const { return phase_.load(std::memory_order_acquire); }
    bool is_plain() const { return phase() == Phase::plain; }
    // Readiness is the kernel's own (plain, or a rendezvous still all on TCP).
    bool kernel_driven() const {
        Phase p = phase();
        return p == Phase::plain || rendezvous_on_tcp(p);
    }
    // Whether this connection went through the side-channel rendezvous (it then
    // counts its own TCP bytes for the statistics line).
    bool side_channel_tried() const { return side_tried_.load(std::memory_order_relaxed); }
    // It counts every byte of its calls itself (side channel, or once upgraded:
    // a call that ends plain after a way back moved bytes on both paths).
    bool counts_own_bytes() const { return side_tried_.load(std::memory_order_relaxed) || upgraded_once_.load(std::memory_order_relaxed); }
    bool carried_nothing() const { return tx_bytes_ == 0 && rx_bytes_ == 0 && tcp_tx_ == 0 && tcp_rx_.load() == 0; }
    // The doorbell this side sleeps on besides the TCP socket (-1: none).
    int wake_fd() const;
    unsigned wake_generation() const;  // Transport::wake_generation
    Role role() const { return role_; }
    int fd() const { return fd_.load(std::memory_order_acquire); }
    void set_fd(int fd) { fd_.store(fd, std::memory_order_release); }
    void set_nonblocking(bool on) { nonblocking_.store(on, std::memory_order_relaxed); }
    bool nonblocking() const { return nonblocking_.load(std::memory_order_relaxed); }
    void set_timeouts(int64_t recv_us, int64_t send_us);
    // TCP_NODELAY as the program set it. The shim turns it on in the kernel for
    // its own small messages (no_delay_for_shim); from then on the program's
    // getsockopt reads the program's value (false: the kernel's is the
    // program's) and its setsockopt is recorded, the kernel's kept on.
    bool program_nodelay(int& v) const;
    void set_program_nodelay(int v);
    // Client side: whether to send a HELLO at the first I/O (else plain at once).
    void set_offer(uint32_t offers);
    // Client, no offer made (plain from the start): why, for the statistics.
    void note_not_offered(const char* why) { fallback_reason_ = why; }
    // Same host, side channel. Client: before the kernel connect (the name must
    // exist before the server can look for it); false leaves the phase alone.
    bool start_rendezvous_client(netns::Id socket_ns = {});
    // Server: at accept; the first I/O in whichever process performs it offers.
    void start_rendezvous_server(netns::Id socket_ns = {});
    // Server: read the first bytes as a possible HELLO only where RDMA can run on
    // this host (RdmaDevice::host_may_have_rdma, looked at lazily, at the first
    // I/O): elsewhere no shimmed client sends one, and a plain client's first
    // bytes must reach the program at once, whatever they are. (Unit tests drive
    // the in-band handshake without it.)
    void in_band_only_with_rdma() { in_band_needs_rdma_ = true; }

    // Byte-stream calls for non-plain phases; return -1 with errno set on error.
    // `flags` are the socket MSG_* flags of the application call.
    ssize_t send(const iovec* iov, int iovcnt, int flags);
    ssize_t recv(const iovec* iov, int iovcnt, int flags);
    // What TCP_CLOSE is on a ring: reset, or ended both ways (our FIN sent and
    // the peer's landed). shutdown and getpeername say ENOTCONN then; a RST
    // changes nothing. False unless upgraded. (our_fin_counts false: our FIN is
    // the one this shutdown writes now, not one sent before.)
    bool stream_closed(bool our_fin_counts = true);
    // The error the peer's reset left owed (TCP's sk_err), taken: the next
    // failing call reports it, or getsockopt(SO_ERROR) takes it; 0 if none.
    int take_pending_err();
    // A read of the kernel socket returned its error ERR (owed: bytes went first).
    void kernel_error_taken(int err, bool owed);
    // The same after a look at the TCP socket's news (a dead peer's FIN or
    // RST): recvmmsg, which reports sk_err before any byte.
    int take_socket_error();
    // recvmmsg: an entry after the first met the reset's error, which
    // do_recvmmsg keeps for the next call (sk_err): owed again.
    void owe_again(int err);
    // Bytes readable now (FIONREAD), for upgraded connections.
    size_t readable_bytes();
    // Grows with every byte that lands and once more when the end of stream
    // lands: a change since the last EPOLLIN report is a new edge for EPOLLET.
    uint64_t arrivals();

    // Advances a handshake or rendezvous as far as it goes without blocking or
    // syscalls of its own; poll and epoll call it before asking for readiness.
    void step() {
        // A forked copy's view of an RDMA ring is frozen (or absent): it goes
        // back to TCP at its first look, as at its first call.
        if (phase() == Phase::upgraded && !owned_by_this_process() && in_band()) hand_over("a forked child used the connection");
        if (phase() == Phase::upgraded) serve_downgrade();
        while (progress()) {}
    }
    // Moves the whole connection back onto its TCP socket, in order, nothing
    // lost (docs/protocol.md, "Downgrade"): before the socket leaves the
    // shim's hands (exec, SCM_RIGHTS, fdopen, splice, a forked child). Waits
    // until the peer has sent back what this side had not read. True when the
    // connection is plain now (or never left TCP); false when its transport
    // cannot go back (RDMA) or the peer's socket vanished with bytes unread.
    // Unread::may_claim (an exec into a program that loads the shim): where the
    // peer does not answer, this side claims what the peer left in its ring
    // (claim_receives) instead of waiting for it, as TCP's exec goes on at once.
    // Unread::claim_when_sole (a fork): the same, once no other process holds
    // the socket (the parent closed its copy), so no reader can miss the bytes.
    enum class Unread { ask_peer, may_claim, claim_when_sole };
    bool hand_over(const char* why, Unread unread = Unread::ask_peer);
    // Serves bytes a claim_when_sole hand-over kept, before the kernel's; false: none.
    bool kept_first(const iovec* iov, int iovcnt, int flags, ssize_t& out);
    // hand_over() for several connections at once (an exec's inherited sockets,
    // SCM_RIGHTS, a seccomp filter, io_uring): each one's first step (its sends
    // back, its receives asked for) before any waits for its peer's part, which
    // may be another of them (both ends of one connection in this process).
    static void hand_over_all(const std::vector<std::shared_ptr<Connection>>& cs, const char* why,
                              Unread unread = Unread::ask_peer);
    // The connection of this process whose TCP socket has inode `ino`, or null
    // (the shim looks in its fd table). A hand-over waits for the peer's part;
    // where the peer's end is this process's too (a program connected to
    // itself, or a forked child of one) the waiting thread may be the only one
    // that could give it, so it gives it itself (take_back_for_local_peer).
    using LocalEnd = std::shared_ptr<Connection> (*)(uint64_t ino);
    static void set_local_end_lookup(LocalEnd f) { local_end_.store(f, std::memory_order_release); }
    // The server connection of this process, with no HELLO read yet, on the
    // other end of TCP socket `fd` (a program connected to itself), or null
    // (the shim compares the addresses of its own sockets). A client's first
    // call waits for the reply to its in-band HELLO, which that server's shim
    // gives at its next call: from the same thread that call never comes, so
    // the waiting client gives it itself (serve_peer_in_process).
    using PeerInProcess = std::shared_ptr<Connection> (*)(int fd);
    static void set_peer_in_process_lookup(PeerInProcess f) { peer_in_process_.store(f, std::memory_order_release); }
    // The application asked for what only the kernel's socket does (kernel_only.hpp):
    // the connection goes back to TCP, or declines a later in-band offer. False
    // when it stays where it is (RDMA rings: the way back would wait for the peer).
    bool keep_on_tcp(const char* why);
    // The program's descriptor table is full: a rendezvous that has made no
    // rings yet gives its side-channel sockets back and the connection stays on
    // TCP. True when it did (sys/fd_budget.hpp).
    bool give_back_side_channel(const char* why);
    // keep_on_tcp() without the hand-over (the caller hands several over at once):
    // true when the connection should go back now.
    bool mark_tcp_only(const char* why);
    // Readiness for poll/epoll; does no I/O (call step() first). `wanted` is POLLIN|POLLOUT|POLLRDHUP...; the
    // result holds the poll bits true now. `kernel_events` receives what to
    // wait for on the kernel fd while sleeping (0: nothing of ours, use the
    // app's own events verbatim because the connection is plain).
    short ready_events(short wanted, short* kernel_events);
    // The state changes TCP wakes every epoll waiter for (sk_state_change), as
    // bits that only ever turn on: our shutdown each way, the peer's end (its
    // FIN, or its RST alone), a RST after its FIN; and above them a count of
    // receives that lost the readers' lock with bytes there (lost_lock_race).
    // An edge for EPOLLET.
    uint32_t state_changes();
    // Before sleeping in poll/epoll: ask the peer for doorbells (Dekker).
    // Returns a token of what was armed, to pass to disarm(); *may_sleep turns
    // false when the transport saw progress in flight (re-check, don't sleep).
    int arm(short wanted, bool* may_sleep);
    void disarm(int token);
    // How long a sleeper waiting for `wanted` may sleep before it must look
    // again (-1: until a doorbell or the socket wakes it). A writer facing a
    // full ring after the peer's FIN learns that the peer's socket is gone only
    // from sock_diag, never from a wake-up.
    int64_t max_sleep_us(short wanted);
    // How long poll/epoll should spin for this connection, learned from its waits.
    SpinPolicy& spin_policy() { return spin_; }
    // Sleep bracket for poll/epoll: try to own the doorbell drain while the
    // caller sleeps in the kernel; false when another owns it (the caller must
    // then sleep only briefly). end_sleep drains doorbells and gives it back.
    // An owner may hold it across calls (an epoll set keeping an idle
    // connection armed) and release it from another thread.
    enum class Drain : uint8_t { none, owned, busy };  // none: no doorbell to drain
    Drain try_begin_sleep();
    // What the caller's kernel wait said of this connection's fds (its TCP
    // socket and doorbell): none (it slept, watching the socket for
    // POLLIN, and none fired: nothing to take, no system call), doorbell (only
    // the doorbell fired, the socket so watched was quiet: take the
    // doorbell, no peek), some (drain all), unknown (no sleep, an interrupted
    // one, or the socket not watched for POLLIN: one poll says whether a drain
    // has anything to take).
    enum class News : uint8_t { none, doorbell, some, unknown };
    void end_sleep(Drain d, News n = News::unknown);
    // poll/select found the TCP socket readable or in error without sleeping:
    // take what it says (the peer's end, a reset, a marker) now; false when
    // another thread owns the drain, or before the rings carry the stream.
    bool drain_socket_now() { return drain_now(News::some); }
    // The same for what a kernel answer said of its fds (`n`): an epoll answer
    // listed the doorbell of a connection no waiter is armed on (a ring that came
    // after the last disarm): taken, or it stays readable and takes a slot of
    // every kernel answer.
    bool drain_now(News n) { return phase() == Phase::upgraded && transport_ && drain_if_free(n); }

    // Phase bells (phase_bell.hpp): a sleeper that began while the phase may
    // still change (a rendezvous, an in-band handshake: its wait set is not the
    // next phase's) registers its bell here, then looks at the phase once more;
    // every phase change rings the registered bells. Settled phases need none:
    // upgraded sleepers wait on the doorbells, which the way back rings
    // (wake_local); plain and failed never change.
    static bool phase_may_change(Phase p) { return p != Phase::plain && p != Phase::upgraded && p != Phase::failed; }
    void watch_phase(int bell);
    void unwatch_phase(int bell);

    // Grows when some connection's readiness rose by a local act (shutdown),
    // not its peer's: an epoll set that keeps idle connections armed and
    // unscanned then looks at all of them again.
    static uint64_t local_epoch() { return local_epoch_.load(std::memory_order_acquire); }
    // fd identity: when the application closes the number this connection uses
    // while it lives on, it switches to a private dup. False when no fd was left.
    bool keep_own_fd();
    // In a forked child (pthread_atfork, one thread): what the parent's other
    // threads held when it forked (a reader or writer asleep holds its side's
    // lock and the doorbell drain) is nobody's here; without this the child's
    // first call on the connection waited for them for good.
    void forget_other_threads();
    // forget_other_threads, when another thread was stepping the rendezvous at the fork.
    void drop_torn_rendezvous();
    // The socket's last fd is closed and no call is in progress: close the
    // private dup, if any, and use no fd number from now on (calls get EBADF).
    void retire_fd();
    // `fd` was closed where the shim could not see it (a system call made
    // without libc) and the kernel has handed the number out again: the
    // connection stops using it at once (calls get EBADF, its last close
    // touches no kernel socket), never reaching the number's new file.
    void lose_fd_number(int fd);
    bool holds_own_fd() const { return own_fd_; }
    // The socket's inode (fstat at creation): its identity under any fd number,
    // in any process that shares our memory (a vfork child after its dup2).
    uint64_t socket_inode() const { return inode_; }
    // SO_LINGER {1, 0} is set: the close must reset, not end, the stream.
    bool abortive_close() const;

    // shutdown(2) and the last close(2) of this connection. *kernel_carries
    // (when given): the caller must also shut the kernel socket down (the
    // stream's bytes still go over TCP); false when the ring carries the end.
    int shutdown(int how, bool* kernel_carries = nullptr);
    void close_last_reference();
    // The process that owns the transport (set at upgrade). A forked child that
    // inherits an upgraded connection must not touch its rings.
    bool owned_by_this_process() const;

    // The idle pass (idle_windows.hpp) asks a connection whose send window grew
    // to give it back: done once it is back (or there is nothing of ours to
    // give: not upgraded, a forked copy, our end sent), later while it is not
    // idle yet (a send since the last pass, a writer of ours busy, a reader
    // that has not read everything). Never blocks.
    enum class Idle { later, done };
    Idle give_back_idle_window();
    std::atomic<bool> idle_watched_{false};  // idle_windows' own mark (under its lock)

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
    // Server: fill `reply` with an RDMA ACCEPT (and set pending_) or a refusal reason.
    void accept_rdma(const handshake::Message& hello, handshake::Message& reply);
    // Blocks (honouring timeouts) until the handshake leaves its waiting phase.
    bool settle(int flags, bool for_write);
    size_t ring_readable(uint64_t* delivered);
    // Peeks at the kernel buffer: the parsed message, or eof/empty.
    handshake::ParseResult peek_message(bool* eof, bool* empty);
    bool send_message(const handshake::Message& m);
    // send_message, or the phase it leaves when it cannot (`what` names the message).
    bool send_or_settle(const handshake::Message& m, const char* what);
    bool consume(size_t n);
    // At the last close: reads a complete handshake message of one of `types`
    // that has landed, so the kernel's close is a FIN, not the RST of unread bytes.
    void discard_landed_message(std::initializer_list<handshake::Type> types);
    // The only writer of phase_: a move checked against connection_phase.hpp's
    // table. start() is the set-up move of a connection no call has used yet.
    void enter(Phase to);
    void start(Phase to);
    bool started_ = false;  // a call or a move has used the connection: start() no longer applies
    void become_plain(const char* why);
    void become_failed(const char* why);
    void upgrade(std::unique_ptr<Transport> t);

    // The downgrade (connection_downgrade.cpp). tx_enter/rx_enter bracket each
    // ring write/read (holding write_mu_/read_mu_): they take the busy word of
    // the direction and say whether the ring is still the way.
    enum class Way : uint8_t { ring, tcp, wait };  // wait: we asked, the peer has not taken back yet
    Way tx_enter_locked();
    void tx_leave_locked();
    Way rx_enter_locked();
    void rx_leave_locked();
    // Someone started the way back and this side has its part to do.
    bool downgrade_due();
    void serve_downgrade();
    void take_back_locked();  // holding write_mu_ and writer_busy
    ring::RingStatus write_fin_locked();  // holding write_mu_, on the ring: the end-of-stream record
    void end_stream_locked();  // holding write_mu_: the end-of-stream record (or the kernel's FIN)
    void finish_downgrade();  // both directions back: plain from now on
    bool rx_back();
    bool rx_waiting_back();
    bool tx_back();
    ssize_t tcp_send_locked(const iovec* iov, int iovcnt, int flags);
    // One send or recv on the TCP socket, holding that direction's lock; its
    // wait is a shim sleep that a signal ends (connection_tcp_io.cpp).
    ssize_t tcp_io(bool write, const iovec* iov, int iovcnt, int flags);
    // The kernel's sendmsg/recvmsg on the TCP socket, as the program called it.
    ssize_t kernel_io(bool write, const iovec* iov, int iovcnt, int flags);
    // MSG_PEEK | MSG_DONTWAIT of the TCP socket that leaves its pending error
    // (a reset) to the program's next call (connection_tcp_io.cpp).
    ssize_t peek_tcp(void* buf, size_t n);
    std::string downgrade_why_;
    // hand_over() has begun: whichever thread holds write_mu_ / read_mu_ does
    // that side's part (a writer asleep on a full ring, a reader asleep on an
    // empty one must not keep hand_over waiting for their locks).
    std::atomic<bool> handing_over_{false};
    std::atomic<bool> eos_after_calls_{false};  // closed while a send was in progress: retire_fd ends the stream
    std::atomic<bool> tcp_only_{false};  // keep_on_tcp(): decline in-band offers
    std::string tcp_only_why_;           // keep_on_tcp()'s reason, the statistics line's (set before tcp_only_)
    // downgrade::lock, or a loud reset of the connection when the word stays taken.
    bool lock_tcp_side(std::unique_lock<SideLock>& lk, int flags, bool for_write);
    bool lock_ring_side(std::unique_lock<SideLock>& lk, int flags, bool reader, const CallTimeout& tmo);
    bool lock_busy(std::atomic<int32_t>& word);
    busy_lock::Policy busy_policy(const std::atomic<int32_t>& word) const;
    std::atomic<bool> busy_abused_{false};  // reset for a busy word held by no process of ours
    bool ask_pending();      // handing over, and our receives not yet asked for
    void ask_locked();       // holding read_mu_: ask the peer for our receives
    // The way back agreed in band (Transport::back_in_band, back_marker.hpp;
    // RDMA): each side stops reading its ring and sends its reader's place in
    // a marker on TCP; the peer's marker says where our resend starts.
    bool in_band() const { return transport_ && transport_->back_in_band(); }
    // Ours went out (our receive direction left `ring`, in state shared with
    // forked children): the ring is no longer read; writes wait for the peer's place.
    bool marker_out();
    void send_marker();                     // once: freeze our reader, send its place
    bool can_go_back();                     // in band, and a peer that can answer
    void begin_way_back(const std::string& why);  // in band: starts it, does not wait
    bool hand_over_in_band(const char* why);
    // hand_over()'s two steps: `done` with the result in *result, or `waiting`
    // for finish_hand_over() (the peer's part, then the switch).
    enum class HandOver { done, waiting };
    HandOver begin_hand_over(const char* why, bool* result);
    bool finish_hand_over(const char* why, Unread unread);
    // The peer's part of a hand-over, done by this side: with the writer idle,
    // what it left in our ring is kept for the socket's next reader, before
    // the kernel's bytes (leftover.hpp). False while it cannot be (the writer
    // mid-write, bytes from before the switch still unread on TCP).
    bool claim_receives();
    void read_marker();                     // the drain found the marker's first byte
    back_marker::Parse peek_marker(back_marker::Place& p);
    // A byte on the TCP stream that nobody of ours wrote: reset both ends, loudly.
    void reset_both(const char* why);
    void reset_for_unread(size_t left, const char* when);  // a dead peer left ring bytes a hand-over cannot resend
    // The peer's socket ended before its part of a hand-over (`when`): what it
    // left in our ring is kept for the socket's next reader, before the
    // kernel's end (leftover.hpp), and our receives are back; where it cannot
    // be kept, the connection is reset (reset_for_unread). `only_ended`: kept
    // only when the peer's end-of-stream record follows (RDMA: keep_ring_rest).
    // False: the readers' busy word stayed taken, or nothing could be kept and
    // `cut_resets` is false (a forked copy beside the ring's owner): nothing done.
    bool keep_what_the_gone_peer_left(const char* when, bool only_ended = false, bool cut_resets = true);
    // hand_over_in_band, the peer's socket ended before its marker: keep what
    // it left (above). False while a forked copy must wait for the ring's owner
    // (`waited_us`: how long it has).
    bool keep_after_gone_in_band(int64_t waited_us);
    ssize_t failed_hand_over();  // -1 with ECONNRESET after a reset, else EIO
    // RDMASOCK_FAULT=handover: hand over once this many bytes moved either way
    // (random per connection, 0 = off); the downgrade stress test.
    uint64_t handover_at_ = 0;
    void fault_handover();

    bool progress_rendezvous(bool may_syscall);
    bool rendezvous_gave_up();  // client: stop waiting for an OFFER (count + time)
    bool shm_due() const;       // the connection lived long enough for rings (RDMASOCK_SHM_AFTER_US)
    // Deferred discovery: false = nothing to do at this call yet; true = go on
    // (a step below may end the rendezvous: `progress_rendezvous` returns that).
    static bool discovery_may_wait(const Config& c);
    // RDMASOCK_SHM_AFTER_US, or where unset its default for this host (config.hpp).
    static uint32_t shm_after_us(const Config& c);
    bool client_discovery_step(bool& ended);
    bool server_may_offer_now();
    bool stream_open_both_ways();  // nothing shut, ended or reset: the switch may move it
    // Kernel I/O in the rv_* phases, counting the bytes that went over TCP.
    ssize_t tcp_send(const iovec* iov, int iovcnt, int flags);
    ssize_t tcp_recv(const iovec* iov, int iovcnt, int flags);
    // Side-channel transports: this side's sends switch to the ring (once).
    void switch_tx_locked();
    // Whether the next received byte comes from TCP (the peer has not switched,
    // or we have not yet read up to its switch offset).
    bool rx_on_tcp();
    bool tcp_part_queued(size_t* left);
    bool tcp_readable();
    // What the TCP socket shows now (poll, no wait): its revents for `events`,
    // POLLNVAL when poll itself fails. errno kept.
    short tcp_events(short events);
    // The kernel socket's pending error, taken as sock_error takes it (0: none). errno kept.
    int take_kernel_error();
    ssize_t ring_send(const iovec* iov, int iovcnt, int flags);
    ssize_t ring_recv(const iovec* iov, int iovcnt, int flags);
    ssize_t recv_nothing(bool nonblocking);
    void ring_doorbell();
    bool transport_failed();
    // A borrowed "may the call go on" predicate: no allocation, one indirect call.
    struct ReadyRef {
        bool (*fn)(const void*);
        const void* ctx;
        template <class F>
        ReadyRef(const F& f) : fn([](const void* c) { return (*static_cast<const F*>(c))(); }), ctx(&f) {}
        bool operator()() const { return fn(ctx); }
    };
    // Blocks (wait_engine.hpp) until `ready()` or the deadline; a signal ends
    // it: interrupted, or restart where the kernel would restart the call
    // (signal_restart.hpp). A restart goes back to the interposer, which lets
    // go of every lock, runs the handlers held back meanwhile and calls again
    // (shim/io_path.hpp): the handler's own calls see the connection free.
    enum class Wait { ready, timeout, interrupted, restart };
    // Before it sleeps, a wait on a socket a forked copy may hold too reads the
    // file's O_NONBLOCK and the socket's timeout from the kernel (shared_file_settings).
    Wait wait_for(ReadyRef ready, bool reader, int64_t timeout_us);
    // O_NONBLOCK as the kernel has it now (another process sharing the file may
    // have set it: fcntl's own call, the shim's refuses a private dup of ours); the cache follows.
    bool file_now_nonblocking();
    bool wait_to_peek_all(size_t want, const CallTimeout& tmo);  // recv(MSG_PEEK | MSG_WAITALL) on a ring
    // What a forked copy may have changed since (the file and the socket are
    // shared): false when the file is nonblocking now (the caller answers EAGAIN,
    // as the kernel's call would); else `timeout_us` as the kernel's
    // SO_RCVTIMEO/SO_SNDTIMEO now says. Nothing asked where no fork came since
    // the socket was made.
    bool shared_file_settings(bool reader, int64_t& timeout_us);
    // A wait that did not end ready: -1 with its errno (EAGAIN after a socket
    // timeout, EINTR, ERESTART for the interposer's restart).
    static int wait_failed(Wait w);
    struct Sleeper;  // its wait_engine hooks
    int64_t timeout_for(bool write) const;

    // The kernel socket this connection uses: the application's fd number, or our
    // own dup once the application closed its number mid-call (keep_own_fd), or -1
    // once retired. Changed while other threads are inside calls that read it: atomic.
    std::atomic<int> fd_;
    HandlerSafeMutex fd_mu_;
    bool own_fd_ = false;  // fd() is our private dup (keep_own_fd)
    const Role role_;
    std::atomic<bool> nonblocking_;
    const uint64_t made_forks_;  // forks_begun() when made: since a fork a copy may share the file
    const Config& config_;
    const SocketOps& ops_;
    std::atomic<Phase> phase_{Phase::undecided};
    // After every phase store (enter/start): rings every watcher's bell (phase_bell.hpp).
    void ring_phase_bells();
    void replace_bells_locked(int bell, bool add);
    HandlerSafeMutex bell_mu_;
    // Registered bells, one entry per registration. Replaced whole (copy, then
    // one pointer store) and never changed in place: a fork while another thread
    // registers leaves the child the old list or the new one, never a vector
    // halfway through growing.
    std::atomic<const std::vector<int>*> bells_{nullptr};
    uint32_t offers_ = 0;
    PublishedPtr<Transport> transport_;   // set once (upgrade, rendezvous); read unlocked
    std::unique_ptr<Transport> pending_;  // server: created, waiting for READY
    bool in_band_needs_rdma_ = false;     // in_band_only_with_rdma()
    int64_t need_more_since_ms_ = 0;      // a partial handshake message arrived at
    HandlerSafeMutex handshake_mu_;
    // Whoever lets go of a direction wakes the calls waiting for it (side_lock.hpp).
    static void wake_local_of(void* c) { static_cast<Connection*>(c)->wake_local(); }
    SideLock read_mu_{wake_local_of, this}, write_mu_{wake_local_of, this};
    // Held from a sleeper's last re-check until it has drained the doorbells it
    // woke on, so no other thread can swallow its doorbell in between. A flag,
    // not a mutex: an epoll set may take it in one thread and give it back in
    // another.
    std::atomic<bool> drain_owned_{false};
    bool try_own_drain() { return !drain_owned_.exchange(true, std::memory_order_acquire); }
    void release_drain() { drain_owned_.store(false, std::memory_order_release); }
    // Several threads may sleep on one connection: the shared "wake me" flag is
    // cleared only when the last of them stops waiting.
    HandlerSafeMutex arm_mu_;
    int reader_sleepers_ = 0, writer_sleepers_ = 0;
    // False when the transport knows the peer already made progress: don't sleep.
    bool arm_side(bool reader);
    void disarm_side(bool reader);
    // look_tcp=false: the caller's kernel wait saw the TCP socket quiet (skip the peek).
    void drain_locked(bool look_tcp = true);
    // The TCP socket ended with an error of its own (ETIMEDOUT...): reported once, as TCP does.
    void socket_failed(int err);
    // Takes the doorbells now (and a marker or EOF on the TCP socket) unless
    // another thread owns the drain; false then. News::unknown looks first.
    // A receive that may not wait found the readers' lock taken: EAGAIN, and
    // an edge for the bytes it would have read.
    void lost_lock_race(bool reader);
    bool drain_if_free(News n = News::unknown);
    // After a drain outside a sleep: rings this side's doorbell again while a
    // sleeper is armed (one that could not own the drain: it waits on the
    // doorbell just taken).
    void pass_wake_on();
    // One poll of the TCP socket and doorbell: whether a drain
    // would find anything. Most looks find nothing; the drain costs two calls.
    bool fds_have_news();
    // What News asks of the drain's owner: nothing, the doorbell, all, or a look first.
    void drain_for(News n);
    // A look at the TCP socket (a drain if free) unless one was made within
    // kTcpLookCycles: a sender's (ring_send), or a nonblocking reader's that
    // found the ring empty. Every drain counts as a look (drain_for); true if it looked.
    bool look_at_socket_now_and_then();
    static constexpr uint64_t kTcpLookCycles = 2'000'000;  // ~1 ms at 2-3 GHz
    std::atomic<uint64_t> next_tcp_look_{0};  // time stamp counter; relaxed (a hint: a late look costs a syscall, an early one a millisecond)
    std::atomic<bool> peer_closed_{false};  // kernel EOF seen on the doorbell stream
    std::atomic<bool> peer_reset_{false};
    std::atomic<bool> tcp_failed_{false};  // socket_failed: the kernel forgot the socket (no FIN at our close)
    std::atomic<uint32_t> died_as_{0};      // note_reader_state: how a peer that never said goodbye ended (RingControl state)
    std::atomic<uint64_t> data_end_{~uint64_t{0}};  // our end-of-stream record's place in the ring (end_stream_locked)
    // TCP's sk_err after the peer's RST: the error the next failing call reports
    // once (ECONNRESET, or EPIPE when the RST came after the peer's FIN); 0 when
    // none is owed. POLLERR while one is.
    std::atomic<int> pending_err_{0};
    std::atomic<uint32_t> races_lost_{0};  // lost_lock_race: an edge each
    // The reset's error was reported: later reads see the end of the stream,
    // as on TCP, unless the transport itself failed (always ECONNRESET then).
    std::atomic<bool> reset_reported_{false};
    // Shut both ways before the switch, the kernel's socket too (Connection::shutdown).
    std::atomic<bool> kernel_rd_shut_{false};
    void tell_reader_gone(bool aborted);  // our rings' reader state, at our last close
    std::atomic<int> program_nodelay_{-1};  // -1: the shim never set TCP_NODELAY
    void no_delay_for_shim();
    std::atomic<int> taken_err_{0};  // what take_pending_err last took (owe_again gives back only that)
    // POLLERR stands while an error is owed: the reset's (until reported or
    // taken by SO_ERROR), a failed transport's always.
    bool owes_error() { return !reset_reported_.load() || pending_err_.load() != 0 || transport_failed(); }
    // The peer closed its socket (RingControl::reader_state) and a send went
    // out since: the RST TCP would have drawn is here.
    std::atomic<bool> sent_after_close_{false};
    // The resets TCP would have seen by now (both below): `sent_now` when a
    // send just put bytes in the ring.
    void note_resets(bool sent_now = false);
    // The reader's state the peer left in the ring we write (shared memory only).
    void note_reader_state(bool sent_now);
    bool peer_socket_gone();
    bool peer_left_unread(RingControl& c);
    bool peer_fin_seen();
    // The peer's end as poll shows it (connection_end_window.cpp): TCP's FIN
    // lands only behind bytes that fit the receive window, a ring holds far more.
    bool peer_end_shown();
    bool end_fits();
    size_t unread_ahead();
    size_t fin_window();
    void show_end_if_due();  // a read that brought the end within the window wakes its waiters
    std::atomic<uint32_t> fin_window_{0};  // the kernel socket's SO_RCVBUF, asked once
    std::atomic<bool> end_hidden_{false};  // a look found the peer's end behind more than the window
    // Shut both ways by our calls while the socket stays open: the ring's
    // stream offset then (bytes read + unread); what lands past it resets the
    // connection, as the RST TCP answers it with (shared memory only).
    static constexpr uint64_t kNoCut = ~uint64_t{0};
    std::atomic<uint64_t> rx_cut_{kNoCut};
    void note_shut_both_ways();
    void note_late_arrivals();
    uint64_t rx_room();  // bytes a read may still take before the cut
    uint64_t rx_arrived_look();
    // At our last close: bytes left unread make TCP's close a RST.
    bool unread_at_close();
    bool closed_both_ways(bool our_fin_counts = true);  // stream_closed() without looking at the reader's state

    std::atomic<bool> peer_fin_{false};  // side channel: the peer's FIN seen while its bytes still come over TCP
    // A FIN while the peer's bytes still come over TCP may be a half-close: its
    // reader then goes on. Only when its socket is gone (sock_diag; looked up at
    // most every 100 ms) does a writer facing a full ring get EPIPE.
    uint64_t peer_inode_ = 0;
    std::atomic<bool> peer_gone_{false};
    std::atomic<int64_t> fin_checked_us_{0};
    bool fin_peer_gone();
    // Nobody will ever read this ring again: the peer closed (or died).
    bool reader_gone();
    std::atomic<bool> failure_reported_{false};  // transport_failed() reset the connection
    // shutdown() may come from another thread than the one blocked in a call.
    std::atomic<bool> shut_rd_{false}, shut_wr_{false};
    // A local act raised readiness (shutdown): wake this side's own sleepers.
    void wake_local();
    // SO_RCVTIMEO/SO_SNDTIMEO: the program's setsockopt, or a wait that read a
    // forked copy's from the kernel (shared_file_settings), beside other threads' calls.
    std::atomic<int64_t> recv_timeout_us_{-1}, send_timeout_us_{-1};
    int owner_pid_ = 0;
    uint64_t fork_gen_ = 0;  // fork_generation() when owner_pid_ was set
    uint64_t idle_seen_tx_ = ~0ull;  // tx_bytes_ at the idle pass before (give_back_idle_window)
    int idle_passes_ = 0;            // passes since, the reader not done reading
    // The process that runs the rendezvous, and its fork count then: a fork
    // while the rendezvous is under way may leave two processes writing the
    // socket, and the switch offset would count only one's bytes.
    // Atomic: another thread's call reads them (forked_since_rendezvous) while the
    // one stepping the rendezvous writes them (ThreadSanitizer under mt_fuzz).
    std::atomic<int> rv_pid_{0};
    std::atomic<uint64_t> rv_gen_{0};
    void claim_rendezvous();
    bool forked_during_rendezvous();
    bool forked_since_rendezvous() const;  // this process forked (or is a child) since claim_rendezvous()
    // Forked while this side's sends were still on TCP: a child may have written the
    // socket too, so nobody knows the switch offset (the connection stays on TCP).
    bool forked_before_tx_switch() const {
        return !tx_switched_.load(std::memory_order_relaxed) && side_tried_.load(std::memory_order_relaxed) &&
               forked_since_rendezvous();
    }
    uint64_t inode_ = 0;
    OwnerWritten<uint64_t> tx_bytes_{0}, rx_bytes_{0};  // through the rings (stats and edge counts look unlocked)
    std::unique_ptr<ShmRendezvous> rv_;
    uint64_t tcp_tx_ = 0;                 // bytes sent over TCP before the ring took over
    std::atomic<uint64_t> tcp_rx_{0};     // bytes received over TCP (side-channel path)
    // TCP bytes read while the peer's ring already held bytes behind them
    // (EPOLLET, Connection::arrivals): over TCP the room such a read makes
    // draws the writer's next bytes, a new arrival; here those bytes wait in
    // the ring already, so the read itself counts as that arrival.
    std::atomic<uint64_t> tcp_read_ahead_of_ring_{0};
    std::atomic<bool> tx_switched_{false};  // our sends went to the ring (set under the tx lock; send() peeks unlocked)
    std::atomic<uint64_t> rx_switch_at_{~0ull};  // the peer's switch offset, latched
    std::atomic<bool> side_tried_{false};  // a same-host rendezvous began (read unlocked by any sender)
    std::atomic<bool> upgraded_once_{false};  // upgrade() ran (in band)
    int rv_calls_ = 0;                    // client: calls made while waiting for an OFFER
    int64_t rv_since_us_ = 0;             // when the rendezvous began: connect() or accept() (steady clock)
    int64_t offer_wait_since_us_ = 0;     // client: when it began waiting for an OFFER (its name published)
    // Discovery deferred (discovery_may_wait): nothing is looked up before the
    // connection has lived RDMASOCK_SHM_AFTER_US and made kDiscoveryCalls calls;
    // then the client publishes its name and looks for an OFFER at most every
    // kLookEveryUs, and the server tries its OFFER at its calls, again after
    // 1, 2, 4... ms while the client has no name yet (kOfferTries in all).
    bool discovery_deferred_ = false;
    int discovery_calls_ = 0;
    // Server, discovery deferred: the process whose call came first in rv_pending
    // claimed the rendezvous then (claim_rendezvous), before its first byte: the
    // switch offset counts only its own bytes, so a fork after that (a child that
    // may write too) keeps the connection on TCP, as a fork after an OFFER does.
    std::atomic<bool> rv_claimed_{false};
    bool discovery_due();
    int64_t next_look_us_ = 0;
    int offer_tries_ = 0;
    std::atomic<uint64_t> send_full_{0};
    std::string fallback_reason_;
    std::string side_channel_why_;  // server: why the same-host rendezvous found no client (the in-band path's reason starts with it)
    SpinPolicy spin_;
    static inline std::atomic<uint64_t> local_epoch_{0};
    static inline std::atomic<LocalEnd> local_end_{nullptr};
    static inline std::atomic<PeerInProcess> peer_in_process_{nullptr};
    void serve_peer_in_process();
    // The peer's part of a hand-over, done by this process for an end it holds: its
    // sends taken back to TCP (tried, never waited for: a writer of ours that holds
    // the side serves it itself when the doorbell wakes it).
    void take_back_for_local_peer();
};


}  // namespace rdmasock
