"""A work group's documents' signatures, written to two files; and a band's matches across them.

`<name>.bands` holds, for each band (and the exact key, as a last band, where exact copies are
looked for), the group's band keys sorted (uint64) and then their documents' numbers in the group
(uint32): the documents of one key range of one band lie together in every group's file, so a
match job reads its range from each file and sorts only that. `<name>.docs` holds what the
clusters need of each document: its key, shard, tokens, exact key and signature.
"""

from __future__ import annotations

import pickle

import numpy as np

from bertdata.dedup.minhash import Signer, exact_key

# A band's key range is cut at the top PREFIX_BITS bits: what a match job takes is a run of these.
PREFIX_BITS = 8
PREFIXES = 1 << PREFIX_BITS
ENTRY_BYTES = 12  # a band key and a document number


class GroupSignatures:
    """The signatures of one work group's documents, as they are read."""

    def __init__(self, signer: Signer | None, exact: bool) -> None:
        self.signer, self.exact = signer, exact
        self.keys: list = []
        self.shards: list = []
        self.tokens: list[int] = []
        self.exacts: list[bytes] = []
        self.sigs: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def bands(self) -> int:
        return (self.signer.cfg.bands if self.signer is not None else 0) + self.exact

    def add(self, key: tuple, shard: tuple, tokens: int, text: bytes) -> None:
        """A document: its text as a text shard holds it (UTF-8, a sentence a line)."""
        self.keys.append(key)
        self.shards.append(shard)
        self.tokens.append(tokens)
        self.exacts.append(exact_key(text))
        if self.signer is not None:
            self.sigs.append(self.signer.signature(text.decode("utf-8")))

    def render(self) -> tuple[bytes, bytes, np.ndarray]:
        """(the bands file, the docs file, where each band's prefixes begin: (bands, PREFIXES + 1))."""
        n = len(self.keys)
        sigs = np.stack(self.sigs) if self.sigs else np.zeros((n, 0), dtype=np.uint32)
        columns = [self.signer.bands(sig) for sig in sigs] if self.signer is not None else []
        keys = np.array(columns, dtype=np.uint64).reshape(n, -1) if columns else np.zeros((n, 0), dtype=np.uint64)
        if self.exact:
            exact = np.frombuffer(b"".join(e[:8] for e in self.exacts), dtype="<u8").reshape(n, 1)
            keys = np.concatenate([keys, exact.astype(np.uint64)], axis=1)
        chunks, starts = [], []
        bounds = np.arange(PREFIXES + 1, dtype=np.uint64) << np.uint64(64 - PREFIX_BITS)
        for band in range(keys.shape[1]):
            order = np.argsort(keys[:, band], kind="stable")
            sorted_keys = keys[order, band]
            chunks += [sorted_keys.astype("<u8").tobytes(), order.astype("<u4").tobytes()]
            at = np.searchsorted(sorted_keys, bounds[:-1]).astype(np.int64)
            starts.append(np.append(at, n))
        docs = pickle.dumps({"keys": self.keys, "shards": self.shards, "tokens": np.array(self.tokens, np.int64),
                             "exact": self.exacts, "sigs": sigs}, protocol=5)
        return b"".join(chunks), docs, np.array(starts, dtype=np.int64).reshape(keys.shape[1], PREFIXES + 1)


def band_slice(count: int, band: int, start: int, end: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Where entries start..end of `band` lie in a bands file of `count` documents: the byte
    ranges (offset, length) of their keys and of their document numbers."""
    base = band * count * ENTRY_BYTES
    return (base + start * 8, (end - start) * 8), (base + count * 8 + start * 4, (end - start) * 4)


def matches(parts: list[tuple[int, bytes, bytes]]) -> np.ndarray:
    """The pairs of documents sharing a band key, from each group's (file number, keys, document
    numbers) of one band's range: each document paired with the first of its key, as (ref, ref)
    rows, ref = file number << 32 | document number."""
    if not parts:
        return np.zeros((0, 2), dtype=np.int64)
    keys = np.concatenate([np.frombuffer(k, dtype="<u8") for _, k, _ in parts])
    refs = np.concatenate([(np.int64(f) << np.int64(32)) | np.frombuffer(d, dtype="<u4").astype(np.int64)
                           for f, _, d in parts])
    order = np.lexsort((refs, keys))
    keys, refs = keys[order], refs[order]
    same = np.flatnonzero(keys[1:] == keys[:-1]) + 1
    if not len(same):
        return np.zeros((0, 2), dtype=np.int64)
    # Each run's first element: for every i in `same`, the start of its run.
    run_start = np.maximum.accumulate(np.where(np.concatenate(([True], keys[1:] != keys[:-1])),
                                               np.arange(len(keys)), 0))
    return np.stack([refs[run_start[same]], refs[same]], axis=1)


def load_docs(data: bytes) -> dict:
    return pickle.loads(data)
