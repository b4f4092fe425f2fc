// The network namespace of a TCP socket against the calling thread's.
//
// Everything the same-host rendezvous looks up is named in the calling
// thread's network namespace: sock_diag (peer_check.cpp) answers for the
// thread's namespace, abstract Unix names (side_channel.cpp) live in it. A
// thread that moved (unshare(CLONE_NEWNET), setns) after its socket was made
// would find a look-alike connection there, another user's, and hand it our
// stream. So a rendezvous starts only where the two namespaces are one.
#pragma once

#include <string>

namespace rdmasock::netns {

// True when the calling thread is in socket `fd`'s network namespace; else
// false with the reason. The socket's namespace comes from SIOCGSKNS, which
// needs CAP_NET_ADMIN there: without it, the thread's namespace must still be
// the one the process had when the library loaded. errno kept.
bool thread_in_socket_netns(int fd, std::string& why);

}  // namespace rdmasock::netns
