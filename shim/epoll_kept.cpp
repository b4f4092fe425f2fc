#include "epoll_kept.hpp"

#include <atomic>
#include <mutex>
#include <vector>

#include "shm/leftover.hpp"

namespace rdmasock::shim {

namespace {

struct KeptInterest {
    int epfd;
    int fd;
    epoll_event ev;  // the program's events and data word
};

std::mutex g_mu;
std::vector<KeptInterest>* g_list;  // never freed: an exec'd handler keeps one or two
std::atomic<bool> g_any{false};

void erase_locked(int epfd, int fd) {
    if (!g_list) return;
    std::erase_if(*g_list, [&](const KeptInterest& k) { return k.epfd == epfd && k.fd == fd; });
    g_any.store(!g_list->empty(), std::memory_order_release);
}

}  // namespace

bool epoll_kept_any() { return g_any.load(std::memory_order_relaxed); }

void epoll_kept_ctl(int epfd, int op, int fd, const epoll_event* ev) {
    if (op == EPOLL_CTL_DEL) {
        if (!epoll_kept_any()) return;
        std::lock_guard<std::mutex> lk(g_mu);
        erase_locked(epfd, fd);
        return;
    }
    if (!ev || !leftover::any_first()) return;
    const bool owes = leftover::first_pending(leftover::inode_of(fd));
    std::lock_guard<std::mutex> lk(g_mu);
    erase_locked(epfd, fd);
    if (!owes) return;
    if (!g_list) g_list = new std::vector<KeptInterest>;
    g_list->push_back({epfd, fd, *ev});
    g_any.store(true, std::memory_order_release);
}

int epoll_kept_ready(int epfd, epoll_event* out, int max) {
    std::vector<KeptInterest> mine;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (!g_list) return 0;
        for (auto& k : *g_list)
            if (k.epfd == epfd) mine.push_back(k);
    }
    int n = 0;
    for (auto& k : mine) {
        if (!leftover::first_pending(leftover::inode_of(k.fd))) {
            std::lock_guard<std::mutex> lk(g_mu);
            erase_locked(epfd, k.fd);
            continue;
        }
        const uint32_t in = k.ev.events & (EPOLLIN | EPOLLRDNORM);
        if (!in || n == max) continue;
        out[n].events = in;
        out[n].data = k.ev.data;
        ++n;
        if (k.ev.events & EPOLLONESHOT) {  // reported once, as the kernel disarms it
            std::lock_guard<std::mutex> lk(g_mu);
            erase_locked(epfd, k.fd);
        }
    }
    return n;
}

void epoll_kept_forget(int fd) {
    if (!epoll_kept_any()) return;
    std::lock_guard<std::mutex> lk(g_mu);
    std::erase_if(*g_list, [&](const KeptInterest& k) { return k.fd == fd || k.epfd == fd; });
    g_any.store(!g_list->empty(), std::memory_order_release);
}

}  // namespace rdmasock::shim
