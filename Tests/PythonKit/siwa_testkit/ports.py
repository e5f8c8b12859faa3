"""Free TCP ports on IPv4 loopback, for the servers a suite starts (siwa, the emulator, proxies, sites)."""
import contextlib
import socket


def free_ports(count):
    """`count` distinct ports that were free a moment ago: all bound at once, then released, so two
    calls in one suite never hand out the same port (the kernel could reuse a just-released one)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def free_port():
    """One free loopback port (see free_ports)."""
    return free_ports(1)[0]
