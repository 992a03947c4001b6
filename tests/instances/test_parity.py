"""Bit-exact parity with the reference's outputs for real text: Google's create_pretraining_data.py
from the bert-tensorflow 1.0.4 wheel (NVIDIA's instances; tests/make_test_data.py checks that the
two agree byte for byte) on 40 real articles, in both phases, made at first use (conftest.need)."""

from __future__ import annotations

import numpy as np
import pytest

from bertdata import cli
from bertdata.config import InstanceConfig
from bertdata.formats.hdf5io import read_shard, shard_attrs
from bertdata.instances.create import create_instances
from bertdata.instances.documents import read_documents
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.vocab import load_vocab

from conftest import PARITY, SHARD_A, VOCAB, need
from shards import assert_identical

VECTORS = {
    "A_s12345_128_20_p15_d5.hdf5": InstanceConfig(max_seq_length=128, max_predictions_per_seq=20,
                                                  masked_lm_prob=0.15, dupe_factor=5, random_seed=12345),
    "A_s12345_512_80_p15_d2.hdf5": InstanceConfig(max_seq_length=512, max_predictions_per_seq=80,
                                                  masked_lm_prob=0.15, dupe_factor=2, random_seed=12345),
}


@pytest.mark.parametrize("vector", sorted(VECTORS))
def test_cli_output_equals_reference(tmp_path, vector):
    cfg = VECTORS[vector]
    out = tmp_path / vector
    code = cli.main([
        "instances", str(SHARD_A), "--output", str(out), "--vocab", str(VOCAB),
        "--max-seq-length", str(cfg.max_seq_length), "--max-predictions-per-seq", str(cfg.max_predictions_per_seq),
        "--masked-lm-prob", str(cfg.masked_lm_prob), "--short-seq-prob", str(cfg.short_seq_prob),
        "--dupe-factor", str(cfg.dupe_factor), "--random-seed", str(cfg.random_seed),
    ])
    assert code == 0
    assert_identical(read_shard(out), read_shard(need(PARITY) / vector))
    attrs = shard_attrs(out)
    assert attrs["max_seq_length"] == cfg.max_seq_length and attrs["random_seed"] == cfg.random_seed


def test_api_equals_reference_for_both_vectors():
    vocab = load_vocab(VOCAB)
    documents = read_documents(SHARD_A, WordPiece(vocab))
    for vector, cfg in VECTORS.items():
        instances = create_instances(documents, vocab, cfg)
        assert_identical(instances.arrays(), read_shard(need(PARITY) / vector))


def test_another_seed_differs():
    vocab = load_vocab(VOCAB)
    documents = read_documents(SHARD_A, WordPiece(vocab))
    other = create_instances(documents, vocab, VECTORS["A_s12345_128_20_p15_d5.hdf5"], seed=1)
    reference = read_shard(need(PARITY) / "A_s12345_128_20_p15_d5.hdf5")
    assert not np.array_equal(other.array("masked_lm_positions")[:100], reference["masked_lm_positions"][:100])
