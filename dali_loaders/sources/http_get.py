"""One keep-alive HTTP/1.1 connection that sends GETs and reads each answer's body straight
into a numpy array.

http.client spends about 40 us of Python on each answer's headers (the email parser) and
copies the body once more; a store's GetObject answer needs neither: a status line, a few
headers, Content-Length bytes. What the server sends is bounded: the headers to
MAX_HEAD_BYTES, the body to the caller's limit, every wait to the socket's time limit.
"""
import socket
import ssl
from typing import Dict, Optional, Tuple

import numpy as np

MAX_HEAD_BYTES = 64 << 10   # status line and headers of one answer (and its trailers)
MAX_INTERIM = 8             # "100 Continue" answers before the real one
RECEIVE = 64 << 10


class ProtocolError(OSError):
    """The server's answer is not HTTP/1.1 as a GET's answer should be."""


class Answer:
    """A GET's answer: `status`, lower-cased `headers`, `body` (read for status 200 or 206
    within the limit, else None), `size` (Content-Length, or None)."""

    __slots__ = ("status", "headers", "body", "size")

    def __init__(self, status: int, headers: Dict[str, str], body: Optional[np.ndarray], size: Optional[int]):
        self.status, self.headers, self.body, self.size = status, headers, body, size


class Connection:
    """GETs over one connection to scheme://host:port, opened at the first request and kept
    open while the server allows; `timeout` bounds the connect and every read."""

    def __init__(self, scheme: str, host: str, port: Optional[int], connect_timeout: float, timeout: float,
                 tls: Optional[ssl.SSLContext] = None):
        if scheme not in ("http", "https"):
            raise ValueError(f"{scheme}://: only http and https endpoints are read")
        self.scheme, self.host = scheme, host
        self.port = port or (443 if scheme == "https" else 80)
        self.connect_timeout, self.timeout, self.tls = connect_timeout, timeout, tls
        self.sock: Optional[socket.socket] = None
        self.pending = b""   # bytes received past the last answer's head (its body's start)

    def _open(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.scheme == "https":
            sock = (self.tls or ssl.create_default_context()).wrap_socket(sock, server_hostname=self.host)
        sock.settimeout(self.timeout)
        return sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self.pending = None, b""

    def get(self, path: str, headers: Dict[str, str], limit: int) -> Answer:
        """Send `GET path` with `headers`; the answer, its body read when the status is 200 or
        206 (a range) and the length at most `limit`. After any other answer the connection is
        closed."""
        if self.sock is None:
            self.sock = self._open()
        request = f"GET {path} HTTP/1.1\r\n" + "".join(f"{n}: {v}\r\n" for n, v in headers.items()) + "\r\n"
        self.sock.sendall(request.encode("latin-1"))
        status, fields = self._head()
        size = fields.get("content-length")
        size = int(size) if size is not None and size.isdigit() else None
        if status not in (200, 206) or (size is not None and size > limit):
            self.close()   # the body unread: this connection cannot carry another request
            return Answer(status, fields, None, size)
        if size is not None:
            body = self._exactly(size)
        elif "chunked" in fields.get("transfer-encoding", "").lower():
            body = self._chunked(limit)
            if body is None:   # over the limit: said as for a length over it
                return Answer(status, fields, None, limit + 1)
        else:
            self.close()
            raise ProtocolError(f"{self.host}:{self.port} answered a GET with neither a length nor chunks")
        if "close" in fields.get("connection", "").lower():
            self.close()
        return Answer(status, fields, body, len(body))

    def _receive(self) -> bytes:
        data = self.sock.recv(RECEIVE)
        if not data:
            raise ConnectionResetError(f"{self.host}:{self.port} closed the connection mid-answer")
        return data

    def _line(self, bound: int) -> bytes:
        """The next CRLF-ended line of at most `bound` bytes."""
        while True:
            end = self.pending.find(b"\r\n")
            if end >= 0:
                line, self.pending = self.pending[:end], self.pending[end + 2:]
                return line
            if len(self.pending) > bound:
                raise ProtocolError(f"{self.host}:{self.port} sent a line over {bound} bytes")
            self.pending += self._receive()

    def _head(self) -> Tuple[int, Dict[str, str]]:
        """The status and lower-cased headers of the next answer (past any "100 Continue")."""
        for _ in range(MAX_INTERIM):
            while True:
                end = self.pending.find(b"\r\n\r\n")
                if end >= 0:
                    break
                if len(self.pending) > MAX_HEAD_BYTES:
                    raise ProtocolError(f"{self.host}:{self.port} sent headers over {MAX_HEAD_BYTES} bytes")
                self.pending += self._receive()
            lines = self.pending[:end].decode("latin-1").split("\r\n")
            self.pending = self.pending[end + 4:]
            version, _, rest = lines[0].partition(" ")
            code = rest[:3]
            if not version.startswith("HTTP/1.") or not code.isdigit():
                raise ProtocolError(f"{self.host}:{self.port} answered with {lines[0][:40]!r}, not HTTP/1.x")
            if int(code) != 100:   # "continue": the real answer follows
                fields = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    fields[name.strip().lower()] = value.strip()
                return int(code), fields
        raise ProtocolError(f"{self.host}:{self.port} sent {MAX_INTERIM} interim answers and no answer")

    def _exactly(self, size: int) -> np.ndarray:
        body = np.empty(size, dtype=np.uint8)
        start = self.pending[:size]
        body[:len(start)] = np.frombuffer(start, dtype=np.uint8)
        self.pending = self.pending[len(start):]
        view = memoryview(body)[len(start):]
        while len(view):
            got = self.sock.recv_into(view)
            if not got:
                raise ConnectionResetError(f"{self.host}:{self.port} closed the connection mid-answer")
            view = view[got:]
        return body

    def _chunked(self, limit: int) -> Optional[np.ndarray]:
        """The body sent in chunks; None (the connection closed) once it passes `limit`."""
        pieces, total = [], 0
        while True:
            line = self._line(1024).split(b";")[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                raise ProtocolError(f"{self.host}:{self.port} sent a bad chunk size") from None
            if size == 0:
                trailers = 0
                while True:   # trailers, up to the empty line
                    line = self._line(MAX_HEAD_BYTES)
                    trailers += len(line) + 2
                    if not line:
                        break
                    if trailers > MAX_HEAD_BYTES:
                        raise ProtocolError(f"{self.host}:{self.port} sent trailers over {MAX_HEAD_BYTES} bytes")
                return np.concatenate(pieces) if pieces else np.empty(0, dtype=np.uint8)
            total += size
            if total > limit:
                self.close()
                return None
            pieces.append(self._exactly(size))
            if self._line(2):
                raise ProtocolError(f"{self.host}:{self.port} sent a chunk longer than it said")
