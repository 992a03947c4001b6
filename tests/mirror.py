"""A Wikimedia dump mirror on 127.0.0.1 (an HTTP server with cuts, stalls and errors on request),
for the download tests and the downloads to an object store."""

from __future__ import annotations

import bz2
import hashlib
import random
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


STALL_S = 5.0  # a stalled handler gives up after this, or at teardown, whichever comes first


PAYLOAD = random.Random(1234).randbytes(3 * (1 << 20) + 12345)  # several read chunks, odd tail


class Mirror:
    """What the server serves and how it misbehaves; the handler reads it, tests set it."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.cut_once: set[str] = set()  # first GET sends half the body, then hangs up
        self.ignore_range: set[str] = set()  # answer 200 with the whole file to a Range request
        self.stall: set[str] = set()  # send headers and a few bytes, then go silent
        self.fail_once: dict[str, int] = {}  # answer this status once, then behave
        self.log: list[tuple[str, str | None, int]] = []  # (path, Range header, status)
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def requests(self, path: str) -> list[tuple[str | None, int]]:
        with self.lock:
            return [(rng, status) for p, rng, status in self.log if p == path]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _record(self, status: int) -> None:
        mirror = self.server.mirror
        with mirror.lock:
            mirror.log.append((self.path, self.headers.get("Range"), status))

    def _reply(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self._record(status)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        mirror: Mirror = self.server.mirror
        path = self.path
        with mirror.lock:
            failure = mirror.fail_once.pop(path, None)
            cut = path in mirror.cut_once
            mirror.cut_once.discard(path)
        if failure is not None:
            self._reply(failure, {}, b"try later")
            return
        data = mirror.files.get(path)
        if data is None:
            self._reply(404, {}, b"not here")
            return
        start, status, headers = 0, 200, {}
        asked = self.headers.get("Range")
        if asked and path not in mirror.ignore_range:
            start = int(re.fullmatch(r"bytes=(\d+)-", asked).group(1))
            if start >= len(data):
                self._reply(416, {"Content-Range": f"bytes */{len(data)}"})
                return
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        self._record(status)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if path in mirror.stall:
            self.wfile.write(body[:16])
            self.wfile.flush()
            mirror.stop.wait(STALL_S)
            self.close_connection = True
            return
        if cut:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.mirror = Mirror()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    httpd.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.mirror.stop.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def serve(server, path: str, data: bytes = PAYLOAD) -> str:
    server.mirror.files[path] = data
    return server.base + path


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def fake_run(server, wiki: str, date: str, *, finished: bool = True) -> dict[str, bytes]:
    """Publish one dump run the way Wikimedia lays it out; return {file name: bytes}."""
    rng = random.Random(int(date))
    xml = "".join(
        f"<page><title>Page {i}</title><text>{rng.random()} words</text></page>\n" for i in range(2000)
    )
    files = {
        f"{wiki}-{date}-pages-articles-multistream.xml.bz2": bz2.compress(xml.encode()),
        f"{wiki}-{date}-pages-articles-multistream-index.txt.bz2": bz2.compress(b"600:1:Page 0\n"),
        f"{wiki}-{date}-stub-articles.xml.gz": rng.randbytes(300),
    }
    listed = dict(files)
    if not finished:
        del listed[f"{wiki}-{date}-pages-articles-multistream-index.txt.bz2"]
    for name, data in files.items():
        serve(server, f"/{wiki}/{date}/{name}", data)
    sums = "".join(f"{sha1(data)}  {name}\n" for name, data in listed.items())
    serve(server, f"/{wiki}/{date}/{wiki}-{date}-sha1sums.txt", sums.encode())
    return files
