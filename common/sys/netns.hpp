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

// One socket's namespace. A socket never changes namespace, so the kernel is
// asked once (SIOCGSKNS makes a file each time: the costly half of a check);
// the thread's side is read at every check, since any thread may move.
class SocketNamespace {
public:
    // True when the calling thread is in socket `fd`'s network namespace; else
    // false with the reason. SIOCGSKNS needs CAP_NET_ADMIN in the socket's
    // namespace: without it, the thread's namespace must still be the one the
    // process had when the library loaded. errno kept.
    bool holds_thread(int fd, std::string& why);

private:
    enum class Known { not_asked, yes, refused } known_ = Known::not_asked;
    ino_t ino_ = 0;
    dev_t dev_ = 0;
};

}  // namespace rdmasock::netns
