"""A parquet corpus tokenized into MDS by bertdata, side by side with datatrove 0.10.1's
`ParquetReader` -> `DocumentTokenizer` on the same files and tokenizer.json: issue 58's speed
check (at least as fast, aim 2x), for a WordPiece and a byte-level BPE tokenizer.json.

The corpus is FineWeb-Edu's parquet layout (tests/corpus_inputs.py) grown by copies of the real
dump fragment's articles. Both tools run on one core (this process and every child pinned to it),
one worker and one task, `tokenizers` kept to one thread; runs alternate between them and the
median of --runs counts. Each run is the whole command in a fresh interpreter:

- bertdata: `bertdata build --recipe R --format mds --tokenizer T --workers 1 --runner local`
  (the recipe: the parquet corpus alone, no mix);
- datatrove: `LocalPipelineExecutor([ParquetReader, DocumentTokenizer], tasks=1, workers=1)`, run
  by the python of its own virtualenv (tests/testcache.py VENVS["datatrove"]): its requirements
  must not reach .venv.

Printed per tokenizer and tool: tokens written, wall and CPU seconds of the whole command (every
process of it, waited for: getrusage(RUSAGE_CHILDREN); interpreter start and imports included),
tokens/s per core on CPU time, the pipeline's own wall time (bertdata: the manifest's run
seconds; datatrove: its executor's run), and bertdata/datatrove on each. CPU time is the figure
to trust on a shared machine. The token counts differ by design; the last two lines say by how
much and why.

--profile instead profiles bertdata's build per tokenizer (the in-memory runner, so the worker is
the profiled process): perf_scale.py's sampler's shares, then cProfile's top costs; --smoke (1 copy, 1 run, bertdata's
side only) is the test suite's check that the script still runs (tests/project/test_perf_corpora.py).

usage: python scripts/perf_corpora.py [--runs 3] [--copies 24] [--tokenizers wordpiece bpe] [--smoke]
                                      [--no-datatrove] [--profile] [--work DIR]
"""

from __future__ import annotations

import os

# Before `tokenizers` loads, here and in every child (they inherit the environment): one thread,
# as in a build worker that has its core.
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

# Only the standard library above: datatrove's virtualenv runs this file too (--datatrove-side),
# and has neither bertdata nor the tests' helpers.
ROOT = Path(__file__).resolve().parents[1]
TOKENIZERS = ("wordpiece", "bpe")
TOKENIZER_NAMES = {"wordpiece": "WordPiece", "bpe": "byte-level BPE"}


def datatrove_side(args: argparse.Namespace) -> int:
    """Run in datatrove's virtualenv: the pipeline on `args.files`, its figures as one JSON line."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    out = Path(args.output)
    executor = LocalPipelineExecutor(
        pipeline=[
            # text and id only, as bertdata reads only the columns it uses (read_metadata=True
            # would read every column into each document's metadata)
            ParquetReader(str(args.files), glob_pattern="*.parquet", text_key="text", id_key="id",
                          read_metadata=False),
            # its defaults otherwise: the tokenizer's own post-processor (no eos_token override),
            # documents shuffled within the task's file, as datatrove's examples run it
            DocumentTokenizer(output_folder=str(out / "tokens"), tokenizer_name_or_path=str(args.tokenizer),
                              local_working_dir=str(out / "work")),
        ],
        tasks=1, workers=1, logging_dir=str(out / "logs"))
    wall = time.perf_counter()
    executor.run()
    wall = time.perf_counter() - wall
    ends = sorted((out / "tokens").glob("*.ds.index"))
    # One uint64 per document in the index, its end in tokens: the last is the file's tokens.
    documents = sum(p.stat().st_size // 8 for p in ends)
    tokens = 0
    for index in ends:
        data = index.read_bytes()
        tokens += int.from_bytes(data[-8:], "little") if data else 0
    from importlib.metadata import version

    print(json.dumps({"tokens": tokens, "documents": documents, "work_wall": wall,
                      "versions": {"datatrove": version("datatrove"), "tokenizers": version("tokenizers")}}))
    return 0


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_bertdata(recipe: Path, tokenizer: Path, vocab: Path, out: Path) -> dict:
    """One `bertdata build` of the recipe into MDS, its figures. With one worker the local runner
    runs the worker in the launcher's process (pipelines/runtime/runners.py), so the command's
    CPU time is the worker's and the launcher's start-up (Beam's import); the build's own wall
    time, from its start to its end, is the manifest's run.seconds."""
    shutil.rmtree(out, ignore_errors=True)
    # --vocab: the build resolves a WordPiece vocab even when --tokenizer gives the ids, and would
    # otherwise download bert-base-uncased's (offline here); it plays no part in the MDS samples.
    cmd = [sys.executable, "-m", "bertdata.cli", "build", "--recipe", str(recipe), "--format", "mds",
           "--tokenizer", str(tokenizer), "--vocab", str(vocab), "--workers", "1", "--runner", "local",
           "--output", str(out)]
    before, wall = children_cpu(), time.perf_counter()
    # From the recipe's folder, not the checkout: `-m` puts the current folder first on sys.path.
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=recipe.parent)
    wall, cpu = time.perf_counter() - wall, children_cpu() - before
    if proc.returncode:
        raise SystemExit(f"bertdata build failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    manifest = json.loads(next(out.glob("mds/*/manifest.json")).read_text())
    counts = manifest["counts"]
    return {"tokens": counts["tokens"], "documents": counts["documents"], "samples": counts["samples"],
            "wall": wall, "cpu": cpu, "work_wall": manifest["run"]["seconds"]}


def run_datatrove(python: Path, files: Path, tokenizer: Path, out: Path) -> dict:
    """One run of datatrove's pipeline by `python` (this file's --datatrove-side), its figures."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(python), str(Path(__file__).resolve()), "--datatrove-side", "--files", str(files),
           "--tokenizer", str(tokenizer), "--output", str(out)]
    before, wall = children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=out.parent)
    wall, cpu = time.perf_counter() - wall, children_cpu() - before
    if proc.returncode:
        raise SystemExit(f"datatrove failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**found, "wall": wall, "cpu": cpu}


def write_corpus(folder: Path, copies: int) -> tuple[Path, Path]:
    """The FineWeb-Edu parquet files (`copies` times the fragment's share of articles) and a recipe
    that reads them alone, every document once (no where:, no mix: datatrove has neither)."""
    from corpus_inputs import write_corpora

    write_corpora(folder / "corpora", copies=copies)
    recipe = folder / "recipe.yaml"
    recipe.write_text('corpora:\n  edu: {type: parquet, files: "corpora/fineweb-edu/*.parquet", text: text, id: id}\n',
                      encoding="utf-8")
    return folder / "corpora" / "fineweb-edu", recipe


def special_tokens(tokenizer: Path) -> int:
    """The tokens the tokenizer's post-processor adds around one sequence ([CLS] [SEP], <s> </s>)."""
    from tokenizers import Tokenizer

    processor = Tokenizer.from_file(str(tokenizer)).post_processor
    return processor.num_special_tokens_to_add(False) if processor is not None else 0


def datatrove_python() -> tuple[Path | None, str]:
    """datatrove's virtualenv (made once from the package index), or None and why not."""
    import testcache

    try:
        return testcache.venv("datatrove"), ""
    except testcache.Unavailable as err:
        return None, str(err)
    except subprocess.CalledProcessError as err:
        return None, f"cannot make a virtualenv ({err})"


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs per tool and tokenizer, alternating; medians count")
    parser.add_argument("--copies", type=int, default=24,
                        help="copies of the fragment's FineWeb-Edu share (about 0.6 MB of parquet each; default 24)")
    parser.add_argument("--tokenizers", nargs="+", choices=TOKENIZERS, default=list(TOKENIZERS))
    parser.add_argument("--no-datatrove", action="store_true", help="bertdata's side only")
    parser.add_argument("--smoke", action="store_true",
                        help="a check that the script runs: 1 copy, 1 run, bertdata's side only")
    parser.add_argument("--work", type=Path, help="folder for the corpus and outputs (default: a temporary one)")
    parser.add_argument("--profile", action="store_true",
                        help="instead: bertdata's build per tokenizer sampled and under cProfile (--runner "
                             "in-memory, so the worker runs in the profiled process), its top costs printed")
    # datatrove's side, run by its virtualenv's python (see run_datatrove)
    parser.add_argument("--datatrove-side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--files", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.datatrove_side:
        return datatrove_side(args)
    if args.smoke:
        args.copies, args.runs, args.no_datatrove = 1, 1, True
    # One core for this process and all it starts: each tool's launcher, helpers and worker share
    # it, as one worker of a larger build has its core to itself.
    core = "any"
    if hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from conftest import VOCAB, trained_tokenizer

    if args.no_datatrove or args.profile:
        python, why_not = None, "--smoke" if args.smoke else "--no-datatrove" if args.no_datatrove else "--profile"
    else:
        python, why_not = datatrove_python()
    with tempfile.TemporaryDirectory(prefix="perf_corpora-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(work / "corpora", ignore_errors=True)
        files, recipe = write_corpus(work, args.copies)
        documents = parquet_rows(files)
        megabytes = sum(p.stat().st_size for p in files.glob("*.parquet")) / 1e6
        print(f"corpus: FineWeb-Edu layout, {args.copies} copies, {documents:,} documents, "
              f"{megabytes:.1f} MB of parquet in {len(list(files.glob('*.parquet')))} files; one core "
              f"(cpu {core}), one worker, one task, RAYON_NUM_THREADS=1; median of {args.runs}, runs alternating; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work shares the machine: "
              "trust CPU time)",
              flush=True)
        if python is None:
            print(f"datatrove: skipped ({why_not})", flush=True)
        for kind in args.tokenizers:
            tokenizer = trained_tokenizer(kind)
            if args.profile:
                profile(kind, recipe, tokenizer, VOCAB, work)
                continue
            ours: list[dict] = []
            theirs: list[dict] = []
            for _ in range(args.runs):
                ours.append(run_bertdata(recipe, tokenizer, VOCAB, work / "out-bertdata"))
                if python is not None:
                    theirs.append(run_datatrove(python, files, tokenizer, work / "out-datatrove"))
            report(kind, tokenizer, files, ours, theirs)
    return 0


def profile(kind: str, recipe: Path, tokenizer: Path, vocab: Path, work: Path, top: int = 20) -> None:
    """Two builds of one worker in one process (the in-memory runner): one under
    perf_scale.py's sampler, whose shares of the main thread's CPU time are the ones to trust,
    and one under cProfile, for call counts and what calls what. cProfile's cost per call
    inflates the pure-Python steps against those in C (perf_scale.py explains). The profiled
    build runs `main`, not the console script, whose os._exit would end it before the profile
    is written; its timer is CPU time, which a busy machine inflates less than wall time."""
    out, report, stats = work / "out-profile", work / f"sampled-{kind}.json", work / f"profile-{kind}.pstats"
    argv = ["build", "--recipe", str(recipe), "--format", "mds", "--tokenizer", str(tokenizer), "--vocab", str(vocab),
            "--workers", "1", "--runner", "in-memory", "--output", str(out)]
    sampled = (f"import sys\nsys.path.insert(0, {str(ROOT / 'scripts')!r})\nimport perf_scale\n"
               f"perf_scale.sampled_build({argv!r}, {str(report)!r})")
    profiled = ("import cProfile, sys, time\nfrom bertdata.cli import main\n"
                "profiler = cProfile.Profile(time.process_time)\n"
                f"code = profiler.runcall(main, {argv!r})\nprofiler.dump_stats({str(stats)!r})\nsys.exit(code)")
    for code in (sampled, profiled):
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, check=True, cwd=recipe.parent)
    result = json.loads(report.read_text())
    total = sum(result["functions"].values())
    print(f"{TOKENIZER_NAMES[kind]}: the main thread's CPU time, sampled every ms: {total:.2f} s; the innermost "
          "Python function (time in C is its caller's):")
    for name, seconds in sorted(result["functions"].items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {seconds / total:6.1%}  {seconds:6.2f} s  {name}")
    print(f"{TOKENIZER_NAMES[kind]}: cProfile of one build ({stats}), CPU seconds", flush=True)
    import pstats

    for order in ("tottime", "cumulative"):
        pstats.Stats(str(stats), stream=sys.stdout).sort_stats(order).print_stats(top)
    sys.stdout.flush()


def parquet_rows(files: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in files.glob("*.parquet"))


def report(kind: str, tokenizer: Path, files: Path, ours: list[dict], theirs: list[dict]) -> None:
    """One tokenizer's figures: each tool's medians, the ratios, and the two token counts."""
    print(f"{TOKENIZER_NAMES[kind]} ({tokenizer}):")
    rows = [("bertdata", ours)] + ([("datatrove", theirs)] if theirs else [])
    for name, runs in rows:
        tokens = runs[0]["tokens"]
        wall, cpu, work = median(runs, "wall"), median(runs, "cpu"), median(runs, "work_wall")
        walls = ", ".join(f"{r['wall']:.1f}" for r in runs)
        print(f"  {name:9s} {tokens:>11,} tokens  wall {wall:6.2f} s  CPU {cpu:6.2f} s  {tokens / cpu:>9,.0f} "
              f"tokens/s per core (CPU)  the pipeline's own wall {work:6.2f} s  (each run's wall: {walls} s)",
              flush=True)
    if not theirs:
        return
    # On tokens per second, so that the two counts' difference (below) does not tilt the ratio.
    rate = {name: {k: runs[0]["tokens"] / median(runs, k) for k in ("wall", "cpu", "work_wall")}
            for name, runs in rows}
    ratio = {k: rate["bertdata"][k] / rate["datatrove"][k] for k in ("wall", "cpu", "work_wall")}
    pairs = ", ".join(f"{(o['tokens'] / o['cpu']) / (t['tokens'] / t['cpu']):.2f}x" for o, t in zip(ours, theirs))
    print(f"  bertdata/datatrove, tokens/s: CPU {ratio['cpu']:.2f}x, wall {ratio['wall']:.2f}x, the pipelines' "
          f"own wall {ratio['work_wall']:.2f}x (each pair on CPU: {pairs})")
    import tokenizers

    versions = theirs[0]["versions"]
    ours_version = tokenizers.__version__
    same = "the same" if versions["tokenizers"] == ours_version else f"NOT bertdata's {ours_version}"
    print(f"  datatrove {versions['datatrove']}, tokenizers {versions['tokenizers']} ({same})")
    # datatrove writes each document whole with the post-processor's tokens around it; bertdata
    # cuts each document into samples of at most 1,024 tokens, each with those tokens around it,
    # from its cleaned text tokenized sentence by sentence.
    specials = special_tokens(tokenizer)
    o, t = ours[0], theirs[0]
    bare_ours, bare_theirs = o["tokens"] - specials * o["samples"], t["tokens"] - specials * t["documents"]
    print(f"  token counts: bertdata {o['tokens']:,} ({o['documents']:,} documents in {o['samples']:,} samples), "
          f"datatrove {t['tokens']:,} ({t['documents']:,} documents); less the {specials} special tokens around "
          f"each sample (bertdata) or document (datatrove): {bare_ours:,} vs {bare_theirs:,} "
          f"({(bare_ours - bare_theirs) / bare_theirs:+.2%})")
    raw, spaced, documents = line_end_tokens(files, tokenizer)
    print(f"  line ends: {documents} of the documents, tokenized whole, give {(spaced - raw) / raw:+.2%} tokens with "
          f"their line ends made spaces (bertdata's sentences hold none; datatrove encodes them)")


def line_end_tokens(files: Path, tokenizer: Path, documents: int = 64) -> tuple[int, int, int]:
    """Tokens of the first `documents` documents as they are and with every line end a space:
    the share of the counts' difference that the line ends between paragraphs make, which a
    byte-level BPE encodes as tokens of their own and WordPiece drops as whitespace."""
    import pyarrow.parquet as pq
    from tokenizers import Tokenizer

    texts = pq.read_table(sorted(files.glob("*.parquet"))[0], columns=["text"])["text"].to_pylist()[:documents]
    encoder = Tokenizer.from_file(str(tokenizer))
    raw = sum(len(e.ids) for e in encoder.encode_batch_fast(texts, add_special_tokens=False))
    spaced = sum(len(e.ids) for e in encoder.encode_batch_fast([t.replace("\n", " ") for t in texts],
                                                                 add_special_tokens=False))
    return raw, spaced, len(texts)


if __name__ == "__main__":
    sys.exit(main())
