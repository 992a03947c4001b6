"""Text shards: which shard a document goes to, the reference one-sentence-per-line format, and
the names of the text stage's folders and files and of the build's work folder (each format
names its own folders and files: bertdata.formats)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

BOOKS_WIKI_DATASET = "books_wiki_en_corpus"
SPLITS = ("training", "test")
# A build's temporary files (run files, progress markers), beside the shard folders and
# named so that no trainer takes them for shards.
WORK_FOLDER = ".bertdata-work"


def text_folder(training_shards: int, test_shards: int, test_fraction: float) -> str:
    return f"sharded_training_shards_{training_shards}_test_shards_{test_shards}_fraction_{test_fraction}"


def shard_stem(dataset: str, split: str, index: int) -> str:
    return f"{dataset}_{split}_{index}"


def assign(doc_key: str, training_shards: int, test_shards: int, test_fraction: float) -> tuple[str, int]:
    """(split, shard index) from a hash of the document's key (page id or book name).

    A hash, not a counter or a random draw, so the assignment is the same whatever the
    runner, worker count or order in which pages arrive. Shards are ranges of the hash,
    so shard j of n/2 shards is exactly shards 2j and 2j+1 of n (see `fewer_shards`).
    """
    digest = hashlib.sha256(f"bertdata-split:{doc_key}".encode()).digest()
    unit = int.from_bytes(digest[:8], "big") / 2**64
    position = int.from_bytes(digest[8:16], "big")
    if unit < test_fraction:
        return "test", (position * test_shards) >> 64
    return "training", (position * training_shards) >> 64


def fewer_shards(requested: int, documents: int, minimum: int) -> int:
    """The shard count, halved while a shard would hold fewer than `minimum` documents.

    The reference picks a random next segment from another document of the same shard,
    so a shard of a few documents makes next-sentence data that is almost never random.
    """
    shards = requested
    while shards > 1 and shards % 2 == 0 and documents < minimum * shards:
        shards //= 2
    return shards


def derive_seed(seed: int, shard_name: str) -> int:
    """A per-shard seed, so shards do not all replay one random stream as the reference's do."""
    digest = hashlib.sha256(f"bertdata-seed:{seed}:{shard_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass(frozen=True)
class TextShard:
    """A written text shard, as the instance stage and the manifest see it."""

    split: str
    index: int
    stem: str  # e.g. wikicorpus_en_training_7
    path: str
    documents: int
    sentences: int
    bytes: int
    sha256: str
    ids: bool = False  # a recipe's: its documents' corpus and id beside it (`ids_path`)

    def manifest_entry(self) -> dict:
        entry = {"file": self.stem + ".txt", "documents": self.documents, "sentences": self.sentences,
                 "bytes": self.bytes, "sha256": self.sha256}
        return {**entry, "ids": ids_name(self.stem)} if self.ids else entry

    @property
    def ids_path(self) -> str | None:
        return self.path[:-len(".txt")] + IDS_SUFFIX if self.ids else None


# Beside a recipe's text shard, its documents' names in order: a JSON string a line,
# "<corpus>/<document id>" (what each sample's id begins with).
IDS_SUFFIX = ".ids.jsonl"


def ids_name(stem: str) -> str:
    return stem + IDS_SUFFIX


def render_ids(documents: list, corpus_names: tuple[str, ...]) -> bytes:
    """The ids file of a shard's documents, in the shard's order (sorted by key)."""
    import json

    ordered = sorted(documents, key=lambda d: d.key)
    return b"".join(json.dumps(document_name(corpus_names[d.key[0]], d.key)).encode() + b"\n" for d in ordered)


def document_name(corpus: str, key: tuple) -> str:
    """A recipe's document's name, "<corpus>/<id>", "#<copy>" after it for a copy (`repeat`)."""
    return f"{corpus}/{key[1]}" + (f"#{key[2]}" if len(key) > 2 else "")


def read_ids(data: bytes) -> list[str]:
    import json

    return [json.loads(line) for line in data.splitlines()]


def render_shard(documents: list, stem: str, split: str, index: int, path: str) -> tuple[bytes, TextShard]:
    """The bytes of a text shard from its documents (any order: sorted here by key) and its record.

    The reference shard format: one sentence per line, an empty line after each document. A
    document's text is its lines already, in UTF-8, so they are written without being decoded."""
    ordered = sorted(documents, key=lambda d: d.key)
    texts = [d.text for d in ordered]
    data = b"".join(text + b"\n\n" for text in texts)
    sentences = sum(text.count(b"\n") for text in texts) + len(texts)
    record = TextShard(split, index, stem, path, len(ordered), sentences, len(data), hashlib.sha256(data).hexdigest())
    return data, record
