"""Free TCP ports on IPv4 loopback, for the servers a suite starts (siwa, the emulator, proxies, sites)."""
import contextlib
import random
import socket

# Below the kernel's ephemeral range. A port the kernel hands out for bind(0) or for an outgoing connection
# (both happen all the time while the Swift tests run beside a suite) never comes from here. A port from
# that range once went to another test's server between this choice and the proxy's start. The proxy then
# could not bind, and the suite talked to the other server.
LOWEST = 10000


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count):
    """`count` distinct ports that were free a moment ago, below the ephemeral range: all bound at once,
    then released, so two calls in one suite never hand out the same port. Falls back to the kernel's
    choice (bind to port 0) when that range has too few free ports."""
    with contextlib.ExitStack() as stack:
        ports = []
        high = _ephemeral_low()
        candidates = random.sample(range(LOWEST, high), min(high - LOWEST, 50 * count)) if high > LOWEST else []
        for port in candidates:
            if len(ports) == count:
                break
            s = stack.enter_context(socket.socket())
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            ports.append(port)
        while len(ports) < count:
            s = stack.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports


def free_port():
    """One free loopback port (see free_ports)."""
    return free_ports(1)[0]
