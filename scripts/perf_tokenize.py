"""Tokens/s of reading a text shard into ids, single process: the compiled WordPiece path (a
vocab.txt) against Hugging Face `tokenizers` through TokenizerFile (a WordPiece tokenizer.json of the
same vocab, and the test suite's byte-level BPE and Unigram trained on the test text).

Each run is `read_documents` with a fresh tokenizer: of the whole shard (cold: the compiled path's
piece cache starts empty), and of its second half after the tokenizer read its first half (warm: as
a worker reads a shard after others), the process pinned to one core and `tokenizers` kept to one thread, as one
build worker runs it. Prints the median of --runs of wall and CPU seconds, tokens/s and MB of
text/s on CPU time (the figure to trust on a busy machine), the ratio of the compiled path to each,
and the time `make_samples` takes to cut the shard into 1,024-token samples.

usage: python scripts/perf_tokenize.py [--shard PATH] [--runs 3]
"""

from __future__ import annotations

import os

# Before `tokenizers` loads: one thread, as in a build worker that has its core.
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bertdata.instances.documents import read_documents  # noqa: E402
from bertdata.instances.samples import make_samples  # noqa: E402
from bertdata.instances.tokenize import WordPiece  # noqa: E402
from bertdata.instances.tokenizer_file import TokenizerFile  # noqa: E402
from bertdata.instances.vocab import load_vocab  # noqa: E402
from conftest import SHARD_A, VOCAB, trained_tokenizer  # noqa: E402

SHARED_SHARD = ROOT.parent / "shared" / "data" / "parity" / "shard_A.txt"


def timed(make, shard: Path, runs: int, before: Path | None):
    """Median wall and CPU seconds of `read_documents(shard, tokenizer)`, its Documents and the
    tokenizer: a fresh one each run, having read `before` first where given."""
    walls, cpus = [], []
    for _ in range(runs):
        tokenizer = make()
        if before is not None:
            read_documents(before, tokenizer)
        wall, cpu = time.perf_counter(), time.process_time()
        documents = read_documents(shard, tokenizer)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), documents, tokenizer


def _on_tokenizers(tokenizer: TokenizerFile) -> TokenizerFile:
    """BERT's tokenizer.json runs on the compiled path: here on `tokenizers`, to compare the two."""
    tokenizer._compiled = None
    return tokenizer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shard", type=Path, default=SHARED_SHARD if SHARED_SHARD.exists() else SHARD_A,
                        help="text shard (default: ../shared/data/parity/shard_A.txt, else the tests' shard_A)")
    parser.add_argument("--runs", type=int, default=3, help="runs per tokenizer; the median counts")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    megabytes = args.shard.stat().st_size / 1e6
    vocab = load_vocab(VOCAB)
    cases = {
        "compiled WordPiece (vocab.txt)": lambda: WordPiece(vocab),
        "compiled WordPiece (BERT's tokenizer.json)": lambda: TokenizerFile(trained_tokenizer("wordpiece")),
        "tokenizers WordPiece (tokenizer.json)": lambda: _on_tokenizers(TokenizerFile(trained_tokenizer("wordpiece"))),
        "tokenizers byte-level BPE (tokenizer.json)": lambda: TokenizerFile(trained_tokenizer("bpe")),
        "tokenizers Unigram (tokenizer.json)": lambda: TokenizerFile(trained_tokenizer("unigram")),
    }
    for make in cases.values():  # trained and cached before any timing
        make()
    print(f"shard {args.shard} ({megabytes:.2f} MB), median of {args.runs}, one core, one thread; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work shares the machine)")
    with tempfile.TemporaryDirectory(prefix="perf_tokenize-") as tmp:
        report(args.shard, args.runs, cases, Path(tmp))
    return 0


def report(path: Path, runs: int, cases: dict, folder: Path) -> None:
    """Print each case's figures, cold and warm. Warm: the second half of the shard's documents
    read by a tokenizer that has read the first half, as a worker reads a shard after others
    (other articles, the same kind of text)."""
    text = path.read_text(encoding="utf-8")
    middle = text.find("\n\n", len(text) // 2) + 2
    (folder / "first.txt").write_text(text[:middle], encoding="utf-8")
    (folder / "second.txt").write_text(text[middle:], encoding="utf-8")
    for shard, before, what in ((path, None, "cold: the whole shard, a fresh tokenizer each run"),
                                (folder / "second.txt", folder / "first.txt",
                                 "warm: the shard's second half, the tokenizer having read its first half")):
        print(what)
        megabytes = shard.stat().st_size / 1e6
        base = None
        for name, make in cases.items():
            wall, cpu, documents, tokenizer = timed(make, shard, runs, before)
            rate = documents.num_tokens / cpu
            base = base or rate
            samples_start = time.process_time()
            samples = make_samples(documents, tokenizer, 1024)
            samples_cpu = time.process_time() - samples_start
            print(f"  {name:44s} {documents.num_tokens:>9,} tokens  wall {wall:6.2f} s  cpu {cpu:6.2f} s  "
                  f"{rate:>10,.0f} tokens/s  {megabytes / cpu:5.2f} MB/s  compiled/this {base / rate:5.2f}x  "
                  f"(make_samples 1024: {len(samples):,} samples in {samples_cpu:.3f} s)")


if __name__ == "__main__":
    sys.exit(main())
