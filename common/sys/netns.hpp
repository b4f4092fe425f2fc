// The network namespace of a TCP socket against the calling thread's.
//
// Everything the same-host rendezvous looks up is named in the calling
// thread's network namespace: sock_diag (peer_check.cpp) answers for the
// thread's namespace, abstract Unix names (side_channel.cpp) live in it. A
// thread that moved (unshare(CLONE_NEWNET), setns) after its socket was made
// would find a look-alike connection there, another user's, and hand it our
// stream. So a rendezvous looks a name up only where the two namespaces are one.
#pragma once

#include <sys/types.h>

#include <string>

namespace rdmasock::netns {

// A network namespace, as stat() of its nsfs file names it.
struct Id {
    ino_t ino = 0;
    dev_t dev = 0;
    bool known = false;
};

// The calling thread's namespace when this thread has read it since it last
// moved (one gettid, no other system call); unknown otherwise. A socket the
// thread makes now is in it: socket(2) uses the caller's namespace.
Id thread_id_if_read();
// Socket fd's namespace, asked of the kernel (SIOCGSKNS: makes and closes a
// file; needs CAP_NET_ADMIN in that namespace, else unknown). errno kept.
Id socket_id(int fd);

// One socket's namespace. A socket never changes namespace, so it is learned
// once (where the shim saw it made, else SIOCGSKNS); the thread's side is kept
// per thread until that thread moves (thread_moved).
class SocketNamespace {
public:
    // True when the calling thread is in socket `fd`'s network namespace; else
    // false with the reason. SIOCGSKNS needs CAP_NET_ADMIN in the socket's
    // namespace: without it, the thread's namespace must still be the one the
    // process had when the library loaded. errno kept.
    bool holds_thread(int fd, std::string& why);
    // Where the socket was made, when the shim saw it made (socket() in a thread
    // of known namespace, accept() on a listener of known namespace): the
    // kernel need not be asked. Before the first holds_thread.
    void learn(Id where);

private:
    enum class Known { not_asked, yes, refused } known_ = Known::not_asked;
    ino_t ino_ = 0;
    dev_t dev_ = 0;
};

// The calling thread may be in another network namespace now (it called setns
// or unshare): the next check reads it again. Async-signal-safe.
void thread_moved();

}  // namespace rdmasock::netns
