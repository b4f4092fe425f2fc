// Scratch vectors of the wait calls (common/base/scratch.hpp): kept per thread
// from call to call, and a call nested in one that holds it (a signal
// handler's poll) gets its own.
#include <catch2/catch.hpp>

#include <thread>

#include "base/scratch.hpp"

using rdmasock::Scratch;

namespace {
struct UseA;
struct UseB;
}  // namespace

TEST_CASE("a scratch vector is kept for the thread's next call, empty") {
    const int* first = nullptr;
    {
        Scratch<int, UseA> s;
        s->assign(100, 7);
        first = s->data();
    }
    Scratch<int, UseA> again;
    CHECK(again->empty());
    CHECK(again->capacity() >= 100);  // grown once: no allocation for the same size
    again->resize(100);
    CHECK(again->data() == first);
}

TEST_CASE("a scratch vector in use is not handed to a nested call") {
    Scratch<int, UseA> outer;
    outer->assign(3, 1);
    {
        Scratch<int, UseA> nested;
        CHECK(nested->empty());
        nested->push_back(9);
        CHECK(&*nested != &*outer);
    }
    CHECK(outer->size() == 3);  // the nested call left ours alone
    Scratch<int, UseB> other;  // another use has its own
    CHECK(other->empty());
}

TEST_CASE("each thread has its own scratch vector") {
    Scratch<int, UseA> mine;
    mine->push_back(1);
    std::vector<int>* theirs = nullptr;
    std::thread t([&] {
        Scratch<int, UseA> s;
        CHECK(s->empty());
        theirs = &*s;
    });
    t.join();
    CHECK(theirs != &*mine);
}

namespace {
struct UseRoom;
}  // namespace

TEST_CASE("room() keeps a buffer's elements from call to call: it is not zeroed again") {
    {
        Scratch<int, UseRoom> s;
        std::vector<int>& v = s.room(1000);
        REQUIRE(v.size() >= 1000);
        v[999] = 42;  // as the kernel fills epoll events
    }
    Scratch<int, UseRoom> again;
    std::vector<int>& v = again.room(500);  // a smaller call: nothing resized, nothing zeroed
    CHECK(v.size() >= 1000);
    CHECK(v[999] == 42);
    {
        Scratch<int, UseRoom> nested;  // in use: a nested call gets a buffer of its own
        CHECK(nested.room(10).size() == 10);
        CHECK(&nested.room(10) != &v);
    }
}
