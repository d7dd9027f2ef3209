"""Event streams woken by commits in another process (issue 29)."""

from __future__ import annotations

import socket

READ_S = 30.0


def test_served_connections_send_small_writes_at_once() -> None:
    """``serve``'s connections have Nagle's algorithm off: an SSE event written after another
    goes out at once, not after the client's delayed ACK (up to 40 ms)."""
    import asyncio

    from agentrunner.cli.serve import _listen

    async def accept() -> int:
        sock = _listen("127.0.0.1", 0)
        accepted: asyncio.Future[asyncio.BaseTransport] = asyncio.Future()

        class Protocol(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                accepted.set_result(transport)

        server = await asyncio.get_running_loop().create_server(Protocol, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            transport = await asyncio.wait_for(accepted, READ_S)
            served = transport.get_extra_info("socket")
            nodelay = int(served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()
            writer.close()
            return nodelay

    assert asyncio.run(accept()) == 1
