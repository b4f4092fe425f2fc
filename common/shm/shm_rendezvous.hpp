// Same-host negotiation over the side channel (side_channel.hpp): who finds
// whom, who proves what, and how the rings change hands. Never blocks and never
// writes a byte into the TCP stream; each step is a few nonblocking syscalls
// made from inside an application call on the connection.
//
//   client (connect)      binds the side-channel name of its TCP socket's inode
//   server (first I/O)    finds the client socket's inode with sock_diag, connects,
//                         sends OFFER (its own fd number; credentials by the kernel)
//                         (only after the kernel's credentials of the listener say
//                         it belongs to the client socket's owner)
//   client (next call)    accepts; a connection from another uid than the server
//                         socket's owner is dropped unread and listening goes on;
//                         reads OFFER, checks the sender holds the server end of this
//                         TCP connection, closes its listener and holds the OFFER
//   client (a call once   (RDMASOCK_SHM_AFTER_US after connect: a connection that
//     the connection      ends sooner never pays for rings) creates the sealed
//     has lived)          rings and the doorbell
//                         pair it sleeps on (shm_doorbell.hpp), lets the side channel
//                         take fds, sends ACCEPT with the memfd and its ring end
//                         (SCM_RIGHTS)
//   server (next call)    checks the sender holds the client end, maps the rings,
//                         makes its own doorbell pair, sends CONFIRM with its ring
//                         end: from its next send on, its bytes go to the
//                         ring (the switch offset is stored in shared memory first,
//                         shm_channel.hpp)
//   client                reads CONFIRM (or sees the server's switch offset): its
//                         sends switch too
// Anything unexpected, a refusal or a closed side channel leaves both on TCP.
// Every look-up (a name bound or connected to, a sock_diag query) first checks
// that the calling thread is in the TCP socket's network namespace
// (sys/netns.hpp): every name looked up here lives in the thread's. A
// connection where they differ stays on TCP for good (stay_plain()).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "shm/peer_check.hpp"
#include "sys/netns.hpp"
#include "ring/transport.hpp"

namespace rdmasock {

class ShmRendezvous {
public:
    struct Options {
        uint64_t ring_bytes = 1 << 20;
        uint64_t ring_memory = UINT64_MAX;  // RDMASOCK_RING_MEMORY (memory_budget.hpp)
        bool same_user_only = false;
        std::string fault;  // RDMASOCK_FAULT (test-only)
        netns::Id socket_ns;  // the TCP socket's namespace, if the shim saw where it was made
    };
    enum class Result { waiting, done, failed };

    explicit ShmRendezvous(Options o) : opt_(std::move(o)) { socket_ns_.learn(opt_.socket_ns); }
    ~ShmRendezvous();
    ShmRendezvous(const ShmRendezvous&) = delete;
    ShmRendezvous& operator=(const ShmRendezvous&) = delete;

    // Client: publish the side-channel name (before connect(), or once the
    // connection has lived: Connection::discovery_deferred_). False: no name.
    bool client_listen(int tcp_fd);
    bool listening() const { return listen_fd_ >= 0; }
    // Client: look for an OFFER and answer it. done: `transport` holds mapped
    // rings and the server has them too (it may still refuse: see client_refused).
    // `may_accept` false: a verified OFFER is held unanswered (no rings yet, no
    // syscall per call) until a later step may; the listener is gone by then.
    // `stream_open` is asked right before the ACCEPT commits the switch, as
    // server_step's `may_confirm`: false ends the rendezvous.
    Result client_step(int tcp_fd, std::unique_ptr<Transport>& transport, bool may_accept,
                       const std::function<bool()>& stream_open);
    // Client: a verified OFFER waits for its ACCEPT (the server is shimmed and
    // will not offer again: not a reason to give up listening).
    bool offer_held() const { return offer_held_; }
    // Client after ACCEPT: done once the server confirmed (our sends may switch)
    // and handed `transport` its ring end, failed when it closed the side channel
    // without confirming (it refused us). The side channel is `transport`'s now.
    Result client_confirmed(Transport& transport);
    // Server, first I/O: find the client's side channel and send OFFER.
    // failed: the client has none (it is not shimmed, or asked in band), or
    // none yet (client_absent(): a client that publishes its name only once
    // its connection has lived may still). A later try asks sock_diag no more.
    Result server_offer(int tcp_fd);
    bool client_absent() const { return client_absent_; }
    // Server: look for the ACCEPT; done: `transport` is ready to switch.
    // `may_confirm` is asked right before CONFIRM commits the switch: false
    // ends the rendezvous (the stream was shut down or ended meanwhile).
    Result server_step(int tcp_fd, std::unique_ptr<Transport>& transport, const std::function<bool()>& may_confirm);
    // Releases the side channel (after the switch, or on giving up).
    void close();
    const std::string& why() const { return why_; }
    // After a failure: no other negotiation either (the thread is in another
    // network namespace than the socket: sys/netns.hpp).
    bool stay_plain() const { return stay_plain_; }
    // The peer's TCP socket, as sock_diag named it during the rendezvous.
    const peer_check::SocketId& peer_socket() const { return peer_socket_; }

private:
    bool peer_pair(int tcp_fd, sockaddr_storage& local, sockaddr_storage& remote, std::string* err = nullptr);
    bool peer_gone(int tcp_fd);
    Result fail(std::string why);
    // Client: the next pending connection whose owner may be the server; strangers
    // are dropped unread. false: none yet (or `fail` set why_).
    bool accept_candidate(int tcp_fd, bool& failed);
    // Client: the two halves of client_step.
    Result take_offer(int tcp_fd);
    Result answer_offer(int tcp_fd, std::unique_ptr<Transport>& transport, const std::function<bool()>& stream_open);
    // Client: drops the side channel it took, keeps listening.
    void drop_candidate(const char* why);
    bool namespace_ok(int tcp_fd);
    bool make_doorbell();

    Options opt_;
    int listen_fd_ = -1;  // client: the side-channel name
    int chan_fd_ = -1;    // both: the side channel itself
    bool listen_refuses_fds_ = false;  // SO_PASSRIGHTS off on the listener (and so its connections)
    bool chan_may_hold_fds_ = true;    // fds may have been queued to chan_fd_ (side_channel::close_channel)
    int sleep_end_ = -1, ring_end_ = -1;  // our doorbell pair until a transport takes it
    bool stay_plain_ = false;
    bool offer_held_ = false;     // client: OFFER verified, ACCEPT not sent yet
    bool client_absent_ = false;  // server: the last server_offer found no side-channel name
    uint64_t offered_ring_ = 0;   // its ring size
    netns::SocketNamespace socket_ns_;  // the TCP socket's, asked once
    peer_check::SocketId peer_socket_;
    std::string why_;
};

}  // namespace rdmasock
