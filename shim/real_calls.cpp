#include "real_calls.hpp"

#include <dlfcn.h>

#include <mutex>

#include "base/log.hpp"

namespace rdmasock::real {

namespace {

Calls g_calls;
SocketOps g_ops;
std::once_flag g_once;

template <class F>
void resolve(F& slot, const char* name) {
    slot = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
    if (!slot) log_message(LogLevel::error, "cannot find libc's %s: %s", name, dlerror());
}

void resolve_all() {
    Calls& c = g_calls;
    resolve(c.socket, "socket");
    resolve(c.connect, "connect");
    resolve(c.listen, "listen");
    resolve(c.accept, "accept");
    resolve(c.accept4, "accept4");
    resolve(c.close, "close");
    resolve(c.shutdown, "shutdown");
    resolve(c.read, "read");
    resolve(c.readv, "readv");
    resolve(c.recv, "recv");
    resolve(c.recvfrom, "recvfrom");
    resolve(c.recvmsg, "recvmsg");
    resolve(c.write, "write");
    resolve(c.writev, "writev");
    resolve(c.send, "send");
    resolve(c.sendto, "sendto");
    resolve(c.sendmsg, "sendmsg");
    resolve(c.sendfile, "sendfile");
    resolve(c.sendmmsg, "sendmmsg");
    resolve(c.recvmmsg, "recvmmsg");
    resolve(c.close_range, "close_range");
    resolve(c.closefrom, "closefrom");
    resolve(c.fclose, "fclose");
    resolve(c.fcntl, "fcntl");
    resolve(c.ioctl, "ioctl");
    resolve(c.dup, "dup");
    resolve(c.dup2, "dup2");
    resolve(c.dup3, "dup3");
    resolve(c.setsockopt, "setsockopt");
    resolve(c.getsockopt, "getsockopt");
    resolve(c.getpeername, "getpeername");
    resolve(c.poll, "poll");
    resolve(c.ppoll, "ppoll");
    resolve(c.select, "select");
    resolve(c.pselect, "pselect");
    resolve(c.epoll_create, "epoll_create");
    resolve(c.epoll_create1, "epoll_create1");
    resolve(c.epoll_ctl, "epoll_ctl");
    resolve(c.epoll_wait, "epoll_wait");
    resolve(c.epoll_pwait, "epoll_pwait");
    resolve(c.epoll_pwait2, "epoll_pwait2");
    resolve(c.pthread_cancel, "pthread_cancel");
    g_ops = SocketOps{c.recv, c.send, c.recvmsg, c.sendmsg, c.poll};
}

}  // namespace

const Calls& calls() {
    if (__builtin_expect(g_calls.read == nullptr, 0)) std::call_once(g_once, resolve_all);
    return g_calls;
}

const SocketOps& socket_ops() {
    calls();
    return g_ops;
}

}  // namespace rdmasock::real
