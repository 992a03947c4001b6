"""The masking rule's one home (bertdata.instances.masking): its sequential form is what the
compiled kernel replays (tests/instances/test_instances.py holds the kernel equal to a port of the reference
that masks through `mask_sequence`); here its batch form, which the bench and the shard checks
use, is held equal to the sequential one."""

from __future__ import annotations

import random

import numpy as np
import pytest

from bertdata.instances import masking

CLS, SEP, MASK = 2, 3, 4
VOCAB_SIZE = 40
# Ids 20.. continue the word before them (a "##" piece).
CONTINUES = np.arange(VOCAB_SIZE) >= 20


@pytest.mark.parametrize("prob", [0.15, 0.1, 0.2, 0.5, 0.99, 0.125, 1 / 3])
def test_the_count_is_the_references_python_round(prob):
    n = np.arange(4097)
    expected = [min(20, max(1, int(round(k * prob)))) for k in n]
    assert masking.prediction_count(n, prob, 20).tolist() == expected
    assert int(masking.prediction_count(25, 0.1, 20)) == 2  # round(2.5) is 2: half to even


def random_rows(rng: random.Random, rows: int, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows laid out as [CLS] A [SEP] B [SEP] then padding, with pieces that continue words (one
    first in B, after the [SEP]) and a [SEP] typed in the text now and then."""
    ids = np.zeros((rows, seq_len), np.int64)
    real = np.zeros((rows, seq_len), bool)
    for r in range(rows):
        length = rng.randint(5, seq_len)
        body = [rng.randrange(5, VOCAB_SIZE) for _ in range(length - 3)]
        if rng.random() < 0.2:
            body[rng.randrange(len(body))] = SEP
        cut = rng.randint(1, len(body) - 1)
        ids[r, :length] = [CLS, *body[:cut], SEP, *body[cut:], SEP]
        real[r, :length] = True
    return ids, real


def test_the_batch_words_are_the_sequential_words():
    ids, real = random_rows(random.Random(0), 200, 48)
    candidate = real & masking.is_candidate(ids, CLS, SEP)
    continues, before = masking.word_continuations(ids, candidate, CONTINUES)
    for r in range(len(ids)):
        tokens = ids[r, :real[r].sum()].tolist()
        words = masking.words_of(tokens, CLS, SEP, CONTINUES)
        assert [k for w in words for k in w] == np.flatnonzero(candidate[r]).tolist()
        assert [k for w in words for k in w[1:]] == np.flatnonzero(continues[r]).tolist()
        assert all(before[r, k] == k0 for w in words for k0, k in zip(w, w[1:]))


def test_the_batch_picks_the_words_the_sequential_rule_takes_in_the_same_order():
    rng = random.Random(1)
    ids, real = random_rows(rng, 300, 40)
    candidate = real & masking.is_candidate(ids, CLS, SEP)
    count = masking.prediction_count(real.sum(axis=1), 0.3, 6)
    keys = np.random.default_rng(1).random(ids.shape)
    picked = masking.pick_words(ids, candidate, count, CONTINUES, keys)
    for r in range(len(ids)):
        words = masking.words_of(ids[r, :real[r].sum()].tolist(), CLS, SEP, CONTINUES)
        taken: list[int] = []
        for w in sorted(range(len(words)), key=lambda w: keys[r, w]):  # word w's key is keys[r, w]
            if len(taken) >= count[r]:
                break
            if len(taken) + len(words[w]) <= count[r]:
                taken += words[w]
        assert np.flatnonzero(picked[r]).tolist() == sorted(taken)


def test_the_shown_ids_follow_the_sequential_branches():
    rng = np.random.default_rng(2)
    original = rng.integers(5, VOCAB_SIZE, 100_000)
    mask_draw, keep_draw = rng.random(len(original)), rng.random(len(original))
    words = rng.integers(0, VOCAB_SIZE, len(original))
    shown = masking.shown_ids(original, mask_draw, keep_draw, MASK, words)
    expected = [MASK if m < 0.8 else o if k < 0.5 else w for o, m, k, w in zip(original, mask_draw, keep_draw, words)]
    assert shown.tolist() == expected
    assert np.mean(shown == MASK) == pytest.approx(0.8, abs=0.01)


def test_the_sequential_rule_masks_whole_words_at_most_the_count():
    rng = random.Random(3)
    for _ in range(200):
        tokens = [CLS, *(rng.randrange(5, VOCAB_SIZE) for _ in range(rng.randint(2, 30))), SEP]
        n = int(masking.prediction_count(len(tokens), 0.4, 8))
        masked = masking.mask_sequence(tokens, rng, n, CLS, SEP, MASK, range(VOCAB_SIZE), CONTINUES)
        positions = [k for k, _ in masked]
        assert positions == sorted(set(positions)) and len(positions) <= n
        assert CLS not in (tokens[k] for k in positions) and SEP not in (tokens[k] for k in positions)
        chosen = set(positions)
        for word in masking.words_of(tokens, CLS, SEP, CONTINUES):
            assert len(chosen & set(word)) in (0, len(word))
