"""The mix: which documents of each corpus a build keeps so that each corpus holds its share of
the output's tokens.

Each document draws a bin from a hash of (seed, corpus, document id): never of file order,
runner or worker count. A corpus keeps its documents of the lowest bins, up to its budget. The
corpus that runs out first (the smallest tokens over share) sets the total, and keeps every
document; every other corpus keeps the bins whose tokens come nearest its share of that total.
The text stage counts each corpus's tokens per bin as it reads (a `Tally`: a few hundred KB,
whatever the corpus's size) and cuts once every document has been read, so memory never grows
with the input; with 65,536 bins a cut is a document at most off on small corpora and a
1/65,536th of the corpus on large ones.
"""

from __future__ import annotations

import hashlib

import numpy as np

BINS = 1 << 16


def draw(seed: int, corpus: str, doc_id: str, copy: int = 0) -> int:
    """The document's place in its corpus's order: its bin, and a corpus read `repeat` times
    (copies 0, 1, ...) orders every copy k after all copies k - 1, each copy in its document's bin:
    a share beyond one pass takes whole passes first, then the same documents again."""
    digest = hashlib.blake2b(f"{seed}\0{corpus}\0{doc_id}".encode(), digest_size=8, person=b"bertdata-mix").digest()
    return copy * BINS + (int.from_bytes(digest, "big") >> (64 - 16))


class Tally:
    """Tokens and documents of one corpus per place (`draw`): BINS for each pass of it."""

    def __init__(self, repeat: int = 1) -> None:
        self.tokens = np.zeros(BINS * repeat, dtype=np.int64)
        self.documents = np.zeros(BINS * repeat, dtype=np.int64)

    def add(self, bin_: int, tokens: int) -> None:
        self.tokens[bin_] += tokens
        self.documents[bin_] += 1

    def remove(self, bin_: int, tokens: int) -> None:
        """A document added before, taken out again (dedup removed it)."""
        self.tokens[bin_] -= tokens
        self.documents[bin_] -= 1

    def sparse(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(bins, tokens, documents) of the bins holding documents: what crosses the launcher."""
        held = np.flatnonzero(self.documents)
        return held.astype(np.int32), self.tokens[held], self.documents[held]

    def add_sparse(self, bins: np.ndarray, tokens: np.ndarray, documents: np.ndarray) -> None:
        np.add.at(self.tokens, bins, tokens)
        np.add.at(self.documents, bins, documents)


# Rounds of moving cuts one document at a time, after the first cuts (each a few array reads).
REFINE_ROUNDS = 64


def cuts(tallies: dict[str, Tally], shares: dict[str, float]) -> dict[str, int]:
    """Per corpus, the first place (`draw`) it does not keep (its tally's length: all of them)."""
    empty = np.zeros(BINS, dtype=np.int64)
    tokens = {name: tallies[name].tokens if name in tallies else empty for name in shares}
    cumulative = {name: np.concatenate(([0], np.cumsum(t))) for name, t in tokens.items()}
    total = min(cumulative[name][-1] / shares[name] for name in shares)
    found = {}
    for name, share in shares.items():
        budget, kept = share * total, cumulative[name]
        if budget >= kept[-1]:
            found[name] = len(tokens[name])
            continue
        # The cut whose kept tokens come nearest the budget.
        above = int(np.searchsorted(kept, budget, side="left"))
        found[name] = above if kept[above] - budget <= budget - kept[above - 1] else above - 1
    return _refined(found, cumulative, tokens, shares)


def _refined(found: dict[str, int], cumulative: dict, tokens: dict, shares: dict[str, float]) -> dict[str, int]:
    """The cuts moved a document at a time while that lowers the largest miss of a share: each
    cut was nearest its budget alone, but every corpus's share is of the kept total, which all
    the cuts move (on small corpora, a document is much of a share). The corpus that sets the
    total keeps every document."""
    def miss(cuts: dict[str, int]) -> float:
        kept = {name: cumulative[name][cut] for name, cut in cuts.items()}
        total = sum(kept.values())
        return max(abs(kept[name] / total - shares[name]) for name in shares) if total else 1.0

    movable = [name for name, cut in found.items() if cut < len(tokens[name])]
    best = miss(found)
    for _ in range(REFINE_ROUNDS):
        improved = False
        for name in movable:
            held = np.flatnonzero(tokens[name])
            cut = found[name]
            before = held[held < cut]
            after = held[held >= cut]
            for candidate in ((int(before[-1]),) if len(before) else ()) + ((int(after[0]) + 1,) if len(after) else ()):
                trial = {**found, name: min(candidate, len(tokens[name]))}
                if (error := miss(trial)) < best - 1e-12:
                    found, best, improved = trial, error, True
        if not improved:
            break
    return found
