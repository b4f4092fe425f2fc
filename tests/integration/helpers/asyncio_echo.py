"""Python asyncio echo server and client (the epoll event loop), for asyncio_echo.sh.

    asyncio_echo.py server PORT CLIENTS   echo CLIENTS connections, then exit
    asyncio_echo.py client PORT CLIENTS   CLIENTS concurrent connections, each: request/response
                                          rounds of random sizes, then a bulk stream written and
                                          read back at once; every byte compared

Both print "asyncio_echo <role>: OK ..." on success and exit 1 otherwise.
"""
import asyncio
import hashlib
import random
import sys

ROUNDS = 2000
BULK = 8 << 20


def pattern(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


async def serve(port: int, clients: int) -> None:
    done = asyncio.Event()
    finished = 0
    total = 0

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal finished, total
        while data := await reader.read(65536):
            total += len(data)
            writer.write(data)
            await writer.drain()
        writer.close()
        await writer.wait_closed()
        finished += 1
        if finished == clients:
            done.set()

    server = await asyncio.start_server(echo, "127.0.0.1", port)
    async with server:
        await done.wait()
    print(f"asyncio_echo server: OK {clients} connections, {total} bytes echoed")


async def one_client(port: int, idx: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    rng = random.Random(idx)
    moved = 0
    # Request/response: each side sleeps in epoll between messages.
    for r in range(ROUNDS):
        msg = pattern(idx * 100003 + r, rng.randint(1, 3000))
        writer.write(msg)
        await writer.drain()
        back = await reader.readexactly(len(msg))
        if back != msg:
            raise AssertionError(f"connection {idx} round {r}: echo differs")
        moved += len(msg)
        if rng.random() < 0.05:
            await asyncio.sleep(rng.random() / 1000)
    # Bulk: write and read at once (back-pressure on both rings).
    data = pattern(idx, BULK)

    async def send() -> None:
        view = memoryview(data)
        for off in range(0, len(data), 100000):
            writer.write(view[off:off + 100000])
            await writer.drain()
        writer.write_eof()

    sender = asyncio.create_task(send())
    digest = hashlib.sha256()
    got = 0
    while chunk := await reader.read(65536):
        if chunk != data[got:got + len(chunk)]:
            raise AssertionError(f"connection {idx}: bulk echo differs near byte {got}")
        digest.update(chunk)
        got += len(chunk)
    await sender
    if got != len(data) or digest.digest() != hashlib.sha256(data).digest():
        raise AssertionError(f"connection {idx}: bulk echo {got} of {len(data)} bytes")
    writer.close()
    await writer.wait_closed()
    return moved + got


async def run_clients(port: int, clients: int) -> None:
    totals = await asyncio.gather(*(one_client(port, i) for i in range(clients)))
    print(f"asyncio_echo client: OK {clients} connections, {sum(totals)} bytes verified, "
          f"{clients * ROUNDS} round trips")


def main() -> int:
    role, port, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        asyncio.run(serve(port, clients) if role == "server" else run_clients(port, clients))
    except Exception as e:  # report, don't dump a traceback into the test log only
        print(f"asyncio_echo {role}: FAILED: {e!r}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
