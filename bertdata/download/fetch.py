"""Resumable, verified HTTP downloads.

`fetch` is the one way bertdata downloads anything: into `<dest>.part`, resuming
with a Range request after a cut or a crash, retrying transient failures with
exponential backoff, verifying the checksum, and only then renaming to `dest` --
so a file under its final name is always complete and verified. `fetch_text`
reads a small text resource with the same retry rules.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from tqdm import tqdm

from bertdata import __version__
from bertdata.errors import BertdataError

# Wikimedia's User-Agent policy asks clients to identify themselves; generic
# library agents get throttled or refused.
USER_AGENT = f"bertdata/{__version__} (Wikipedia to BERT pretraining data; Python urllib)"
CHUNK = 1 << 20
MAX_BACKOFF_S = 60.0
MAX_TEXT_BYTES = 16 << 20  # sums files, feeds and listings are KBs; more means a wrong URL
DIGEST_LENGTHS = {"sha256": 64, "sha1": 40, "md5": 32}
# Statuses worth retrying: the server says "later", not "never".
RETRY_STATUSES = {408, 425, 429}


class HTTPStatusError(BertdataError):
    """The server answered with a status that retrying will not change (404, 403, ...)."""

    def __init__(self, url: str, status: int, reason: str) -> None:
        super().__init__(f"{url}: HTTP {status} {reason}".rstrip())
        self.url = url
        self.status = status


class _Transient(Exception):
    """A failure worth another attempt: connection error, timeout, 5xx, a cut transfer."""


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).hostname or url


def note(message: str) -> None:
    # The line and its newline in one write: a signal that stops the command lands between two
    # writes, and the stop message was seen glued onto a retry note that lacked its newline.
    tqdm.write(message + "\n", file=sys.stderr, end="")


def _describe_network_error(err: BaseException, timeout: float) -> str:
    reason = err.reason if isinstance(err, urllib.error.URLError) else err
    if isinstance(reason, TimeoutError):
        return f"timed out after {timeout:g}s with no data"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, BaseException):
        return f"{type(reason).__name__}: {reason}"
    return str(reason)


def _open(url: str, timeout: float, offset: int = 0):
    """Send one GET; return the response, or the 416 error for a fully-downloaded part.

    4xx other than 408/425/429 raise `HTTPStatusError` (never retried), and so does
    a host name that does not resolve: the resolver has already retried, and a typo in
    --mirror or a machine without network will not mend in the next half minute.
    Everything that may pass -- 5xx, refused or reset connections, timeouts -- raises
    `_Transient`.
    """
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:
            return err
        err.close()
        if err.code >= 500 or err.code in RETRY_STATUSES:
            raise _Transient(f"HTTP {err.code} {err.reason}") from None
        raise HTTPStatusError(url, err.code, str(err.reason)) from None
    except (OSError, http.client.HTTPException, ValueError) as err:
        if isinstance(err, ValueError):  # urllib's word for a malformed URL
            raise BertdataError(f"not a downloadable URL: {url!r} ({err})") from None
        reason = getattr(err, "reason", err)
        if isinstance(reason, socket.gaierror):
            raise BertdataError(
                f"{url}: cannot resolve the host name {_host(url)} ({reason.strerror}); "
                "check the URL and the network"
            ) from None
        raise _Transient(_describe_network_error(err, timeout)) from None


def _with_retries(url: str, attempt, *, retries: int, backoff: float, on_give_up=lambda: ""):
    """Call `attempt()` until it returns; sleep backoff * 2**k between transient failures."""
    failures = 0
    while True:
        try:
            return attempt()
        except _Transient as err:
            failures += 1
            if failures > retries:
                raise BertdataError(
                    f"download of {url} failed after {failures} attempt(s): {err}{on_give_up()}"
                ) from None
            delay = min(backoff * 2 ** (failures - 1), MAX_BACKOFF_S)
            note(f"{url}: {err}; retry {failures}/{retries} in {delay:.1f}s")
            time.sleep(delay)


def _expected_digests(sha256: str | None, sha1: str | None, md5: str | None) -> dict[str, str]:
    expected = {}
    for algo, value in (("sha256", sha256), ("sha1", sha1), ("md5", md5)):
        if value is None:
            continue
        value = value.strip().lower()
        if len(value) != DIGEST_LENGTHS[algo] or not re.fullmatch(r"[0-9a-f]+", value):
            raise BertdataError(
                f"expected {algo} must be {DIGEST_LENGTHS[algo]} hex digits (got {value!r})"
            )
        expected[algo] = value
    return expected


def file_digests(path: Path, algos, progress: bool = True) -> dict[str, str]:
    """Hex digests of `path` for each algorithm in `algos`, in one pass over the file."""
    hashers = {algo: hashlib.new(algo) for algo in algos}
    size = path.stat().st_size
    with open(path, "rb") as handle, tqdm(
        total=size, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
        desc=f"verify {path.name}", disable=None if progress and size > 64 * CHUNK else True,
        leave=False,
    ) as bar:
        while block := handle.read(CHUNK):
            for hasher in hashers.values():
                hasher.update(block)
            bar.update(len(block))
    return {algo: hasher.hexdigest() for algo, hasher in hashers.items()}


def _mismatches(actual: dict[str, str], expected: dict[str, str]) -> list[str]:
    return [
        f"{algo} expected {expected[algo]}, got {actual[algo]}"
        for algo in expected
        if actual[algo] != expected[algo]
    ]


def _content_range(headers) -> tuple[int | None, int | None]:
    """(first byte, total size) from a `Content-Range: bytes a-b/n` or `bytes */n` header."""
    match = re.fullmatch(r"\s*bytes\s+(?:(\d+)-\d+|\*)/(\d+|\*)\s*", headers.get("Content-Range", ""))
    if not match:
        return None, None
    first = int(match.group(1)) if match.group(1) is not None else None
    total = int(match.group(2)) if match.group(2) != "*" else None
    return first, total


def _content_length(headers) -> int | None:
    value = headers.get("Content-Length")
    return int(value) if value and value.strip().isdigit() else None


def _restart_bar(bar: tqdm, total: int | None, done: int) -> None:
    # Bytes already on disk count as done but not toward the transfer rate / ETA.
    bar.reset(total=total)
    bar.initial = bar.n = bar.last_print_n = done
    bar.refresh()


def _transfer(url: str, part: Path, timeout: float, bar: tqdm) -> None:
    """One attempt: continue `part` from its current size until the server's end of file.

    Returns when `part` holds the whole file; raises `_Transient` when the
    attempt fails in a way another attempt may fix (what arrived stays in `part`).
    """
    offset = part.stat().st_size if part.exists() else 0
    response = _open(url, timeout, offset)
    with response:
        if response.status == 416:
            # Nothing left past `offset`: the part is complete, unless the server
            # says the file is shorter, in which case the part is not this file.
            _, total = _content_range(response.headers)
            if total is None or total == offset:
                _restart_bar(bar, offset, offset)
                return
            note(f"{part.name}: {offset} bytes on disk but the server's file has {total}; restarting")
            part.unlink()
            raise _Transient("partial file longer than the server's file")
        if response.status == 206:
            first, total = _content_range(response.headers)
            if first != offset:
                part.unlink()
                raise _Transient(f"server resumed at byte {first}, asked for {offset}; restarting")
            mode = "ab"
        else:
            if offset:
                note(f"{url}: server ignored the Range request; restarting from byte 0")
            offset, mode = 0, "wb"
            total = _content_length(response.headers)
        _restart_bar(bar, total, offset)
        received = offset
        try:
            part.parent.mkdir(parents=True, exist_ok=True)
            with open(part, mode) as out:
                while True:
                    try:
                        # read1: a stall after a partial chunk keeps what did arrive
                        block = response.read1(CHUNK)
                    except (OSError, http.client.HTTPException) as err:
                        raise _Transient(_describe_network_error(err, timeout)) from None
                    if not block:
                        break
                    out.write(block)
                    received += len(block)
                    bar.update(len(block))
        except OSError as err:  # the network errors were turned into _Transient above
            raise BertdataError(f"cannot write {part}: {err}") from None
    if total is not None and received < total:
        raise _Transient(f"connection closed after {received} of {total} bytes")


def fetch(
    url: str,
    dest: str | Path,
    *,
    sha256: str | None = None,
    sha1: str | None = None,
    md5: str | None = None,
    timeout: float = 30.0,
    retries: int = 5,
    backoff: float = 1.0,
    progress: bool = True,
    force: bool = False,
) -> Path:
    """Download `url` to `dest`, resumably and verified; return `dest` as a Path.

    The bytes go to `dest + ".part"`; a `.part` left by an interrupted run is
    continued with `Range: bytes=N-`. Connection errors, timeouts (`timeout`
    seconds without data), 5xx answers and transfers cut off mid-way are retried
    up to `retries` times, `backoff * 2**k` seconds apart, each retry resuming.
    4xx answers fail at once. Every given digest is checked before the rename;
    on a mismatch the `.part` is deleted.

    An existing `dest` that verifies is returned without downloading. One that
    does not verify raises -- it may be the user's own file -- unless `force=True`,
    which downloads it again; without any digest an existing `dest` is kept as
    it is, unless `force=True`.
    """
    dest = Path(dest)
    expected = _expected_digests(sha256, sha1, md5)
    if retries < 0 or timeout <= 0 or backoff < 0:
        raise BertdataError(
            f"fetch needs retries >= 0, timeout > 0, backoff >= 0 "
            f"(got {retries}, {timeout}, {backoff})"
        )
    if dest.exists():
        if not expected:
            if not force:
                note(f"{dest}: exists, kept as it is (no checksum to verify it against)")
                return dest
        else:
            mismatches = _mismatches(file_digests(dest, expected, progress), expected)
            if not mismatches:
                note(f"{dest}: already downloaded, {'/'.join(expected)} verified")
                return dest
            if not force:
                raise BertdataError(
                    f"{dest} exists but does not match {url}: {'; '.join(mismatches)}; "
                    f"move it away, or force a fresh download"
                )
        note(f"{dest}: exists; downloading it again as forced")

    part = dest.with_name(dest.name + ".part")
    started = time.monotonic()
    resumed_from = part.stat().st_size if part.exists() else 0
    if resumed_from:
        note(f"{part}: resuming from byte {resumed_from}")
    with tqdm(
        unit="B", unit_scale=True, unit_divisor=1024, desc=dest.name, file=sys.stderr,
        disable=None if progress else True, dynamic_ncols=True,
    ) as bar:
        _with_retries(
            url,
            lambda: _transfer(url, part, timeout, bar),
            retries=retries,
            backoff=backoff,
            on_give_up=lambda: (
                f" (rerun to resume from the {part.stat().st_size:,} bytes kept in {part})"
                if part.exists() and part.stat().st_size else ""
            ),
        )

    if expected:
        mismatches = _mismatches(file_digests(part, expected, progress), expected)
        if mismatches:
            part.unlink()
            raise BertdataError(
                f"checksum mismatch for {dest} downloaded from {url}: {'; '.join(mismatches)} "
                f"(the download was deleted; rerun to try again)"
            )
    os.replace(part, dest)
    size = dest.stat().st_size
    seconds = time.monotonic() - started
    verified = f", {'/'.join(expected)} verified" if expected else ", no checksum given"
    note(f"downloaded {dest} ({size:,} bytes in {seconds:.1f}s{verified})")
    return dest


def fetch_text(url: str, *, timeout: float = 30.0, retries: int = 5, backoff: float = 1.0) -> str:
    """Small text resource (sums file, feed, listing) as a str, with `fetch`'s retry rules."""
    too_large = f"{url}: larger than {MAX_TEXT_BYTES:,} bytes; not a small text file (a wrong URL?)"

    def attempt() -> str:
        with _open(url, timeout) as response:
            length = _content_length(response.headers)
            if length is not None and length > MAX_TEXT_BYTES:
                raise BertdataError(too_large)
            try:
                body = response.read(MAX_TEXT_BYTES + 1)
            except (OSError, http.client.HTTPException) as err:
                raise _Transient(_describe_network_error(err, timeout)) from None
        # Checked before a short body: the cap, not the network, cut a body read to it.
        if len(body) > MAX_TEXT_BYTES:
            raise BertdataError(too_large)
        if length is not None and len(body) < length:
            raise _Transient(f"connection closed after {len(body)} of {length} bytes")
        return body.decode("utf-8", errors="replace")

    return _with_retries(url, attempt, retries=retries, backoff=backoff)
