// The same-host registry: a shimmed listen() binds an abstract Unix socket named
// after its TCP port; a client offers a HELLO only when that name is taken.
// Abstract names vanish with their last fd (no stale entries after a crash) and
// are per network namespace, exactly the scope of "this host" for loopback.
#pragma once

#include <sys/socket.h>

#include <cstdint>

namespace rdmasock::registry {

// Binds the entry for `port`; returns its fd (close it to unregister) or -1.
int publish(uint16_t port);
// True when a shimmed listener on this host has published `port`.
bool is_published(uint16_t port);
// True when `peer` is this host: a loopback address, or one we can bind to.
bool same_host(const sockaddr* peer, socklen_t len);
// The port of an AF_INET/AF_INET6 address (0 for anything else).
uint16_t port_of(const sockaddr* addr, socklen_t len);

}  // namespace rdmasock::registry
