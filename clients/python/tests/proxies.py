"""TCP proxies in front of the test daphne, to fail the network on purpose."""

from __future__ import annotations

import socket
import threading


class DroppingProxy:
    """A TCP proxy in front of daphne that hands the first ``drop`` connections' requests to the
    server, waits until the server starts answering (the tag has committed), then drops the
    connection without passing the answer on: a network failure after the work was done."""

    def __init__(self, upstream_port: int, drop: int = 1) -> None:
        self.upstream_port = upstream_port
        self.drop = drop
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
            threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        up = socket.create_connection(("127.0.0.1", self.upstream_port))
        forward = threading.Thread(target=_pipe, args=(conn, up), daemon=True)
        forward.start()
        if number <= self.drop:
            try:
                up.recv(1)  # the server has answered: the request was handled
            finally:
                for sock in (conn, up):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    sock.close()
            return
        _pipe(up, conn)


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


class CuttingProxy:
    """A TCP proxy that passes everything through until ``cut()``, which drops every connection
    open at that moment (no close frame, as a network failure would); new ones pass again."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.connections = 0
        self.live: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self.lock:
                self.connections += 1
                self.live += [conn, up]
            threading.Thread(target=_pipe, args=(conn, up), daemon=True).start()
            threading.Thread(target=_pipe, args=(up, conn), daemon=True).start()

    def cut(self) -> None:
        with self.lock:
            live, self.live = self.live, []
        for sock in live:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.cut()


class BudgetProxy:
    """A TCP proxy whose first connection is dropped once it has passed ``budget`` bytes towards
    the server (mid-body: a network failure in the middle of an upload); the others pass."""

    def __init__(self, upstream_port: int, budget: int) -> None:
        self.upstream_port = upstream_port
        self.budget = budget
        self.cuts = 0
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
            up = socket.create_connection(("127.0.0.1", self.upstream_port))
            first = self.connections == 1
            threading.Thread(target=self._forward, args=(conn, up, first), daemon=True).start()
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
        for sock in (conn, up):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
