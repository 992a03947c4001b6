"""Google's create_pretraining_data.py (google-research/bert), run in this process, for parity tests.

Two copies of the script serve: the one the `bert-tensorflow` 1.0.4 wheel ships (token masking,
the same instances as NVIDIA's script; tests/testcache.py fetches it), which makes the reference
instances at test time from any text and vocab; and Google's current one (it adds
`--do_whole_word_mask`), which tests/make_goldens.py ran once to make the whole-word golden arrays
under tests/data/. The script imports TensorFlow (and the wheel's tokenization absl and six) for
flags, file reading and logging only; stub modules stand in for them, with `tf.gfile.GFile`
reading as TensorFlow does (UTF-8, lines end at "\\n" alone). Its `create_training_instances` is
called directly and its instances laid out as the reference's six hdf5 arrays, and
`write_reference` writes them as NVIDIA's script does.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import random
import sys
import types
from pathlib import Path

import h5py
import numpy as np

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
    tf.compat = types.SimpleNamespace(v1=tf)
    return tf


def _stubs() -> dict[str, types.ModuleType]:
    tf = _stub_tensorflow()
    absl = types.ModuleType("absl")
    absl.flags = _Flags()
    six = types.ModuleType("six")
    six.PY2, six.PY3 = False, True
    return {"tensorflow": tf, "tensorflow.compat": tf.compat, "tensorflow.compat.v1": tf, "absl": absl,
            "absl.flags": absl.flags, "six": six}


def load(folder: Path) -> types.ModuleType:
    """A fresh copy of Google's script (and its tokenization module) on the stub TensorFlow: from
    a checkout of google-research/bert (both files at its top), or from the wheel's `bert/`."""
    folder = Path(folder)
    wheel = (folder / "bert" / "create_pretraining_data.py").is_file()
    where = folder / "bert" if wheel else folder
    missing = [name for name in ("create_pretraining_data.py", "tokenization.py") if not (where / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{where} lacks {', '.join(missing)}")
    stubs = _stubs()
    names = [*stubs, "tokenization", "bert", "bert.tokenization", "create_pretraining_data"]
    saved = {name: sys.modules.get(name) for name in names}
    sys.modules.update(stubs)
    try:
        modules = {}
        if wheel:
            sys.modules["bert"] = types.ModuleType("bert")
        for name in ("tokenization", "create_pretraining_data"):
            qualified = f"bert.{name}" if wheel else name
            spec = importlib.util.spec_from_file_location(qualified, where / f"{name}.py")
            modules[name] = importlib.util.module_from_spec(spec)
            sys.modules[qualified] = modules[name]
            if wheel and name == "tokenization":
                sys.modules["bert"].tokenization = modules[name]
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
    if whole_word or hasattr(script.FLAGS, "do_whole_word_mask"):
        if not hasattr(script.FLAGS, "do_whole_word_mask"):
            raise ValueError(f"{folder}: this copy of the script has no whole-word masking")
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


def write_reference(arrays: dict[str, np.ndarray], path: Path) -> Path:
    """The six arrays written as NVIDIA's create_pretraining_data.py writes its hdf5 (one gzip
    dataset per array, the dtypes it gives, no attributes), under a temporary name first."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with h5py.File(partial, "w") as f:
        for name, dtype in (("input_ids", "i4"), ("input_mask", "i1"), ("segment_ids", "i1"),
                            ("masked_lm_positions", "i4"), ("masked_lm_ids", "i4"), ("next_sentence_labels", "i1")):
            f.create_dataset(name, data=arrays[name], dtype=dtype, compression="gzip")
    partial.replace(path)
    return path
