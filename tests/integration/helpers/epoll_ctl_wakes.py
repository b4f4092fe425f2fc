"""epoll_ctl by one thread while another sleeps in epoll_wait on the same set (the thread-pool
server's pattern: one thread waits, workers re-arm EPOLLONESHOT members). The kernel wakes the
sleeper for a member added or changed while ready, and the member's next event wakes it after.
Each case prints what the sleeper got and whether it woke before its own 20 s timeout (a liveness
bound: a sleeper the shim never told slept to it). Run plain and shimmed: the same transcript.
Under the shim the sockets are on shared memory first (settled_pair)."""
import select, socket, sys, threading, time

from settled_pair import settled_pair

EV = ((select.EPOLLIN, "IN"), (select.EPOLLOUT, "OUT"), (select.EPOLLRDHUP, "RDHUP"), (select.EPOLLHUP, "HUP"),
      (select.EPOLLERR, "ERR"), (select.EPOLLPRI, "PRI"))
BOUND = 20


def bits(m):
    return "|".join(n for b, n in EV if m & b) or "0"


def sleeper(ep, names, res):
    t0 = time.monotonic()
    got = ep.poll(BOUND)
    res.append(([(names.get(fd, fd), bits(m)) for fd, m in got], "woke" if time.monotonic() - t0 < BOUND else "slept to its timeout"))


def case(title, ep, names, act):
    """`act` runs in this thread once the sleeper is (most likely) asleep; then the sleeper's answer."""
    res = []
    t = threading.Thread(target=sleeper, args=(ep, names, res))
    t.start()
    time.sleep(0.2)
    act()
    t.join()
    print(f"{title}: {res[0]}", flush=True)


def main():
    c, s = settled_pair()
    names = {s.fileno(): "s"}
    ep = select.epoll()  # no member yet: the sleeper waits in the kernel alone
    case("ADD to an empty set, then data", ep, names,
         lambda: (ep.register(s.fileno(), select.EPOLLIN), time.sleep(0.1), c.sendall(b"a")))
    s.recv(10)
    case("MOD re-arms a spent ONESHOT, then data", ep, names,
         lambda: (ep.modify(s.fileno(), select.EPOLLIN | select.EPOLLONESHOT), time.sleep(0.1), c.sendall(b"b")))
    s.recv(10)
    # (The ONESHOT member was reported once: spent.)
    case("MOD re-arms it with data already queued", ep, names,
         lambda: (c.sendall(b"c"), time.sleep(0.1), ep.modify(s.fileno(), select.EPOLLIN | select.EPOLLONESHOT)))
    s.recv(10)
    case("MOD from PRI to OUT", ep, names,
         lambda: (ep.modify(s.fileno(), select.EPOLLPRI), time.sleep(0.1), ep.modify(s.fileno(), select.EPOLLOUT)))
    ep.unregister(s.fileno())
    case("DEL then ADD, then data", ep, names,
         lambda: (ep.register(s.fileno(), select.EPOLLIN), time.sleep(0.1), c.sendall(b"d")))
    s.recv(10)
    ep.close()
    c.close()
    time.sleep(0.1)
    ep = select.epoll()
    case("ADD of a socket whose peer has closed, IN|RDHUP", ep, names,
         lambda: ep.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP))
    ep.close()
    s.close()
    pool()


def pool():
    """One thread waits (epoll_wait -1), two workers answer a ready connection and re-arm it
    (EPOLL_CTL_MOD, EPOLLONESHOT); the client makes 40 round trips a few ms apart."""
    c, s = settled_pair()
    ep = select.epoll()
    work, stop = [], threading.Event()
    cv = threading.Condition()

    def worker():
        while True:
            with cv:
                while not work and not stop.is_set():
                    cv.wait()
                if stop.is_set():
                    return
                work.pop()
            d = s.recv(4096)
            s.sendall(b"re:" + d)
            ep.modify(s.fileno(), select.EPOLLIN | select.EPOLLONESHOT)

    def waiter():
        while not stop.is_set():
            for _fd, _ev in ep.poll(1):
                with cv:
                    work.append(1)
                    cv.notify()

    ts = [threading.Thread(target=worker) for _ in range(2)] + [threading.Thread(target=waiter)]
    for t in ts:
        t.start()
    ep.register(s.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
    c.settimeout(BOUND)
    ok, how = 0, "all answered"
    for i in range(40):
        c.sendall(b"req%02d" % i)
        try:
            ok += c.recv(100) == b"re:req%02d" % i
        except OSError as e:
            how = f"round {i}: {type(e).__name__}"
            break
        time.sleep(0.003)
    stop.set()
    with cv:
        cv.notify_all()
    for t in ts:
        t.join()
    print(f"oneshot pool: {ok} of 40 round trips, {how}", flush=True)
    c.close(), s.close(), ep.close()


main()
