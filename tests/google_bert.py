"""Google's create_pretraining_data.py (google-research/bert), run in this process, for parity tests.

The script imports TensorFlow for flags, file reading, logging and TFRecord writing only; a stub
module stands in for it, with `tf.gfile.GFile` reading as TensorFlow does (UTF-8, lines end at
"\\n" alone). Its `create_training_instances` is called directly and its instances laid out as
the reference's six hdf5 arrays. Neither file is part of bertdata: `BERTDATA_GOOGLE_BERT` names
a checkout of https://github.com/google-research/bert (create_pretraining_data.py and
tokenization.py); tests that need it skip without it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import random
import sys
import types
from pathlib import Path

import numpy as np
import pytest

ENV = "BERTDATA_GOOGLE_BERT"


def checkout() -> Path:
    """The checkout `BERTDATA_GOOGLE_BERT` names, or a skip of the calling test."""
    folder = os.environ.get(ENV)
    if not folder:
        pytest.skip(f"{ENV} is not set: point it at a checkout of google-research/bert to compare with "
                    "Google's create_pretraining_data.py")
    path = Path(folder)
    missing = [name for name in ("create_pretraining_data.py", "tokenization.py") if not (path / name).is_file()]
    if missing:
        pytest.fail(f"{ENV}={folder} lacks {', '.join(missing)}")
    return path


class _Flags(types.SimpleNamespace):
    def __init__(self):
        super().__init__()
        for kind in ("string", "bool", "integer", "float"):
            setattr(self, f"DEFINE_{kind}", self._define)
        self.FLAGS = types.SimpleNamespace()

    def _define(self, name, default, _help):
        setattr(self.FLAGS, name, default)


def _gfile(path, mode="r"):
    return open(path, mode, encoding="utf-8", newline="\n")


def _stub_tensorflow() -> types.ModuleType:
    tf = types.ModuleType("tensorflow")
    tf.flags = _Flags()
    tf.gfile = types.SimpleNamespace(GFile=_gfile, Glob=lambda pattern: [pattern])
    tf.logging = logging
    return tf


def load(folder: Path) -> types.ModuleType:
    """A fresh copy of Google's script (and its tokenization module) on the stub TensorFlow."""
    saved = {name: sys.modules.get(name) for name in ("tensorflow", "tokenization")}
    sys.modules["tensorflow"] = _stub_tensorflow()
    try:
        modules = {}
        for name in ("tokenization", "create_pretraining_data"):
            spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
            modules[name] = importlib.util.module_from_spec(spec)
            sys.modules[name] = modules[name]
            spec.loader.exec_module(modules[name])
        return modules["create_pretraining_data"]
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def instances(folder: Path, inputs, vocab_file, *, lowercase: bool, whole_word: bool, max_seq_length: int,
              max_predictions_per_seq: int, masked_lm_prob: float, short_seq_prob: float, dupe_factor: int,
              random_seed: int) -> dict[str, np.ndarray]:
    """Google's instances for the text files `inputs`, as the six arrays NVIDIA's script writes."""
    script = load(folder)
    script.FLAGS.do_whole_word_mask = whole_word
    tokenizer = script.tokenization.FullTokenizer(vocab_file=str(vocab_file), do_lower_case=lowercase)
    made = script.create_training_instances([str(p) for p in inputs], tokenizer, max_seq_length, dupe_factor,
                                            short_seq_prob, masked_lm_prob, max_predictions_per_seq,
                                            random.Random(random_seed))
    n, seq, pred = len(made), max_seq_length, max_predictions_per_seq
    out = {"input_ids": np.zeros((n, seq), "i4"), "input_mask": np.zeros((n, seq), "i1"),
           "segment_ids": np.zeros((n, seq), "i1"), "masked_lm_positions": np.zeros((n, pred), "i4"),
           "masked_lm_ids": np.zeros((n, pred), "i4"), "next_sentence_labels": np.zeros(n, "i1")}
    for row, instance in enumerate(made):
        length, masked = len(instance.tokens), len(instance.masked_lm_positions)
        out["input_ids"][row, :length] = tokenizer.convert_tokens_to_ids(instance.tokens)
        out["input_mask"][row, :length] = 1
        out["segment_ids"][row, :length] = instance.segment_ids
        out["masked_lm_positions"][row, :masked] = instance.masked_lm_positions
        out["masked_lm_ids"][row, :masked] = tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
        out["next_sentence_labels"][row] = int(instance.is_random_next)
    return out
