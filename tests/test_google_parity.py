"""Whole-word masking against Google's own create_pretraining_data.py --do_whole_word_mask=True.

Needs a checkout of google-research/bert named by BERTDATA_GOOGLE_BERT (see google_bert.py) and
../shared; skipped without them. Google's script is pure Python, so these tests are slow.
"""

from __future__ import annotations

import pytest

from bertdata.config import InstanceConfig
from bertdata.formats.hdf5io import read_shard
from bertdata.instances.create import create_instances
from bertdata.instances.documents import read_documents
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.vocab import load_vocab
from conftest import PARITY_128, PARITY_512, SHARD_A, VOCAB, WIKI_FRAGMENT, need_shared, run_cli
from google_bert import checkout, instances
from test_parity import assert_identical

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def google():
    return checkout()


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """The parity shard, and the real dump fragment cleaned and split into one training and one
    test text shard by `bertdata build`."""
    need_shared(WIKI_FRAGMENT)
    out = tmp_path_factory.mktemp("fragment")
    run_cli("build", "--wiki-only", "--dump", WIKI_FRAGMENT, "--vocab", VOCAB, "--stop-after", "text",
            "--training-shards", "1", "--test-shards", "1", "--workers", "1", "--output", out)
    return {"parity": [SHARD_A], "fragment": sorted(out.glob("sharded_*/*/*.txt"))}


@pytest.fixture(scope="module")
def vocabs(tmp_path_factory):
    """The standard uncased vocab, and a cased one trained on the parity shard (no cased vocab is
    in ../shared)."""
    cased = tmp_path_factory.mktemp("cased") / "vocab.txt"
    run_cli("vocab", SHARD_A, "--output", cased, "--cased", "--size", "8000")
    return {"uncased": VOCAB, "cased": cased}


@pytest.mark.parametrize("text", ["parity", "fragment"])
@pytest.mark.parametrize("casing", ["uncased", "cased"])
@pytest.mark.parametrize("seq, pred", [(128, 20), (512, 80)])
@pytest.mark.parametrize("seed", [12345, 7])
def test_whole_word_masking_equals_googles(google, texts, vocabs, text, casing, seq, pred, seed):
    cfg = InstanceConfig(max_seq_length=seq, max_predictions_per_seq=pred, dupe_factor=2, random_seed=seed,
                         masking_scheme="whole-word")
    lowercase = casing == "uncased"
    vocab = load_vocab(vocabs[casing])
    ours = create_instances(read_documents(texts[text], WordPiece(vocab, lowercase=lowercase)), vocab, cfg)
    theirs = instances(google, texts[text], vocabs[casing], lowercase=lowercase, whole_word=True,
                       max_seq_length=seq, max_predictions_per_seq=pred, masked_lm_prob=cfg.masked_lm_prob,
                       short_seq_prob=cfg.short_seq_prob, dupe_factor=cfg.dupe_factor, random_seed=seed)
    assert_identical(ours.arrays(), theirs)


@pytest.mark.parametrize("vector, seq, pred, dupe", [(PARITY_128, 128, 20, 5), (PARITY_512, 512, 80, 2)])
def test_googles_token_masking_is_nvidias(google, vector, seq, pred, dupe):
    """Google's script without whole-word masking makes the instances of NVIDIA's, whose
    output the parity vectors are."""
    need_shared(vector)
    theirs = instances(google, [SHARD_A], VOCAB, lowercase=True, whole_word=False, max_seq_length=seq,
                       max_predictions_per_seq=pred, masked_lm_prob=0.15, short_seq_prob=0.1, dupe_factor=dupe,
                       random_seed=12345)
    assert_identical(theirs, read_shard(vector))
