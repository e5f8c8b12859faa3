"""A server's CPU per request at a steady pace (scripts/request-floor, scripts/layer-ab, scripts/gateway-bench):
kept-alive connections that together send a request `rate` times a second, and the server's own CPU time."""
import asyncio
import os
import time

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of the whole process (every thread), in seconds, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def thread_cpu_seconds(pid):
    """The on-CPU time of every live thread of the process, in seconds, from /proc/PID/task/*/schedstat:
    to the nanosecond, where cpu_seconds counts 10 ms ticks (too coarse for an nginx process that spends a
    few tens of ms in a run), but without the threads that have ended (use it for nginx's one-thread
    processes, cpu_seconds for servers whose threads may come and go)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/schedstat") as f:
            total += int(f.read().split()[0])
    return total / 1e9


async def paced(port, request, connections, rate, seconds, status=b"HTTP/1.1 200", latencies=None):
    """Sends `request` (bytes) on `connections` kept-alive connections to 127.0.0.1:`port`, together
    `rate` a second, for `seconds`; returns (answered, failures). An answer that does not start with
    `status` or has no Content-Length is a failure and stops its connection: where the next answer
    starts would be unknown. `latencies`, a list, gets each answered request's seconds from its write
    to the end of its answer."""
    interval = connections / rate
    answered = failures = 0

    async def connection(index, stop):
        nonlocal answered, failures
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(interval * index / connections)  # spread the connections over the interval
        due = time.monotonic()
        while time.monotonic() < stop:
            sent = time.monotonic()
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
            if latencies is not None:
                latencies.append(time.monotonic() - sent)
            due += interval
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        writer.close()

    stop = time.monotonic() + seconds
    await asyncio.gather(*(connection(i, stop) for i in range(connections)))
    return answered, failures
