"""JSON lines (`--` Dolma, C4, peS2o, RedPajama): `.jsonl`, `.json`, each plain or `.gz` or `.zst`
compressed, one document an object a line. Keys are named as parquet's columns are (a dotted key
reaches into a nested object: `metadata.url`)."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections import Counter
from collections.abc import Iterator

from bertdata.corpora.contract import DEFAULT_ID, CorpusSpec, CorpusType, Opener, basename, field_text, id_text
from bertdata.corpora.where import MISSING, lookup
from bertdata.errors import BertdataError

SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".jsonl.zst", ".json.zst", ".jsonl.zstd", ".json.zstd")


class _Decoded(io.RawIOBase):
    """A compressed file's bytes as its decoder gives them, its errors made one line naming the
    file. A stream cut before its end marker is refused: zstandard's own reader just ends there."""

    def __init__(self, raw, path: str, kind: str):
        super().__init__()
        self.raw, self.path, self.kind = raw, path, kind
        self.pending = b""
        if kind == "zstd":
            import zstandard

            self.zstd = zstandard
            self.decoder = zstandard.ZstdDecompressor().decompressobj()
            self.fed = False
        else:
            self.gzip = gzip.GzipFile(fileobj=raw, mode="rb")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            data = self._read(len(buffer))
        except EOFError:
            raise BertdataError(f"{self.path}: truncated (its {self.kind} stream ends before its end marker)") from None
        except (OSError, zlib.error) as err:
            raise BertdataError(f"{self.path}: not a valid {self.kind} stream ({err})") from None
        buffer[:len(data)] = data
        return len(data)

    def _read(self, n: int) -> bytes:
        if self.kind == "gzip":
            return self.gzip.read(n)
        while not self.pending:
            chunk = self.raw.read(1 << 20)
            if not chunk:
                if self.fed and not self.decoder.eof:
                    raise EOFError
                return b""
            try:
                while chunk:
                    if self.decoder.eof:  # the next frame of a multi-frame file
                        self.decoder = self.zstd.ZstdDecompressor().decompressobj()
                    self.fed = True
                    self.pending += self.decoder.decompress(chunk)
                    chunk = self.decoder.unused_data if self.decoder.eof else b""
            except self.zstd.ZstdError as err:
                raise OSError(str(err)) from None
        data, self.pending = self.pending[:n], self.pending[n:]
        return data

    def close(self) -> None:
        self.raw.close()
        super().close()


def open_lines(path: str, open_file: Opener):
    """`path`'s bytes, decompressed by its suffix, as a buffered reader of lines."""
    raw = open_file(path)
    name = path.lower()
    if name.endswith(".gz"):
        return io.BufferedReader(_Decoded(raw, path, "gzip"), buffer_size=1 << 20)
    if name.endswith((".zst", ".zstd")):
        return io.BufferedReader(_Decoded(raw, path, "zstd"), buffer_size=1 << 20)
    return raw


class JsonLines(CorpusType):
    name = "jsonl"
    describe = ("JSON lines (.jsonl, .json, plain, .gz or .zst): one document an object a line (Dolma, C4, "
                "peS2o, RedPajama); keys named by text: and id: (default: id where a line has it, else the file and line)")

    def check(self, spec: CorpusSpec, path: str, open_file: Opener) -> None:
        if not path.lower().endswith(SUFFIXES):
            raise BertdataError(f"{path}: not a JSON-lines file name (one of {', '.join(SUFFIXES)})")
        with open_lines(path, open_file) as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    _check_keys(spec, _record(line, path, number), f"{path}:{number}")
                    return

    def documents(self, spec: CorpusSpec, path: str, open_file: Opener, counts: Counter,
                  start: int | None = None, end: int | None = None) -> Iterator[tuple[str, str]]:
        name = basename(path)
        keeps = spec.where.keeps if spec.where else None
        with open_lines(path, open_file) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                record = _record(line, path, number)
                text = lookup(record, spec.text)
                if text is MISSING:
                    raise BertdataError(f"{path}:{number}: no key {spec.text!r} (the text: key)")
                text = field_text(text, f"{path}:{number}: key {spec.text!r}")
                if spec.id is None:
                    value = record.get(DEFAULT_ID)
                    doc_id = f"{name}:{number}" if value is None else id_text(value)
                else:
                    value = lookup(record, spec.id)
                    if value is MISSING or value is None:
                        raise BertdataError(f"{path}:{number}: no key {spec.id!r} (the id: key)")
                    doc_id = id_text(value)
                if keeps is not None:
                    for column in spec.where.columns:
                        if lookup(record, column) is MISSING:
                            raise BertdataError(f"{path}:{number}: no key {column!r}, which where: reads")
                    if not keeps(record):
                        counts["filtered"] += 1
                        continue
                if not text:
                    counts["empty"] += 1
                    continue
                yield doc_id, text


def _record(line: bytes, path: str, number: int) -> dict:
    try:
        record = json.loads(line)
    except ValueError as err:
        raise BertdataError(f"{path}:{number}: not JSON ({err})") from None
    except RecursionError:
        raise BertdataError(f"{path}:{number}: JSON nested too deeply") from None
    if not isinstance(record, dict):
        raise BertdataError(f"{path}:{number}: a JSON line must be an object, not {type(record).__name__}")
    return record


def _check_keys(spec: CorpusSpec, record: dict, where: str) -> None:
    wanted = [(spec.text, "the text: key")]
    if spec.id is not None:
        wanted.append((spec.id, "the id: key"))
    wanted += [(c, "which where: reads") for c in (spec.where.columns if spec.where else ())]
    for key, role in wanted:
        if lookup(record, key) is MISSING:
            raise BertdataError(f"{where}: no key {key!r} ({role}); its keys are {', '.join(sorted(record))}")


TYPE = JsonLines()
