"""A text's words and n-grams as 64-bit hashes, computed over its characters with numpy.

A word is a run of word characters (those of Python's `\\w`: letters and digits of any script,
`_`) of the lowercased text: punctuation and spacing never tell two copies apart. Each word's hash
is a polynomial hash of its code points, found for every word at once from one prefix sum (no
Python object per word, no regular expression: either costs more than the hashing), then mixed;
an n-gram's hash mixes its words' hashes in order. The same text gives the same hashes in every
process (Python's own `hash` of a string does not).
"""

from __future__ import annotations

import functools
import sys

import numpy as np

_P = np.uint64(0x100000001B3)  # FNV's prime: odd, so invertible modulo 2**64
_P_INV = np.uint64(pow(int(_P), -1, 1 << 64))
# Odd constants that weigh an n-gram's words by their place (the golden ratio's multiples).
_PLACE = np.array([(0x9E3779B97F4A7C15 * (2 * k + 1)) & ((1 << 64) - 1) for k in range(64)], dtype=np.uint64)
MAX_NGRAM = len(_PLACE)

_powers: dict[str, np.ndarray] = {}


def _power_table(name: str, base: np.uint64, n: int) -> np.ndarray:
    """base**0 ... base**(n - 1) modulo 2**64, grown as longer texts come."""
    table = _powers.get(name)
    if table is None or len(table) < n:
        size = max(n, 2 * len(table) if table is not None else 1 << 16)
        table = np.full(size, base, dtype=np.uint64)
        table[0] = 1
        with np.errstate(over="ignore"):
            table = np.cumprod(table, dtype=np.uint64)
        _powers[name] = table
    return table[:n]


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: every input bit reaches every output bit."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


@functools.cache
def _word_characters() -> np.ndarray:
    """Whether each code point is a word character, as `\\w` decides it (alphanumeric, or `_`)."""
    table = np.fromiter((chr(c).isalnum() for c in range(sys.maxunicode + 1)), dtype=bool,
                        count=sys.maxunicode + 1)
    table[ord("_")] = True
    return table


def word_hashes(text: str) -> np.ndarray:
    """The hash of every word of `text`, in order (uint64)."""
    data = np.frombuffer(text.lower().encode("utf-32-le"), dtype=np.uint32)
    if not len(data):
        return np.zeros(0, dtype=np.uint64)
    inside = _word_characters()[data]
    edges = np.flatnonzero(np.diff(np.concatenate(([False], inside, [False])).astype(np.int8)))
    starts, ends = edges[0::2], edges[1::2]
    # prefix[i] = sum of char_j * P**-j for j < i; the word [s, e) hashes to
    # P**e * (prefix[e] - prefix[s]) = sum of char_j * P**(e - j): its characters alone decide it.
    with np.errstate(over="ignore"):
        weighted = data.astype(np.uint64) * _power_table("inv", _P_INV, len(data))
        prefix = np.concatenate(([np.uint64(0)], np.cumsum(weighted, dtype=np.uint64)))
        raw = _power_table("p", _P, len(data) + 1)[ends] * (prefix[ends] - prefix[starts])
    return mix64(raw)


def ngram_hashes(words: np.ndarray, n: int) -> np.ndarray:
    """The hash of every run of `n` consecutive words (a text of fewer words: none)."""
    if not 1 <= n <= MAX_NGRAM:
        raise ValueError(f"n-grams of 1 to {MAX_NGRAM} words (got {n})")
    count = len(words) - n + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    acc = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            acc += mix64(words[k:k + count] ^ np.uint64(k)) * _PLACE[k]
    return mix64(acc)
