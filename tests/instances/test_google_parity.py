"""Google's create_pretraining_data.py on real text: token masking against the bert-tensorflow
1.0.4 wheel's script run now, on the fragment as today's cleaner makes it (cased and uncased, both
phases), and whole-word masking against the golden arrays that Google's current script made on
tests/data/shard_A.txt (tests/make_test_data.py; the wheel predates `--do_whole_word_mask`)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import testcache
from bertdata.config import InstanceConfig
from bertdata.instances.create import create_instances
from bertdata.instances.documents import read_documents
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.vocab import load_vocab
from conftest import CASED_VOCAB, DATA, SAMPLE_VOCAB, SHARD_A, VOCAB, WIKI_FRAGMENT, need, run_cli
from google_bert import instances
from shards import assert_identical

pytestmark = pytest.mark.slow

GOLDENS = json.loads((DATA / "whole_word.json").read_text())
BLOCK = 256  # rows per block digest, as tests/make_test_data.py cut them


@pytest.fixture(scope="module")
def fragment(tmp_path_factory):
    """The real dump fragment cleaned and split into one training and one test text shard by
    `bertdata build`, as the cleaner does today."""
    out = tmp_path_factory.mktemp("fragment")
    run_cli("build", "--wiki-only", "--dump", need(WIKI_FRAGMENT), "--vocab", SAMPLE_VOCAB, "--stop-after", "text",
            "--training-shards", "1", "--test-shards", "1", "--workers", "1", "--output", out)
    return sorted(out.glob("sharded_*/*/*.txt"))


@pytest.mark.parametrize("vocab_file", [VOCAB, CASED_VOCAB], ids=["uncased", "cased"])
@pytest.mark.parametrize("seq, pred", [(128, 20), (512, 80)])
def test_token_masking_equals_googles_on_todays_text(fragment, vocab_file, seq, pred):
    cfg = InstanceConfig(max_seq_length=seq, max_predictions_per_seq=pred, dupe_factor=2, random_seed=7)
    lowercase = vocab_file == VOCAB
    vocab = load_vocab(vocab_file)
    ours = create_instances(read_documents(fragment, WordPiece(vocab, lowercase=lowercase)), vocab, cfg)
    theirs = instances(need(testcache.GOOGLE_BERT), fragment, vocab_file, lowercase=lowercase, whole_word=False,
                       max_seq_length=seq, max_predictions_per_seq=pred, masked_lm_prob=cfg.masked_lm_prob,
                       short_seq_prob=cfg.short_seq_prob, dupe_factor=cfg.dupe_factor, random_seed=cfg.random_seed)
    assert len(theirs["input_ids"]) > 1000
    assert_identical(ours.arrays(), theirs)


def sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_whole_word_masking_equals_googles_golden_arrays(name):
    golden = GOLDENS[name]
    cfg = InstanceConfig(max_seq_length=golden["max_seq_length"], max_predictions_per_seq=golden["max_predictions_per_seq"],
                         masked_lm_prob=golden["masked_lm_prob"], short_seq_prob=golden["short_seq_prob"],
                         dupe_factor=golden["dupe_factor"], random_seed=golden["random_seed"], masking_scheme="whole-word")
    vocab = load_vocab(DATA / golden["vocab"])
    ours = create_instances(read_documents(SHARD_A, WordPiece(vocab, lowercase=golden["lowercase"])), vocab, cfg).arrays()
    for field, expected in golden["arrays"].items():
        got = ours[field]
        assert (list(got.shape), got.dtype.str) == (expected["shape"], expected["dtype"]), field
        if sha256(got) != expected["sha256"]:
            blocks = [sha256(got[start:start + BLOCK]) for start in range(0, len(got), BLOCK)]
            first = next(i for i, (a, b) in enumerate(zip(blocks, expected["blocks"])) if a != b)
            pytest.fail(f"{field}: differs from Google's in rows {first * BLOCK}-{(first + 1) * BLOCK - 1}")
