"""The masking rule of BERT's masked-LM task, stated once: the reference's
create_masked_lm_predictions, which the hdf5 shards are made with.

- Candidates: every token of `[CLS] A [SEP] B [SEP]` but [CLS] and [SEP], by id (a "[SEP]"
  typed in the text is never masked either); of a document's sample (the bench's masked-LM-only
  objective), every token but its tokenizer's special tokens, the prefix and suffix around it.
- Words: with whole-word masking a piece marked as continuing a word (a "##" piece) joins the
  word of the candidate before it -- across the [SEP] between A and B too, as the reference
  groups; with token masking every candidate is a word of its own.
- How many: min(max_predictions, max(1, round(masked_lm_prob x the sequence's tokens))), the
  tokens counting [CLS] and both [SEP]s, Python's round (half to even).
- Which: the words in a random order, each taken whole while it fits in that count and skipped
  when it would pass it.
- What is shown at a masked position: [MASK] 80% of the time, the original token 10%, a random
  vocab word 10% -- [MASK] never appears in fine-tuning, so the model must not learn that only
  [MASK] needs predicting.

`mask_sequence` is the rule on one sequence, drawing from a `random.Random` in the reference's
order; the compiled loop (`_engine.c`, through `kernel`) replays those draws and is tested equal
to it. The array functions are the same rule for a batch of rows, as the bench's dynamic masking
and the shard checks apply it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

# Of the masked positions, the share shown as [MASK]; of the rest, the share kept as they were
# (the others show a random vocab word): 80% / 10% / 10%.
MASK_SHARE = 0.8
KEEP_SHARE = 0.5


def prediction_count(num_tokens: int | np.ndarray, masked_lm_prob: float, max_predictions: int) -> np.ndarray:
    """How many positions a sequence of `num_tokens` tokens (an int or an array of them) masks:
    at most `max_predictions`, at least 1. numpy's round is half to even, as Python's, on the
    same float64 product."""
    return np.minimum(max_predictions, np.maximum(1, np.round(np.asarray(num_tokens) * masked_lm_prob))
                      ).astype(np.int64)


def is_candidate(ids: np.ndarray, *special_ids: int) -> np.ndarray:
    """Where `ids` (original tokens) may be masked: anywhere but the special tokens ([CLS] and
    [SEP]; for a sample of a document, its tokenizer's prefix and suffix)."""
    return ~np.isin(ids, special_ids)


def word_continuations(ids: np.ndarray, candidate: np.ndarray,
                       word_continues: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The words in rows of original `ids`, where `candidate` marks the pieces that may be
    masked: (continues, before), continues marking the candidates that join the word of the
    last candidate before them (a "##" piece after one), before giving that candidate's
    position (0 where there is none). With `word_continues` all False, no piece continues."""
    cols = np.arange(ids.shape[1])
    last = np.maximum.accumulate(np.where(candidate, cols, -1), axis=1)
    before = np.concatenate((np.full((len(ids), 1), -1), last[:, :-1]), axis=1)
    continues = candidate & word_continues[np.clip(ids, 0, len(word_continues) - 1)] & (before >= 0)
    return continues, np.maximum(before, 0)


def pick_words(ids: np.ndarray, candidate: np.ndarray, count: np.ndarray, word_continues: np.ndarray,
               keys: np.ndarray) -> np.ndarray:
    """[N, L] bool: per row, its words taken in the order of their `keys` ([N, L] floats in
    [0, 1), one per word by its number in the row), each whole if it fits in what is left of
    the row's `count`, else skipped."""
    n, seq_len = ids.shape
    continues, _ = word_continuations(ids, candidate, word_continues)
    word = np.cumsum(candidate & ~continues, axis=1) - 1  # each candidate's word, numbered per row
    rows = np.repeat(np.arange(n), seq_len).reshape(n, seq_len)
    sizes = np.zeros((n, seq_len), np.int64)
    np.add.at(sizes, (rows[candidate], word[candidate]), 1)
    order = np.argsort(np.where(sizes > 0, keys, 2.0), axis=1)
    taken = np.zeros(n, np.int64)
    picked = np.zeros((n, seq_len), bool)
    every = np.arange(n)
    for k in range(seq_len):
        open_rows = taken < count
        if not open_rows.any():
            break
        size = sizes[every, order[:, k]]
        fits = open_rows & (size > 0) & (taken + size <= count)
        taken += np.where(fits, size, 0)
        picked[every[fits], order[fits, k]] = True
    return candidate & picked[rows, np.maximum(word, 0)]


def shown_ids(original: np.ndarray, mask_draw: np.ndarray, keep_draw: np.ndarray, mask_id: int,
              random_words: np.ndarray) -> np.ndarray:
    """The ids shown at masked positions holding `original`, from two uniform draws each and a
    random vocab word each: [MASK], the original, or the random word (80/10/10)."""
    return np.where(mask_draw < MASK_SHARE, mask_id, np.where(keep_draw < KEEP_SHARE, original, random_words))


def words_of(tokens: Sequence[int], cls_id: int, sep_id: int, word_continues: np.ndarray) -> list[list[int]]:
    """A sequence's candidate positions grouped into words, in order."""
    words: list[list[int]] = []
    for k, t in enumerate(tokens):
        if t in (cls_id, sep_id):
            continue
        if words and word_continues[t]:
            words[-1].append(k)
        else:
            words.append([k])
    return words


def mask_sequence(tokens: Sequence[int], rng: random.Random, num_to_predict: int, cls_id: int, sep_id: int,
                  mask_id: int, vocab_words: Sequence[int], word_continues: np.ndarray) -> list[tuple[int, int]]:
    """The rule on one sequence, drawing from `rng` as the reference does: the words shuffled,
    then per masked position random() and, only where needed, a second random() and a
    randint over the vocab words. Returns (position, shown id) pairs sorted by position."""
    words = words_of(tokens, cls_id, sep_id, word_continues)
    rng.shuffle(words)
    masked: list[tuple[int, int]] = []
    for word in words:
        if len(masked) >= num_to_predict:
            break
        if len(masked) + len(word) > num_to_predict:
            continue
        for k in word:
            if rng.random() < MASK_SHARE:
                shown = mask_id
            elif rng.random() < KEEP_SHARE:
                shown = tokens[k]
            else:
                shown = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            masked.append((k, shown))
    return sorted(masked)
