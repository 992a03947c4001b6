"""The reference MLM/NSP instance algorithm, compiled (`bertdata.instances._engine`), bit-exact with the reference.

The reference draws every random number from one `random.Random(seed)`; the C loop replays
CPython's Mersenne Twister (`random()`, `_randbelow` by rejection on the top bits, Fisher-Yates
`shuffle`, as in CPython 3.10-3.13), so the draws -- and with them the instances -- are the
same, at a small fraction of the cost. Its masking is the rule `masking` states, drawn as
`masking.mask_sequence` draws it (tests/instances/test_instances.py holds the two equal). Once per
process, before the first run, the replay is checked against this Python's `random`: a CPython
that drew differently would otherwise give other instances without a word.

An instance is kept as four offsets into the shard's flat token array (segments A and B are each
a run of consecutive sentences, trimmed at either end by truncation) plus its predictions; the
padded reference arrays are filled from that one field at a time by the `fill_*` functions.
"""

from __future__ import annotations

import functools
import platform
import random
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from bertdata.instances import _engine
from bertdata.instances._rows import fill_input_ids, fill_input_mask, fill_segment_ids
from bertdata.errors import BertdataError

if TYPE_CHECKING:
    from bertdata.instances.documents import Documents

__all__ = ["Params", "Generated", "ReplayMismatch", "generate", "verify_replay",
           "fill_input_ids", "fill_input_mask", "fill_segment_ids"]


@dataclass(frozen=True, eq=False)
class Params:
    """The algorithm's parameters, each field a keyword of `_engine.generate` (an option is a
    field here and a keyword there)."""

    max_seq_length: int
    max_predictions_per_seq: int  # the prediction columns of every instance
    short_seq_prob: float
    dupe_factor: int
    num_to_predict: np.ndarray  # [max_seq_length + 1]: the reference's prediction count for L tokens
    vocab_words: np.ndarray  # vocab_words[r]: the id of the reference's r-th vocab word
    # [vocab size] bool: the id continues the word before it, so whole-word masking masks it with
    # that word; all False masks piece by piece.
    word_continues: np.ndarray
    cls_id: int
    sep_id: int
    mask_id: int


@dataclass(frozen=True, eq=False)
class Generated:
    """A run's instances in generation order. Row i of the other arrays is instance i (rows past
    len(order) are zero): spans[i] = a_start, a_stop, b_start, b_stop in the tokens;
    random_next[i] = 1 where B comes from another document; positions/labels/shown[i] = the
    masked positions (0-padded, sorted), the original ids there and the ids shown instead."""

    order: np.ndarray  # [N] the final shuffle: output row r is instance order[r]
    spans: np.ndarray  # [>=N, 4] int64
    random_next: np.ndarray  # [>=N] int8
    positions: np.ndarray  # [>=N, P] uint16, or int32 past 65,536 tokens a sequence
    labels: np.ndarray  # [>=N, P] in the tokens' dtype
    shown: np.ndarray  # [>=N, P] in the tokens' dtype


class ReplayMismatch(BertdataError):
    """This Python's `random` no longer draws what the compiled kernel replays."""


def generate(seed: int, documents: Documents, params: Params, capacity: int) -> Generated:
    """The reference algorithm on `documents` with `random.Random(seed)`. `capacity` is a
    guess at the number of instances: a short guess costs one rerun, a long one memory."""
    _check_replay_once()
    start = _state(random.Random(seed))
    state = start.copy()
    outputs = _outputs(capacity, documents.tokens.dtype, params)
    count = _run(state, documents, params, outputs)
    if count > capacity:
        # The C loop counted every instance, so one rerun from the same state into arrays of
        # exactly that size is enough.
        state = start
        outputs = _outputs(count, documents.tokens.dtype, params)
        _run(state, documents, params, outputs)
    order = np.arange(count)
    _engine.shuffle(state, order)
    return Generated(order=order, **outputs)


def _run(state: np.ndarray, documents: Documents, params: Params, outputs: dict[str, np.ndarray]) -> int:
    return _engine.generate(state, tokens=documents.tokens, sentence_offsets=documents.sentence_offsets,
                          doc_offsets=documents.doc_offsets,
                          **{f.name: getattr(params, f.name) for f in fields(params)}, **outputs)


def _outputs(rows: int, token_dtype: np.dtype, params: Params) -> dict[str, np.ndarray]:
    predictions = (rows, params.max_predictions_per_seq)
    return {"spans": np.zeros((rows, 4), np.int64), "random_next": np.zeros(rows, np.int8),
            # A position is below max_seq_length; uint16 halves the largest of these arrays.
            "positions": np.zeros(predictions, np.uint16 if params.max_seq_length <= 1 << 16 else np.int32),
            "labels": np.zeros(predictions, token_dtype), "shown": np.zeros(predictions, token_dtype)}


def _mismatch(what: str) -> ReplayMismatch:
    return ReplayMismatch(
        f"this Python's random ({platform.python_implementation()} {platform.python_version()}) no longer "
        f"matches the Mersenne Twister stream bertdata's compiled kernel replays ({what}), so its "
        f"instances would differ from the reference's; use a CPython whose random matches (3.10 to 3.13 do)")


def _state(rng: random.Random) -> np.ndarray:
    """`rng`'s Mersenne Twister as the kernel takes it: its 624 words and index."""
    version, internal, _gauss = rng.getstate()
    if version != 3 or len(internal) != 625:
        raise _mismatch(f"getstate() gives version {version} with {len(internal)} words")
    return np.array(internal, dtype=np.int64)


# Draws the check compares: 0 is random(), any other bound b randint(lo, lo + b - 1), as the
# kernel draws randint(0, ...), randint(1, ...) and randint(2, ...). Randbelow rejects on the top
# bits of a word, so bounds span bit lengths 1 to 32, at and around their powers of two.
_CHECK_BOUNDS = (0, 1, 2, 3, 0, 4, 5, 7, 8, 9, 0, 100, 127, 128, 129, 0, 1000, 65535, 65536, 65537, 0,
                 2**24 + 1, 2**31 - 1, 2**31, 2**31 + 1, 0, 2**32 - 1, 3, 0)
# A shuffle of this many items draws below 1000, 999, ... 2: bit lengths 10 down to 1.
_CHECK_SHUFFLE = 1000


def verify_replay(rng: random.Random) -> None:
    """Raise ReplayMismatch unless the kernel's replay, started from `rng`'s state, draws what
    `rng` draws (random(), randint over every bit length, shuffle) and ends in its state."""
    state = _state(rng)
    expected = [rng.random() if b == 0 else rng.randint(k % 3, k % 3 + b - 1) - k % 3
                for k, b in enumerate(_CHECK_BOUNDS)]
    shuffled = list(range(_CHECK_SHUFFLE))
    rng.shuffle(shuffled)
    drawn = _engine.replay(state, np.array(_CHECK_BOUNDS, dtype=np.int64))
    replayed = np.arange(_CHECK_SHUFFLE)
    _engine.shuffle(state, replayed)
    if drawn != expected:
        raise _mismatch("random() or randint() drew other numbers")
    if replayed.tolist() != shuffled:
        raise _mismatch("shuffle() gave another order")
    if state.tolist() != list(rng.getstate()[1]):
        raise _mismatch("the generator ended in another state")


@functools.cache
def _check_replay_once() -> None:
    verify_replay(random.Random(12345))
