"""A server's CPU per request at a steady pace (scripts/request-floor, scripts/layer-ab): kept-alive
connections that together send a request `rate` times a second, and the server's own CPU time."""
import asyncio
import os
import time

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of the whole process (every thread), in seconds, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def paced(port, request, connections, rate, seconds, status=b"HTTP/1.1 200"):
    """Sends `request` (bytes) on `connections` kept-alive connections to 127.0.0.1:`port`, together
    `rate` a second, for `seconds`; returns (answered, failures). An answer that does not start with
    `status` or has no Content-Length is a failure and stops its connection: where the next answer
    starts would be unknown."""
    interval = connections / rate
    answered = failures = 0

    async def connection(index, stop):
        nonlocal answered, failures
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(interval * index / connections)  # spread the connections over the interval
        due = time.monotonic()
        while time.monotonic() < stop:
            writer.write(request)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = None
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length is None or not head.startswith(status):
                failures += 1
                break
            await reader.readexactly(length)
            answered += 1
            due += interval
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        writer.close()

    stop = time.monotonic() + seconds
    await asyncio.gather(*(connection(i, stop) for i in range(connections)))
    return answered, failures
