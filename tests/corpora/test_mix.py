"""The mix: a document's draw depends on (seed, corpus, id) alone; cuts meet each corpus's share."""

from __future__ import annotations

import random

import numpy as np

from bertdata.corpora.mix import BINS, Tally, cuts, draw


def tallies_of(docs: dict[str, list[tuple[str, int]]], seed: int = 0) -> dict[str, Tally]:
    found = {}
    for name, items in docs.items():
        tally = found[name] = Tally()
        for doc_id, tokens in items:
            tally.add(draw(seed, name, doc_id), tokens)
    return found


def test_a_draw_is_the_same_for_the_same_seed_corpus_and_id_only():
    assert draw(0, "edu", "a") == draw(0, "edu", "a")
    assert len({draw(0, "edu", "a"), draw(1, "edu", "a"), draw(0, "c4", "a"), draw(0, "edu", "b")}) == 4
    assert all(0 <= draw(3, "x", str(i)) < BINS for i in range(1000))


def test_the_corpus_that_runs_out_first_sets_the_total_and_shares_are_met():
    rng = random.Random(1)
    docs = {name: [(f"{name}{i}", rng.randint(50, 2000)) for i in range(n)]
            for name, n in (("edu", 4000), ("c4", 3000), ("books", 100))}
    shares = {"edu": 0.5, "c4": 0.3, "books": 0.2}
    tallies = tallies_of(docs)
    found = cuts(tallies, shares)
    assert found["books"] == BINS  # the smallest against its share: all of it
    kept = {name: int(tallies[name].tokens[:found[name]].sum()) for name in shares}
    total = sum(kept.values())
    assert all(abs(kept[name] / total - share) < 0.002 for name, share in shares.items())


def test_the_sparse_form_sums_to_the_same_tally():
    whole = tallies_of({"a": [(str(i), i) for i in range(500)]})["a"]
    parts = [tallies_of({"a": [(str(i), i) for i in range(k, 500, 3)]})["a"] for k in range(3)]
    summed = Tally()
    for part in parts:
        summed.add_sparse(*part.sparse())
    assert np.array_equal(summed.tokens, whole.tokens) and np.array_equal(summed.documents, whole.documents)


def test_small_corpora_are_cut_to_the_shares_that_come_nearest():
    # A few large documents each: a cut nearest each budget alone misses, the refined ones less.
    rng = random.Random(5)
    docs = {name: [(f"{name}{i}", rng.randint(1000, 20000)) for i in range(n)]
            for name, n in (("edu", 20), ("c4", 19), ("dolma", 19), ("books", 19))}
    shares = {"edu": 0.5, "c4": 0.3, "dolma": 0.1, "books": 0.1}
    tallies = tallies_of(docs)
    found = cuts(tallies, shares)
    kept = {name: int(tallies[name].tokens[:found[name]].sum()) for name in shares}
    total = sum(kept.values())
    assert max(abs(kept[name] / total - share) for name, share in shares.items()) < 0.02


def test_a_repeated_corpus_takes_whole_passes_before_another():
    docs = [(f"b{i}", 100) for i in range(200)]
    tally = Tally(repeat=3)
    for doc_id, tokens in docs:
        for copy in range(3):
            tally.add(draw(0, "books", doc_id, copy), tokens)
    edu = tallies_of({"edu": [(f"e{i}", 100) for i in range(200)]})["edu"]
    found = cuts({"books": tally, "edu": edu}, {"books": 0.6, "edu": 0.4})
    assert found["edu"] == BINS and BINS < found["books"] < 2 * BINS  # all of edu, books once and a half
    assert int(tally.tokens[:found["books"]].sum()) == 30_000
    assert all(draw(0, "books", d, 1) == draw(0, "books", d) + BINS for d, _ in docs[:5])
