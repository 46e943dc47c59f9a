"""A TCP forwarder on another loopback address: a client dials ``127.0.0.2:<port>`` and talks to a service on
``127.0.0.1``, so a TLS client checks the service's certificate against a name the certificate does not hold."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


@contextmanager
def forwarded(target_host: str, target_port: int, listen_host: str = "127.0.0.2") -> Iterator[str]:
    """``host:port`` on ``listen_host`` that forwards every connection to ``target_host:target_port``."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    address: list[str] = []

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))

    async def serve() -> asyncio.Server:
        server = await asyncio.start_server(handle, listen_host, 0)
        address.append(f"{listen_host}:{server.sockets[0].getsockname()[1]}")
        ready.set()
        return server

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(serve())
        loop.run_forever()
        server.close()
        # the connections still open (a client's pooled ones) end here, while the loop runs: left to the garbage
        # collector, their pipes would close their writers on a closed loop (an "exception ignored" warning)
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        with contextlib.suppress(Exception):
            loop.run_until_complete(server.wait_closed())
        loop.close()

    thread = threading.Thread(target=run, name="tcp-forward", daemon=True)
    thread.start()
    if not ready.wait(10):
        raise AssertionError(f"the forwarder on {listen_host} did not start")
    try:
        yield address[0]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
