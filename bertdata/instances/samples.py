"""A text shard's documents as samples for the formats that hold documents (mds, parquet): one
sample per document, or per piece of a document longer than the sample length, cut at sentence
boundaries, the tokenizer's own special tokens around each."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Samples:
    """One text shard's samples, in document order: sample `i` is `tokens[offsets[i]:offsets[i + 1]]`
    (special tokens included); `document[i]` is the document of the shard it comes from (0-based,
    in the shard's order) and `piece[i]` which piece of that document it is (0-based)."""

    source: str  # the text shard's stem, e.g. wikicorpus_en_training_3
    tokens: np.ndarray  # uint16 where the vocab holds at most 65,536 entries, else uint32
    offsets: np.ndarray  # int64, one more than the samples
    document: np.ndarray  # int64
    piece: np.ndarray  # int32

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def sample(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]

    def sample_id(self, i: int) -> str:
        """The sample's `id` column: its text shard, document and piece."""
        return f"{self.source}/{int(self.document[i])}/{int(self.piece[i])}"
