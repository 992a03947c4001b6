"""Small valid calls of the compiled kernels (_engine, _rows, _wordpiece), for their tests and fuzz
targets to break one thing at a time, and the Python that `_wordpiece.text_lines` replaced."""

from __future__ import annotations

import random

import numpy as np

from bertdata.instances import kernel
from bertdata.instances.documents import Documents


SEQ, PRED, VOCAB_SIZE, CLS, SEP, MASK = 32, 5, 300, 101, 102, 103


def small_documents(seed: int = 0, num_docs: int = 8) -> Documents:
    rng = random.Random(seed)
    lengths = [[rng.randint(1, 12) for _ in range(rng.randint(1, 6))] for _ in range(num_docs)]
    sentence_lengths = [n for doc in lengths for n in doc]
    tokens = np.array([rng.randint(104, VOCAB_SIZE - 1) for _ in range(sum(sentence_lengths))], dtype=np.uint16)
    return Documents(paths=("memory",), tokens=tokens,
                     sentence_offsets=np.concatenate(([0], np.cumsum(sentence_lengths))).astype(np.int64),
                     doc_offsets=np.concatenate(([0], np.cumsum([len(d) for d in lengths]))).astype(np.int64))


def small_params(**changes) -> kernel.Params:
    fields = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED, short_seq_prob=0.3, dupe_factor=2,
                  num_to_predict=np.array([min(PRED, max(1, round(n * 0.15))) for n in range(SEQ + 1)], np.int64),
                  vocab_words=np.arange(VOCAB_SIZE, dtype=np.int64), word_continues=np.zeros(VOCAB_SIZE, np.bool_),
                  cls_id=CLS, sep_id=SEP, mask_id=MASK)
    return kernel.Params(**{**fields, **changes})


def generate_kwargs(rows: int = 100) -> dict:
    docs, params = small_documents(), small_params()
    kwargs = {"state": kernel._state(random.Random(1)), "tokens": docs.tokens,
              "sentence_offsets": docs.sentence_offsets, "doc_offsets": docs.doc_offsets}
    kwargs.update({name: getattr(params, name) for name in params.__dataclass_fields__})
    kwargs.update(kernel._outputs(rows, docs.tokens.dtype, params))
    return kwargs


def fill_arrays():
    tokens = np.array([500, 600, 700, 800, 900], np.int32)
    spans = np.array([[0, 2, 2, 5]], np.int64)
    positions = np.array([[1, 4, 0]], np.uint16)
    shown = np.array([[MASK, 40000, 0]], np.int32)
    return tokens, spans, positions, shown


def empty_table(slots: int = 8, room: int = 4, key_bytes: int = 64) -> dict:
    return {"slots": np.full(slots, -1, np.int32), "hashes": np.zeros(room, np.uint64),
            "key_offsets": np.zeros(room, np.int32), "key_lengths": np.zeros(room, np.int32),
            "keys": np.zeros(key_bytes, np.uint8), "meta": np.zeros(3, np.int64)}


def assemble_arrays(whole_offsets):
    return {"line_words": np.zeros(1, np.int32), "whole_line": np.ones(1, np.bool_),
            "value_offsets": np.zeros(1, np.int32), "value_lengths": np.zeros(1, np.int32),
            "values": np.zeros(4, np.uint16), "whole_ids": np.arange(4, dtype=np.uint16),
            "whole_offsets": np.array(whole_offsets, np.int64), "out": np.zeros(4, np.uint16),
            "lengths": np.zeros(1, np.int32)}


WHITE_SPACE = [chr(c) for c in range(0x110000) if chr(c).isspace() and chr(c) != "\n"]


def python_lines(text: str) -> tuple[bytes, bytes, bytes]:
    stripped = [line.strip() for line in text.split("\n")]
    kept = [line.encode("utf-8") for line in stripped if line]
    starts = np.cumsum([0] + [len(k) + 1 for k in kept[:-1]]).astype(np.int64) if kept else np.empty(0, np.int64)
    return b"\n".join(kept), starts.tobytes(), bytes(not line for line in stripped)
