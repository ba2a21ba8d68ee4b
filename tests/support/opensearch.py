"""OpenSearch for tests: a real cluster when PERDURA_TEST_OPENSEARCH_URL is set, otherwise osmem-server
(the in-memory stand-in installed from PyPI), started on a free port; and a TCP proxy to cut it off."""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
import uuid
from collections.abc import Iterator

REAL_URL = os.environ.get("PERDURA_TEST_OPENSEARCH_URL", "")


@contextlib.contextmanager
def opensearch_url() -> Iterator[str]:
    """The URL of an OpenSearch to test against (osmem is stopped on exit)."""
    if REAL_URL:
        yield REAL_URL
        return
    from osmem_server import OsmemServer

    from tests.support.servers import free_port

    with OsmemServer.start(japanese=False, addr=f"127.0.0.1:{free_port()}") as server:
        yield server.url


def index_name() -> str:
    """An index (alias) name of its own, so runs of the suite can share a real cluster."""
    return f"perdura-test-{uuid.uuid4().hex[:10]}"


def drop_index(url: str, name: str) -> None:
    """Remove a test's indices and template (on a shared real cluster)."""
    from visibility.backends.opensearch.backend import client_from_url

    client = client_from_url(url)
    with contextlib.suppress(Exception):
        client.indices.delete(index=f"{name}-*")
    with contextlib.suppress(Exception):
        client.indices.delete_index_template(name=name)


class Proxy:
    """A TCP proxy on a free port to `target`: `down()` refuses and cuts connections, `up()` serves again."""

    def __init__(self, target_url: str) -> None:
        from urllib.parse import urlsplit

        from tests.support.servers import free_port

        self.target_url = target_url
        parts = urlsplit(target_url)
        self.scheme = parts.scheme
        self.target = (parts.hostname or "127.0.0.1", parts.port or 9200)
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (close alone does not)
            listener.close()
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    conn.close()
            self._conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self._listener is not listener:
                client.close()
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ, b)
        sel.register(b, selectors.EVENT_READ, a)
        try:
            while True:
                for key, _ in sel.select():
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]  # both registered file objects are sockets
                    if not data:
                        return
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            sel.close()
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()
