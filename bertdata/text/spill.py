"""Documents on their way to their text shard, spilled to sorted run files.

Every document must reach the one text shard its key hashes to. A runner's shuffle
would carry it there, but Beam's local runner keeps everything it shuffles in the
launcher's memory, which then grows with the dump. Instead each work group buffers its
documents and, whenever the buffer is full (and at its end), writes them as one *run*:
the documents ordered by shard, each shard's block at a known offset. A text shard is
then rebuilt by reading its block from every run.

Memory is one buffer per worker. The number of files is about the compressed text over
the buffer size (plus one per work group), whatever the number of shards; a shard's
merge reads one block per run.
"""

from __future__ import annotations

import pickle
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO

from bertdata.text.articles import Document

# Compressed document bytes per run. Small enough that the buffer stays a minor part of a
# worker's memory, large enough that the full English dump makes a few hundred runs.
RUN_BYTES = 16 << 20

ShardKey = tuple[str, int]  # (split, index)


@dataclass(frozen=True)
class Run:
    """A written run, as the shard merge needs it."""

    path: str
    order: tuple[int, int]  # (work group, sequence in the group): dump order across runs
    blocks: dict  # ShardKey -> (offset, length, documents)


class RunBuffer:
    """Documents of one work group, by shard, until there are enough to write a run."""

    def __init__(self, limit: int = RUN_BYTES):
        self.limit = limit
        self._docs: dict[ShardKey, list[Document]] = defaultdict(list)
        self._bytes = 0

    def add(self, shard: ShardKey, doc: Document) -> bool:
        """Buffer `doc`; True when the buffer is full and should be written."""
        self._docs[shard].append(doc)
        self._bytes += len(doc.packed)
        return self._bytes >= self.limit

    def __bool__(self) -> bool:
        return bool(self._docs)

    def write_to(self, f: BinaryIO) -> dict:
        """Write the buffer as a run to `f`, block by block (each shard's documents freed
        as its block is written); returns the blocks {shard: (offset, length, documents)}.

        Within a block documents keep their arrival (dump) order: the merge's stable sort
        relies on it to keep the first copy of a repeated page id.
        """
        blocks, offset = {}, 0
        for shard in sorted(self._docs):
            docs = self._docs.pop(shard)
            block = pickle.dumps([(d.key, d.packed, d.tokens) for d in docs], protocol=pickle.HIGHEST_PROTOCOL)
            f.write(block)
            blocks[shard] = (offset, len(block), len(docs))
            offset += len(block)
        self._bytes = 0
        return blocks


def run_name(group: int, sequence: int) -> str:
    # No "train" in the name: trainers pick every file whose name contains it.
    return f"g{group:05d}-r{sequence:04d}.run"


def decode_block(block: bytes) -> list[Document]:
    return [Document(key, packed, tokens) for key, packed, tokens in pickle.loads(block)]


def merge_blocks(blocks: Iterable[bytes]) -> tuple[list[Document], list[Document]]:
    """One shard's documents from its blocks given in run order, sorted by key with each
    key once (its first copy in dump order), and the repeated copies dropped."""
    docs = [d for block in blocks for d in decode_block(block)]
    docs.sort(key=lambda d: d.key)  # stable: repeated keys stay in dump order
    kept, dropped = [], []
    for doc in docs:
        (dropped if kept and kept[-1].key == doc.key else kept).append(doc)
    return kept, dropped
