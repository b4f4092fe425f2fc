"""An edge-triggered waiter in one thread and a nonblocking reader in another (tokio's driver and
its worker): the waiter's looks at the socket and the reader's receives run at once. Every byte
the peer sends must reach the reader through edges alone: after each edge it reads until EAGAIN,
then waits for the next edge. A receive that said EAGAIN beside unread bytes whose edge was
already spent left such a reader asleep beside them for good (2026-12-03). Each burst has a 20 s
liveness bound; the transcript says where the reader stopped, or that every burst arrived.
Run plain and shimmed: the same transcript. Under the shim the pair is on shared memory first."""
import random
import select
import sys
import threading

from settled_pair import settled_pair

BOUND = 20


def main():
    bursts = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    c, s = settled_pair()
    c.setblocking(False)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET)
    edge, drained, stop = threading.Event(), threading.Event(), threading.Event()
    got = [0]

    def waiter():  # looks again every millisecond, as a busy event loop does
        while not stop.is_set():
            if ep.poll(0.001):
                edge.set()

    def reader():
        while not stop.is_set():
            if not edge.wait(BOUND):
                return
            edge.clear()
            while True:
                try:
                    b = c.recv(65536)
                except BlockingIOError:
                    break
                if not b:
                    return
                got[0] += len(b)
            drained.set()

    threads = [threading.Thread(target=waiter), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    rng = random.Random(7)
    sent = 0
    for i in range(bursts):
        drained.clear()
        for _ in range(rng.choice((1, 3, 50))):  # many small records make a longer look
            n = rng.choice((1, 7, 100, 1500, 4096, 20000))
            s.sendall(b"x" * n)
            sent += n
        while got[0] < sent:
            if not drained.wait(BOUND):
                print(f"burst {i}: the reader stopped at {got[0]} of {sent} bytes", flush=True)
                stop.set()
                s.close()
                return
            drained.clear()
    stop.set()
    s.close()
    edge.set()
    for t in threads:
        t.join()
    print(f"{bursts} bursts, {sent} bytes, every one reached the reader through edges", flush=True)


main()
