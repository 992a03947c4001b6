"""A text shard's documents as samples for the formats that hold documents (mds, parquet): one
sample per document, or per piece of a document longer than the sample length, cut at sentence
boundaries, the tokenizer's own special tokens around each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertdata.errors import BertdataError
from bertdata.instances.documents import Documents
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.tokenizer_file import TokenizerFile, id_dtype_for


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
    names: tuple[str, ...] | None = None  # a recipe's: each document's "<corpus>/<document id>"

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def sample(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]

    def sample_id(self, i: int) -> str:
        """The sample's `id` column: its document (its corpus and id, from a recipe; else its text
        shard and place there) and piece."""
        if self.names is not None:
            return f"{self.names[int(self.document[i])]}/{int(self.piece[i])}"
        return f"{self.source}/{int(self.document[i])}/{int(self.piece[i])}"


def check_sample_length(tokenizer: WordPiece | TokenizerFile, max_length: int) -> None:
    """Refuse, in one line naming the tokenizer's file, a sample length it cannot hold: no room
    for one token beside its special tokens, or over the length its file states."""
    specials = len(tokenizer.prefix) + len(tokenizer.suffix)
    if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) or max_length <= specials:
        raise BertdataError(
            f"{tokenizer.path}: a sample length of {max_length} leaves no room for a token beside the "
            f"tokenizer's {specials} special tokens around each sample; give at least {specials + 1}")
    if tokenizer.max_length is not None and max_length > tokenizer.max_length:
        raise BertdataError(
            f"{tokenizer.path}: a sample length of {max_length} is over the {tokenizer.max_length} tokens "
            "the tokenizer states it holds (its truncation max_length or model_max_length)")


def make_samples(documents: Documents, tokenizer: WordPiece | TokenizerFile, max_length: int,
                 source: str | None = None) -> Samples:
    """A text shard's samples: each document whole where it fits in `max_length` tokens with the
    tokenizer's prefix and suffix, else in pieces cut greedily at sentence boundaries (sentences
    added while they fit); a sentence longer than the room is cut into pieces of the room, the
    last one joined by the sentences after it while they fit. `source` defaults to the stem of
    the shard's first file."""
    check_sample_length(tokenizer, max_length)
    prefix = np.asarray(tokenizer.prefix, dtype=np.int64)
    suffix = np.asarray(tokenizer.suffix, dtype=np.int64)
    room = int(max_length) - len(prefix) - len(suffix)
    # Units: the sentences, those longer than the room cut into pieces of the room. Every unit
    # fits a sample, and a sample is a run of one document's units.
    lengths = np.diff(documents.sentence_offsets)
    chunks = np.maximum(1, -(-lengths // room))
    first_unit = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum(chunks, out=first_unit[1:])
    unit_sentence = np.repeat(np.arange(len(chunks)), chunks)
    within = np.arange(len(unit_sentence)) - first_unit[unit_sentence]
    unit_bounds = np.zeros(len(unit_sentence) + 1, dtype=np.int64)
    np.cumsum(np.minimum(room, lengths[unit_sentence] - within * room), out=unit_bounds[1:])
    doc_units = first_unit[documents.doc_offsets]  # each document's first unit, and the end
    doc_of_unit = np.repeat(np.arange(documents.num_documents), np.diff(doc_units))
    # From a sample starting at unit i, the next starts at the first unit that does not fit.
    following = np.searchsorted(unit_bounds, unit_bounds[:-1] + room, side="right") - 1
    following = np.minimum(following, doc_units[doc_of_unit + 1]).tolist()
    # The greedy walk is sequential, one step per sample: a few 10^4 per shard.
    starts: list[int] = []
    for begin, end in zip(doc_units[:-1].tolist(), doc_units[1:].tolist()):
        unit = begin
        while unit < end:
            starts.append(unit)
            unit = following[unit]
    starts_array = np.asarray(starts, dtype=np.int64)
    token_starts = unit_bounds[starts_array]
    token_ends = unit_bounds[np.append(starts_array[1:], len(unit_sentence))]
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(token_ends - token_starts + len(prefix) + len(suffix), out=offsets[1:])
    tokens = np.empty(int(offsets[-1]), dtype=id_dtype_for(tokenizer.vocab_size))
    body = np.ones(len(tokens), dtype=bool)
    for k, token in enumerate(prefix.tolist()):
        tokens[offsets[:-1] + k] = token
        body[offsets[:-1] + k] = False
    for k, token in enumerate(suffix.tolist()):
        tokens[offsets[1:] - len(suffix) + k] = token
        body[offsets[1:] - len(suffix) + k] = False
    tokens[body] = documents.tokens
    document = doc_of_unit[starts_array].astype(np.int64)
    first_piece = np.searchsorted(document, document, side="left")
    piece = (np.arange(len(starts)) - first_piece).astype(np.int32)
    if source is None:
        source = Path(documents.paths[0]).stem if documents.paths else ""
    return Samples(source=source, tokens=tokens, offsets=offsets, document=document, piece=piece,
                   names=documents.names)
