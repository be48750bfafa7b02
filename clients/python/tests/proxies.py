"""TCP proxies in front of the test daphne, to fail the network on purpose."""

from __future__ import annotations

import socket
import threading


class _Proxy:
    """A TCP proxy on a free loopback port in front of ``upstream_port``: each accepted
    connection is counted and handed to ``_connected``, which says what becomes of it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.connections = 0
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self._connected(conn, self.connections)

    def _connected(self, conn: socket.socket, number: int) -> None:
        raise NotImplementedError

    def _upstream(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.upstream_port))


class DroppingProxy(_Proxy):
    """A TCP proxy in front of daphne that hands the first ``drop`` connections' requests to the
    server, waits until the server starts answering (the tag has committed), then drops the
    connection without passing the answer on: a network failure after the work was done."""

    def __init__(self, upstream_port: int, drop: int = 1) -> None:
        self.drop = drop
        super().__init__(upstream_port)

    def _connected(self, conn: socket.socket, number: int) -> None:
        threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        up = self._upstream()
        forward = threading.Thread(target=_pipe, args=(conn, up), daemon=True)
        forward.start()
        if number <= self.drop:
            try:
                up.recv(1)  # the server has answered: the request was handled
            finally:
                _hang_up(conn, up)
            return
        _pipe(up, conn)


class CuttingProxy(_Proxy):
    """A TCP proxy that passes everything through until ``cut()``, which drops every connection
    open at that moment (no close frame, as a network failure would); new ones pass again."""

    def __init__(self, upstream_port: int) -> None:
        self.live: list[socket.socket] = []
        self.lock = threading.Lock()
        super().__init__(upstream_port)

    def _connected(self, conn: socket.socket, number: int) -> None:
        up = self._upstream()
        with self.lock:
            self.live += [conn, up]
        threading.Thread(target=_pipe, args=(conn, up), daemon=True).start()
        threading.Thread(target=_pipe, args=(up, conn), daemon=True).start()

    def cut(self) -> None:
        with self.lock:
            live, self.live = self.live, []
        _hang_up(*live)

    def close(self) -> None:
        super().close()
        self.cut()


class BudgetProxy(_Proxy):
    """A TCP proxy whose first connection is dropped once it has passed ``budget`` bytes towards
    the server (mid-body: a network failure in the middle of an upload); the others pass."""

    def __init__(self, upstream_port: int, budget: int) -> None:
        self.budget = budget
        self.cuts = 0
        super().__init__(upstream_port)

    def _connected(self, conn: socket.socket, number: int) -> None:
        up = self._upstream()
        threading.Thread(target=self._forward, args=(conn, up, number == 1), daemon=True).start()
        threading.Thread(target=_pipe, args=(up, conn), daemon=True).start()

    def _forward(self, conn: socket.socket, up: socket.socket, first: bool) -> None:
        if not first:
            _pipe(conn, up)
            return
        passed = 0
        try:
            while chunk := conn.recv(65536):
                up.sendall(chunk)
                passed += len(chunk)
                if passed >= self.budget:
                    self.cuts += 1
                    break
        except OSError:
            pass
        _hang_up(conn, up)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _hang_up(*socks: socket.socket) -> None:
    """Drop the connections as a network failure would: no goodbye, both ways shut."""
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
