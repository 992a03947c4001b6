"""MLM/NSP training instances from a tokenized shard, bit-exact with the reference script.

`make_shard` is the whole job for one shard (text files -> its instances and the attributes
recording how they were made) as a plain, deterministic function; `create_instances` and
`Instances` are its parts. Nothing here writes a file: a format writes the instances
(`bertdata.formats`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertdata import __version__

from bertdata.instances import kernel, masking
from bertdata.config import InstanceConfig
from bertdata.instances.schema import DTYPES, FIELDS
from bertdata.instances.documents import Documents, read_documents
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.vocab import Vocab


@dataclass(frozen=True)
class Instances:
    """A shard's instances, stored compactly in generation order: each one's segments A and B
    as offsets into the shard's `tokens`, and its predictions in small dtypes; `order` is the
    final shuffle (output row r is instance order[r]). `array(name, start, stop)` builds rows
    of one of the six reference arrays, so no padded array need exist whole."""

    tokens: np.ndarray
    order: np.ndarray  # [N] int64
    spans: np.ndarray  # [>=N, 4] int64: a_start, a_stop, b_start, b_stop in tokens
    random_next: np.ndarray  # [>=N] int8, 1 = B comes from another document
    positions: np.ndarray  # [>=N, P] masked positions, sorted, 0-padded
    labels: np.ndarray  # [>=N, P] the original ids at those positions
    shown: np.ndarray  # [>=N, P] the ids shown there instead ([MASK], kept, or random)
    max_seq_length: int
    cls_id: int
    sep_id: int

    def __len__(self) -> int:
        return len(self.order)

    @property
    def max_predictions_per_seq(self) -> int:
        return self.positions.shape[1]

    def array(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Rows start:stop of one of the six reference arrays, in its reference dtype, 0-padded."""
        rows = self.order[start:stop]
        shape = (len(rows), self.max_seq_length)
        if name == "input_ids":
            out = np.zeros(shape, DTYPES[name])
            kernel.fill_input_ids(out, rows, self.tokens, self.spans, self.positions, self.shown,
                                  self.cls_id, self.sep_id)
        elif name == "input_mask":
            out = np.zeros(shape, DTYPES[name])
            kernel.fill_input_mask(out, rows, self.spans)
        elif name == "segment_ids":
            out = np.zeros(shape, DTYPES[name])
            kernel.fill_segment_ids(out, rows, self.spans)
        elif name == "masked_lm_positions":
            out = self.positions[rows].astype(DTYPES[name])
        elif name == "masked_lm_ids":
            out = self.labels[rows].astype(DTYPES[name])
        elif name == "next_sentence_labels":
            out = self.random_next[rows].astype(DTYPES[name])
        else:
            raise KeyError(f"no instance array {name!r}; one of {', '.join(FIELDS)}")
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """All six reference arrays (needs the memory of all of them at once)."""
        return {name: self.array(name) for name in FIELDS}


def create_instances(documents: Documents, vocab: Vocab, cfg: InstanceConfig,
                     seed: int | None = None) -> Instances:
    """The reference's instances for this shard; `seed` overrides `cfg.random_seed`."""
    seed = cfg.random_seed if seed is None else seed
    words = vocab.word_ids
    # The compiled draws are 32-bit: every range drawn from must fit.
    if max(documents.num_documents, documents.num_sentences, len(words)) >= 1 << 31:
        raise ValueError("shard too large for one instance run (2**31 documents, sentences or vocab words)")
    # The reference makes about one instance per max_seq_length tokens per dupe, more with
    # short sequences; a good first guess saves regrowing the arrays in the kernel.
    per_dupe = documents.num_tokens // (cfg.max_seq_length - 3) * 3 // 2 + documents.num_documents
    capacity = min(per_dupe, documents.num_sentences) * cfg.dupe_factor + 16
    num_to_predict = masking.prediction_count(np.arange(cfg.max_seq_length + 1), cfg.masked_lm_prob,
                                              cfg.max_predictions_per_seq)
    params = kernel.Params(max_seq_length=cfg.max_seq_length, max_predictions_per_seq=cfg.max_predictions_per_seq,
                           short_seq_prob=cfg.short_seq_prob, dupe_factor=cfg.dupe_factor,
                           num_to_predict=num_to_predict, vocab_words=words,
                           word_continues=vocab.word_continues if cfg.masking_scheme == "whole-word"
                           else np.zeros(len(vocab), np.bool_), cls_id=vocab.cls_id,
                           sep_id=vocab.sep_id, mask_id=vocab.mask_id)
    made = kernel.generate(seed, documents, params, capacity)
    return Instances(tokens=documents.tokens, order=made.order, spans=made.spans, random_next=made.random_next,
                     positions=made.positions, labels=made.labels, shown=made.shown,
                     max_seq_length=cfg.max_seq_length, cls_id=vocab.cls_id, sep_id=vocab.sep_id)


def generation_attrs(vocab: Vocab, cfg: InstanceConfig, lowercase: bool, seed: int) -> dict[str, Any]:
    """What made a shard, stored as hdf5 file attributes (readers of the six datasets ignore them)."""
    return {
        **cfg.record(),
        "random_seed": seed,
        "lower_case": lowercase,
        "vocab_sha256": vocab.sha256,
        "vocab_size": len(vocab),
        "bertdata_version": __version__,
    }


@dataclass(frozen=True)
class Shard:
    """One text shard's instances, the attributes a format records with them, and the counts
    and stage times of making them."""

    instances: Instances
    attrs: dict[str, Any]
    stats: dict[str, Any]


def make_shard(inputs: str | os.PathLike | Sequence[str | os.PathLike], vocab: Vocab, cfg: InstanceConfig,
               lowercase: bool = True, errors: str = "strict", seed: int | None = None,
               tokenizer: WordPiece | None = None, progress=None) -> Shard:
    """Text shard (one or more files) -> its instances, in memory.

    `tokenizer` may be passed to reuse one across shards (it must match `vocab`/`lowercase`);
    `progress(n)` is called with each block of bytes read.
    """
    seed = cfg.random_seed if seed is None else seed
    t0 = time.perf_counter()
    if tokenizer is not None and (tokenizer.vocab.sha256 != vocab.sha256 or tokenizer.lowercase != lowercase):
        raise ValueError("tokenizer was built for another vocab or casing")
    # A tokenizer made here (and its piece cache) is dropped before the instance arrays are made.
    documents = read_documents(inputs, tokenizer or WordPiece(vocab, lowercase=lowercase),
                               errors=errors, progress=progress)
    t1 = time.perf_counter()
    instances = create_instances(documents, vocab, cfg, seed=seed)
    t2 = time.perf_counter()
    return Shard(instances, generation_attrs(vocab, cfg, lowercase, seed), {
        "documents": documents.num_documents,
        "sentences": documents.num_sentences,
        "tokens": documents.num_tokens,
        "instances": len(instances),
        "seconds": {"tokenize": t1 - t0, "instances": t2 - t1},
    })
