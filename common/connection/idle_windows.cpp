#include "connection/idle_windows.hpp"

#include <pthread.h>

#include <algorithm>
#include <vector>

#include "connection/connection.hpp"
#include "wait/idle_pass.hpp"
#include "wait/side_lock.hpp"

namespace rdmasock::idle_windows {

namespace {

// A signal handler that sends while its thread holds this would wait for
// itself: handlers are held back meanwhile (HandlerSafeMutex).
HandlerSafeMutex g_mu;
std::vector<Connection*>* g_list;  // never freed: a process keeps few

// Around fork: the list is the parent's, and the child owns none of their
// transports (a forked copy never touches its parent's rings).
void prepare() { g_mu.lock(); }
void parent() { g_mu.unlock(); }
void child() {
    if (g_list) g_list->clear();
    idle_pass::note_pending(false);
    g_mu.unlock();
}

void pass_locked() {
    if (!g_list) return;
    std::erase_if(*g_list, [](Connection* c) {
        const bool done = c->give_back_idle_window() == Connection::Idle::done;
        if (done) c->idle_watched_ = false;
        return done;
    });
    idle_pass::note_pending(!g_list->empty());
}

void pass() {
    // Another thread registering, or a pass under way: the next one.
    if (!g_mu.try_lock()) return;
    pass_locked();
    g_mu.unlock();
}

}  // namespace

void watch(Connection* c) {
    static const bool hooked = (pthread_atfork(prepare, parent, child), idle_pass::set(pass), true);
    (void)hooked;
    std::lock_guard<HandlerSafeMutex> lk(g_mu);
    if (c->idle_watched_) return;
    if (!g_list) g_list = new std::vector<Connection*>;
    g_list->push_back(c);
    c->idle_watched_ = true;
    idle_pass::note_pending(true);
}

void forget(Connection* c) {
    if (!c->idle_watched_) return;  // (set and cleared under the lock, by this connection's own calls)
    std::lock_guard<HandlerSafeMutex> lk(g_mu);
    if (!c->idle_watched_ || !g_list) return;
    g_list->erase(std::remove(g_list->begin(), g_list->end(), c), g_list->end());
    c->idle_watched_ = false;
    idle_pass::note_pending(!g_list->empty());
}

int watched() {
    std::lock_guard<HandlerSafeMutex> lk(g_mu);
    return g_list ? static_cast<int>(g_list->size()) : 0;
}

void pass_now() {
    std::lock_guard<HandlerSafeMutex> lk(g_mu);
    pass_locked();
}

}  // namespace rdmasock::idle_windows
