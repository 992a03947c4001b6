"""What `dedup:` asks for, and a document's exact key, MinHash signature and band keys.

A signature is bands x rows minimum hashes of the document's word n-grams (shingles), each
under its own hash function h_i(x) = (a_i x + b_i mod 2**64) >> 32. Two documents whose
shingle sets have Jaccard similarity J agree on each minimum with probability about J, and
share at least one band (all `rows` minima of it) with probability 1 - (1 - J**rows)**bands:
datatrove's defaults (5-grams, 14 bands of 8) put the threshold, where that is 1/2, near 0.72.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from bertdata.dedup.words import MAX_NGRAM, mix64, ngram_hashes, word_hashes
from bertdata.errors import BertdataError

# More hash functions than this is a signature larger than the text it stands for.
MAX_HASHES = 1024
# Shingles hashed per pass: bounds the (hashes x shingles) array of a long document.
CHUNK = 4096


@dataclass(frozen=True)
class DedupConfig:
    """`dedup:` of a recipe (or --dedup): exact copies and MinHash near-duplicates removed."""

    exact: bool = True
    minhash: bool = True
    ngram: int = 5
    bands: int = 14
    rows: int = 8
    seed: int = 1
    # A pair that shares a band is joined only where its signatures agree on this share of their
    # minima: a band shared by chance (5% of pairs at Jaccard 0.5 with 14 x 8) is not a duplicate.
    # 0 joins every pair that shares a band, as datatrove does.
    min_similarity: float = 0.6

    def __post_init__(self) -> None:
        if not self.exact and not self.minhash:
            raise BertdataError("dedup: asks for neither exact: nor minhash:")
        if isinstance(self.ngram, bool) or not isinstance(self.ngram, int) or not 1 <= self.ngram <= MAX_NGRAM:
            raise BertdataError(f"dedup: minhash ngram must be a whole number from 1 to {MAX_NGRAM} (got {self.ngram!r})")
        for key in ("bands", "rows"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BertdataError(f"dedup: minhash {key} must be a whole number of 1 or more (got {value!r})")
        value = self.min_similarity
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise BertdataError(f"dedup: minhash min_similarity must be a number from 0 to 1 (got {value!r})")
        if self.bands * self.rows > MAX_HASHES:
            raise BertdataError(f"dedup: minhash bands x rows is {self.bands * self.rows:,} hash functions, beyond "
                                f"reason (at most {MAX_HASHES:,}; datatrove's default is 14 x 8 = 112)")

    @property
    def hashes(self) -> int:
        return self.bands * self.rows

    @property
    def threshold(self) -> float:
        """The Jaccard similarity at which a pair is found half the time."""
        return (1 / self.bands) ** (1 / self.rows)

    def record(self) -> dict:
        return {"exact": self.exact, "minhash": {"ngram": self.ngram, "bands": self.bands, "rows": self.rows,
                                                 "seed": self.seed, "min_similarity": self.min_similarity}
                if self.minhash else None}


class Signer:
    """Signatures under one DedupConfig (its hash functions drawn once from its seed)."""

    def __init__(self, cfg: DedupConfig) -> None:
        self.cfg = cfg
        stream = hashlib.shake_256(f"bertdata-minhash\0{cfg.seed}".encode()).digest(16 * cfg.hashes)
        ab = np.frombuffer(stream, dtype="<u8").reshape(cfg.hashes, 2)
        self.a = (ab[:, 0] | np.uint64(1))[:, None]  # odd: a bijection of the 64-bit words
        self.b = ab[:, 1][:, None]

    def signature(self, text: str) -> np.ndarray:
        """The minimum of each hash function over the text's shingles (uint32); a text of fewer
        words than an n-gram is one shingle of all its words, and one of none is all ones."""
        words = word_hashes(text)
        shingles = ngram_hashes(words, min(self.cfg.ngram, len(words))) if len(words) else words
        # The shift to 32 bits keeps order: the minimum is taken first, on the 64-bit values.
        low = np.full(self.cfg.hashes, np.iinfo(np.uint64).max, dtype=np.uint64)
        values = np.empty((self.cfg.hashes, min(CHUNK, len(shingles))), dtype=np.uint64)
        for start in range(0, len(shingles), CHUNK):
            chunk = shingles[start:start + CHUNK]
            out = values[:, :len(chunk)]
            np.multiply(chunk[None, :], self.a, out=out)
            np.add(out, self.b, out=out)
            np.minimum(low, out.min(axis=1), out=low)
        low = (low >> np.uint64(32)).astype(np.uint32)
        return low

    def bands(self, signature: np.ndarray) -> np.ndarray:
        """One key per band (uint64): its rows' minima hashed together."""
        rows = signature.reshape(self.cfg.bands, self.cfg.rows).astype(np.uint64)
        acc = np.zeros(self.cfg.bands, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for r in range(self.cfg.rows):
                acc = mix64(acc * np.uint64(0x100000001B3) + rows[:, r])
        return acc


def exact_key(text: bytes) -> bytes:
    """What exact copies share: the BLAKE2b of their text (cleaned, as a text shard holds it: UTF-8),
    where its sentences were split aside."""
    return hashlib.blake2b(text.replace(b"\n", b" "), digest_size=16, person=b"bertdata-exact").digest()


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Two signatures' estimate of their documents' Jaccard similarity: the share of minima they agree on."""
    return float(np.mean(a == b))
