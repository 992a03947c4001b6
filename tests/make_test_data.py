"""Remake the test data under tests/data/ (committed; run this only to change it):

    .venv/bin/python tests/make_test_data.py --google-bert CHECKOUT

- `shard_A.txt`: the first 40 documents of the training text shard that `bertdata build` makes from
  the gensim wheel's real dump fragment (tests/testcache.py fetches it): real cleaned text, one
  sentence per line, a blank line between documents;
- `vocab.txt`: an uncased WordPiece vocab, `bertdata vocab --dump FRAGMENT` (BERT's size, 30,522
  at most); `vocab-cased.txt`: a cased one trained on shard_A.txt, 8,000 tokens;
- `whole_word.json`: the golden arrays of whole-word masking (as digests: their shape, dtype and
  sha256, and the sha256 of each block of 256 rows, to say where they differ), made by Google's current
  create_pretraining_data.py with `--do_whole_word_mask=True` (CHECKOUT: a checkout of
  https://github.com/google-research/bert; these were made at commit eedf571, whose
  create_pretraining_data.py has sha256 7c3df774…) on shard_A.txt with each vocab, in both
  phases. Whole-word masking is absent from the bert-tensorflow 1.0.4 wheel the suite runs for
  token masking, so these arrays stand in for the script.

Where ../shared/data is beside the project (the project's own machines), it also checks the chain
the suite relies on: the 1.0.4 wheel's script, on ../shared's shard and the standard vocab, gives
NVIDIA's stored phase-1 and phase-2 outputs bit for bit, and google_bert.write_reference writes
them byte for byte as NVIDIA's script did.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
sys.path.insert(0, str(HERE))

import google_bert  # noqa: E402
import testcache  # noqa: E402

DOCUMENTS = 40
# (golden name, vocab file, lowercase, max_seq_length, max_predictions_per_seq, random seed)
GOLDENS = (
    ("uncased_s12345_128_20_d2", "vocab.txt", True, 128, 20, 12345),
    ("uncased_s7_512_80_d2", "vocab.txt", True, 512, 80, 7),
    ("cased_s7_128_20_d2", "vocab-cased.txt", False, 128, 20, 7),
    ("cased_s12345_512_80_d2", "vocab-cased.txt", False, 512, 80, 12345),
)
DUPE_FACTOR, MASKED_LM_PROB, SHORT_SEQ_PROB = 2, 0.15, 0.1
BLOCK = 256


def bertdata(*args) -> None:
    subprocess.run([sys.executable, "-m", "bertdata.cli", *map(str, args)], check=True)


def make_text(work: Path) -> None:
    bertdata("build", "--wiki-only", "--dump", testcache.WIKI_FRAGMENT, "--vocab", ROOT / "bertdata/sample/vocab.txt",
             "--stop-after", "text", "--training-shards", "1", "--test-shards", "1", "--workers", "1",
             "--output", work / "text")
    shard, = (work / "text").glob("sharded_*/*/*_training_0.txt")
    documents = shard.read_text(encoding="utf-8").split("\n\n")[:DOCUMENTS]
    (DATA / "shard_A.txt").write_text("\n\n".join(documents) + "\n", encoding="utf-8")


def make_goldens(checkout: Path) -> None:
    goldens = {}
    for name, vocab, lowercase, seq, pred, seed in GOLDENS:
        arrays = google_bert.instances(checkout, [DATA / "shard_A.txt"], DATA / vocab, lowercase=lowercase,
                                       whole_word=True, max_seq_length=seq, max_predictions_per_seq=pred,
                                       masked_lm_prob=MASKED_LM_PROB, short_seq_prob=SHORT_SEQ_PROB,
                                       dupe_factor=DUPE_FACTOR, random_seed=seed)
        goldens[name] = {"vocab": vocab, "lowercase": lowercase, "max_seq_length": seq,
                         "max_predictions_per_seq": pred, "random_seed": seed, "dupe_factor": DUPE_FACTOR,
                         "masked_lm_prob": MASKED_LM_PROB, "short_seq_prob": SHORT_SEQ_PROB,
                         "arrays": {field: digests(array) for field, array in arrays.items()}}
        print(f"{name}: {len(arrays['input_ids'])} instances")
    (DATA / "whole_word.json").write_text(json.dumps(goldens, indent=1) + "\n")


def digests(array: np.ndarray) -> dict:
    """What a golden array keeps of `array`; tests/instances/test_google_parity.py compares with it."""
    return {"shape": list(array.shape), "dtype": array.dtype.str, "sha256": sha256(array),
            "blocks": [sha256(array[start:start + BLOCK]) for start in range(0, len(array), BLOCK)]}


def sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def check_against_nvidia(shared: Path) -> None:
    """The 1.0.4 wheel's token masking is NVIDIA's: its arrays and, written as NVIDIA writes
    them, its files' bytes."""
    for vector, seq, pred, dupe in (("A_s12345_128_20_p15_d5.hdf5", 128, 20, 5), ("A_s12345_512_80_p15_d2.hdf5", 512, 80, 2)):
        arrays = google_bert.instances(testcache.GOOGLE_BERT, [shared / "parity/shard_A.txt"],
                                       shared / "vocab/bert-base-uncased-vocab.txt", lowercase=True, whole_word=False,
                                       max_seq_length=seq, max_predictions_per_seq=pred, masked_lm_prob=0.15,
                                       short_seq_prob=0.1, dupe_factor=dupe, random_seed=12345)
        with tempfile.TemporaryDirectory() as tmp:
            written = google_bert.write_reference(arrays, Path(tmp) / vector)
            same = written.read_bytes() == (shared / "parity" / vector).read_bytes()
        print(f"bert-tensorflow 1.0.4 vs NVIDIA's {vector}: {'byte-identical' if same else 'DIFFERENT'}")
        if not same:
            raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--google-bert", type=Path, required=True, help="a checkout of google-research/bert")
    args = parser.parse_args()
    testcache.ensure()
    DATA.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        make_text(Path(tmp))
    bertdata("vocab", "--dump", testcache.WIKI_FRAGMENT, "--output", DATA / "vocab.txt", "--force")
    bertdata("vocab", DATA / "shard_A.txt", "--cased", "--size", "8000", "--output", DATA / "vocab-cased.txt", "--force")
    make_goldens(args.google_bert)
    shared = ROOT.parent / "shared" / "data"
    if (shared / "parity").is_dir():
        check_against_nvidia(shared)


if __name__ == "__main__":
    main()
