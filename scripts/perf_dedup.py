"""A recipe's MinHash dedup (issue 59) side by side with datatrove 0.10.1's four MinHash steps on
the same JSON lines files and parameters (5-grams, 14 bands of 8 hashes, datatrove's defaults):
what each keeps, how well each finds planted near-duplicates, and CPU time per core.

- bertdata: `bertdata build --recipe R --stop-after text --workers 1 --runner local`, R being one
  jsonl corpus and `dedup: {exact: false, minhash: {ngram: 5, bands: 14, rows: 8}}` (MinHash
  alone, as datatrove's steps are: an exact copy is found by MinHash too, all bands equal);
  what it keeps is every document less those `dedup.jsonl` names, clusters from its "kept";
- datatrove: `MinhashDedupSignature -> MinhashDedupBuckets -> MinhashDedupCluster ->
  MinhashDedupFilter` (its examples/minhash_deduplication.py), each a LocalPipelineExecutor of one
  task and one worker, the first and last after a JsonlReader of the same files, the last writing
  what it keeps with a JsonlWriter. MinhashDedupBuckets asserts tasks % buckets == 0: it runs 14
  tasks, one after another in the one worker. Run by the python of its own virtualenv
  (tests/testcache.py VENVS["datatrove"], with spaCy, its English word tokenizer).

The corpora, from the real dump fragment's 96 articles (tests/corpus_inputs.py), one corpus each:

1. grown x8 and x32: each article 8 or 32 times, each copy retitled as scripts/make_scaled_dump.py
   retitles ("Title (k)" as its first line), so the copies are near-duplicates, not exact ones:
   both tools should keep about 96. Printed: each tool's kept count and the kept sets' agreement.
2. planted: the articles cut into documents of 300+ words, and one copy of each with a share of
   its words replaced by words of other articles, the shares chosen so that the pairs' true
   Jaccard similarity of 5-gram sets spreads over 0.3-1.0. The true Jaccard is computed exactly
   (words: the lowercased text's runs of \\w, 5-grams as tuples of them). Printed per tool: recall
   (planted pairs of J >= 0.8 found, i.e. both in one cluster), the flagged pairs of J < 0.5 among
   all flagged planted pairs, merges of documents that are no planted pair, found by J bin, and
   the kept sets' agreement.
3. speed: the x32 corpus, one core for this process and everything it starts (os.sched_setaffinity,
   inherited), CPU time of each whole command (getrusage(RUSAGE_CHILDREN): interpreter start,
   imports and every step), runs alternating, medians of --runs: bertdata without dedup, bertdata
   with MinHash, datatrove's four steps; the ratio datatrove/bertdata on CPU, and on the dedup's
   own cost (bertdata with less without).

--smoke (2 copies, 120 planted pairs, 1 run, bertdata's side only) is the test suite's check that
the script still runs (tests/project/test_perf_dedup.py).

usage: python scripts/perf_dedup.py [--runs 3] [--copies 8 32] [--smoke] [--no-datatrove] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Only the standard library above: datatrove's virtualenv runs this file too (--datatrove-side),
# and has neither bertdata nor the tests' helpers.
ROOT = Path(__file__).resolve().parents[1]
NGRAM, BANDS, ROWS = 5, 14, 8
CORPUS = "web"  # the recipe's corpus: bertdata's dedup.jsonl names documents "web/<id>"
WORD = re.compile(r"\w+")
# Bins of true Jaccard for the planted pairs' found rates.
BINS = ((0.0, 0.5), (0.5, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0001))


def datatrove_side(args: argparse.Namespace) -> int:
    """Run in datatrove's virtualenv: the four MinHash steps on `args.files`; what they keep, and
    their timings, as one JSON line."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                                  MinhashDedupFilter, MinhashDedupSignature)
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    out = Path(args.output)
    config = MinhashConfig(n_grams=NGRAM, num_buckets=BANDS, hashes_per_bucket=ROWS)
    clusters = args.clusters  # cluster ids in the documents' metadata: the planted pairs' check

    def reader():
        return JsonlReader(str(args.files), glob_pattern="*.jsonl", text_key="text", id_key="id")

    stages = {
        "signatures": ([reader(), MinhashDedupSignature(output_folder=str(out / "signatures"), config=config)], 1),
        # tasks % num_buckets == 0 is asserted: 14 tasks, run in turn by the one worker
        "buckets": ([MinhashDedupBuckets(input_folder=str(out / "signatures"), output_folder=str(out / "buckets"),
                                         config=config)], BANDS),
        "cluster": ([MinhashDedupCluster(input_folder=str(out / "buckets"), output_folder=str(out / "remove_ids"),
                                         config=config, save_cluster_id=clusters)], 1),
        "filter": ([reader(),
                    MinhashDedupFilter(input_folder=str(out / "remove_ids"), load_cluster_ids=clusters,
                                       exclusion_writer=JsonlWriter(str(out / "removed"))),
                    JsonlWriter(str(out / "kept"))], 1),
    }
    seconds = {}
    for name, (pipeline, tasks) in stages.items():
        start = time.perf_counter()
        LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=1,
                              logging_dir=str(out / "logs" / name)).run()
        seconds[name] = time.perf_counter() - start
    import gzip

    def documents(folder: str) -> list[tuple[str, int]]:
        found = []
        for path in sorted((out / folder).glob("*.jsonl.gz")):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                for line in f:
                    doc = json.loads(line)
                    found.append((doc["id"], doc.get("metadata", {}).get("minhash_cluster_id", -1)))
        return found

    kept, removed = documents("kept"), documents("removed")
    from importlib.metadata import version

    print(json.dumps({"kept": [d for d, _ in kept], "removed": [d for d, _ in removed],
                      "clusters": {d: c for d, c in kept + removed if c != -1} if clusters else None,
                      "seconds": seconds,
                      "versions": {p: version(p) for p in ("datatrove", "spacy", "xxhash")}}))
    return 0


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def write_jsonl(folder: Path, documents: list[tuple[str, str]]) -> Path:
    """The documents as one JSON lines file, {"id", "text"} a line, in `folder`."""
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "files").mkdir(parents=True)
    with open(folder / "files" / "part-00000.jsonl", "w", encoding="utf-8") as f:
        for doc_id, text in documents:
            f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    return folder / "files"


def write_recipe(folder: Path, dedup: bool) -> Path:
    recipe = folder / ("recipe-dedup.yaml" if dedup else "recipe-none.yaml")
    text = f'name: {CORPUS}\ncorpora:\n  {CORPUS}: {{type: jsonl, files: "files/*.jsonl"}}\n'
    if dedup:
        text += f"dedup:\n  exact: false\n  minhash: {{ngram: {NGRAM}, bands: {BANDS}, rows: {ROWS}}}\n"
    recipe.write_text(text, encoding="utf-8")
    return recipe


def run_bertdata(recipe: Path, vocab: Path, out: Path) -> dict:
    """One `bertdata build --stop-after text` of the recipe: its CPU and wall time, what it kept,
    and each removed document's keeper (its cluster)."""
    shutil.rmtree(out, ignore_errors=True)
    # --vocab: the build resolves a WordPiece vocab even when it stops after the text (and would
    # otherwise download bert-base-uncased's); the text stage does not use it.
    cmd = [sys.executable, "-m", "bertdata.cli", "build", "--recipe", str(recipe), "--stop-after", "text",
           "--vocab", str(vocab), "--workers", "1", "--runner", "local", "--output", str(out)]
    before, wall = children_cpu(), time.perf_counter()
    # From the recipe's folder, not the checkout: `-m` puts the current folder first on sys.path.
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=recipe.parent)
    wall, cpu = time.perf_counter() - wall, children_cpu() - before
    if proc.returncode:
        raise SystemExit(f"bertdata build failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    text = next(out.glob(f"sharded_*/{CORPUS}/manifest.json"))
    manifest = json.loads(text.read_text())
    keeper = {}
    audit = text.parent / "dedup.jsonl"
    if audit.exists():
        for line in audit.read_text().splitlines():
            entry = json.loads(line)
            keeper[entry["document"].split("/", 1)[1]] = entry["kept"].split("/", 1)[1]
    return {"wall": wall, "cpu": cpu, "work_wall": manifest["run"]["seconds"], "removed": keeper,
            "documents": manifest["counts"]["documents"], "read": manifest["corpora"][CORPUS]["read"]}


def run_datatrove(python: Path, files: Path, out: Path, clusters: bool = False) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd = [str(python), str(Path(__file__).resolve()), "--datatrove-side", "--files", str(files),
           "--output", str(out), *(["--clusters"] if clusters else [])]
    before, wall = children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=out)
    wall, cpu = time.perf_counter() - wall, children_cpu() - before
    if proc.returncode:
        raise SystemExit(f"datatrove failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**found, "wall": wall, "cpu": cpu, "work_wall": sum(found["seconds"].values())}


# --- the corpora ---------------------------------------------------------------------------------

def grown(pages, copies: int) -> list[tuple[str, str]]:
    """Each article `copies` times, copy k retitled "Title (k)" as make_scaled_dump.py retitles
    (copy 0 keeps its title), the title the document's first line."""
    return [(f"{page_id}-{k:02d}", f"{title if k == 0 else f'{title} ({k})'}\n{text}")
            for k in range(copies) for page_id, title, text in pages]


def pieces(pages, words: int = 300) -> list[tuple[str, str]]:
    """The articles cut into documents of whole paragraphs, `words` words or more each (an
    article's short tail joins its last piece)."""
    docs = []
    for page_id, _, text in pages:
        held: list[str] = []
        count, n = 0, 0
        for paragraph in text.split("\n"):
            held.append(paragraph)
            count += len(paragraph.split())
            if count >= words:
                docs.append((f"{page_id}-{n:03d}", "\n".join(held)))
                held, count, n = [], 0, n + 1
        if held and docs and docs[-1][0].startswith(f"{page_id}-") and count < words:
            docs[-1] = (docs[-1][0], docs[-1][1] + "\n" + "\n".join(held))
        elif held and count >= 50:
            docs.append((f"{page_id}-{n:03d}", "\n".join(held)))
    return docs


def shingles(text: str) -> set[tuple[str, ...]]:
    words = WORD.findall(text.lower())
    return {tuple(words[i:i + NGRAM]) for i in range(len(words) - NGRAM + 1)}


def jaccard(a: str, b: str) -> float:
    x, y = shingles(a), shingles(b)
    return len(x & y) / len(x | y) if x or y else 1.0


def planted(pages, pairs: int, seed: int = 59) -> tuple[list[tuple[str, str]], dict[tuple[str, str], float]]:
    """`pairs` documents and an edited copy of each; each copy's true 5-gram Jaccard to its
    original, aimed at a target drawn evenly from 0.3-1.0.

    Replacing a share p of the words at random places keeps about (1 - p)**5 of the 5-grams, and
    J = kept / (2 - kept): the target J asks for p = 1 - (2J / (1 + J))**(1/5). A replacement is a
    word of another document, put where it makes 5-grams neither text has; the true J is
    measured after, not assumed."""
    rng = random.Random(seed)
    docs = pieces(pages)
    rng.shuffle(docs)
    docs = sorted(docs[:pairs])
    lexicon = sorted({w for _, text in docs for w in WORD.findall(text.lower()) if len(w) > 3})
    out, truth = [], {}
    for doc_id, text in docs:
        target = rng.uniform(0.3, 1.0)
        share = 1 - (2 * target / (1 + target)) ** (1 / NGRAM)
        tokens = text.split(" ")
        for i in rng.sample(range(len(tokens)), round(share * len(tokens))):
            # keep the line ends (paragraph breaks) a token holds
            tokens[i] = re.sub(r"\w+", lambda _: rng.choice(lexicon), tokens[i], count=1) \
                if WORD.search(tokens[i]) else rng.choice(lexicon)
        copy = " ".join(tokens)
        out += [(doc_id, text), (f"{doc_id}-copy", copy)]
        truth[(doc_id, f"{doc_id}-copy")] = jaccard(text, copy)
    return out, truth


# --- the figures ---------------------------------------------------------------------------------

def kept_set(ids: list[str], removed) -> set[str]:
    return set(ids) - set(removed)


def agreement(ids: list[str], ours: dict, theirs: dict) -> str:
    a, b = kept_set(ids, ours["removed"]), set(theirs["kept"])
    return (f"kept by both {len(a & b):,}, by bertdata only {len(a - b):,}, by datatrove only {len(b - a):,}, "
            f"by neither {len(set(ids) - a - b):,}")


def clusters_of(result: dict, tool: str) -> dict[str, object]:
    """document -> its cluster's label, for documents in a cluster of two or more."""
    if tool == "bertdata":
        label = dict(result["removed"])
        for keeper in set(result["removed"].values()):
            label[keeper] = keeper
        return label
    return dict(result["clusters"])


def quality(truth: dict[tuple[str, str], float], label: dict[str, object]) -> dict:
    found = {pair: pair[0] in label and label[pair[0]] == label.get(pair[1]) for pair in truth}
    high = [p for p, j in truth.items() if j >= 0.8]
    flagged = [p for p in truth if found[p]]
    low_flagged = [p for p in flagged if truth[p] < 0.5]
    # Clusters holding documents of two planted pairs: merges no planting made.
    base = {doc: doc.removesuffix("-copy") for doc in label}
    members: dict[object, set[str]] = {}
    for doc, cluster in label.items():
        members.setdefault(cluster, set()).add(base[doc])
    strays = sum(len(bases) - 1 for bases in members.values() if len(bases) > 1)
    bins = []
    for lo, hi in BINS:
        inside = [p for p, j in truth.items() if lo <= j < hi]
        bins.append((sum(found[p] for p in inside), len(inside)))
    return {"recall": (sum(found[p] for p in high), len(high)), "low": (len(low_flagged), len(flagged)),
            "strays": strays, "bins": bins, "found": {p for p in truth if found[p]}}


def lsh_odds(j: float) -> float:
    return 1 - (1 - j ** ROWS) ** BANDS


def report_planted(truth, ours: dict, theirs: dict | None, ids: list[str]) -> None:
    values = sorted(truth.values())
    print(f"planted: {len(truth):,} documents and an edited copy of each, true 5-gram Jaccard "
          f"{values[0]:.2f}-{values[-1]:.2f} (median {statistics.median(values):.2f}); "
          f"{sum(j >= 0.8 for j in values)} pairs J >= 0.8, {sum(j < 0.5 for j in values)} pairs J < 0.5", flush=True)
    rows = [("bertdata", quality(truth, clusters_of(ours, "bertdata")))]
    if theirs is not None:
        rows.append(("datatrove", quality(truth, clusters_of(theirs, "datatrove"))))
    for name, q in rows:
        (hit, high), (low, flagged) = q["recall"], q["low"]
        print(f"  {name:9s} recall (pairs J >= 0.8 found) {hit}/{high} = {hit / max(high, 1):.1%}; "
              f"flagged pairs with J < 0.5: {low} of {flagged} flagged = {low / max(flagged, 1):.1%} "
              f"(precision {1 - low / max(flagged, 1):.1%}); merges across planted pairs: {q['strays']}")
    cells = []
    for k, (lo, hi) in enumerate(BINS):
        mid = (lo + min(hi, 1.0)) / 2
        found = "  ".join(f"{name} {q['bins'][k][0]}/{q['bins'][k][1]}" for name, q in rows)
        cells.append(f"    J {lo:.1f}-{min(hi, 1.0):.1f}: {found}  (LSH's odds at J={mid:.2f}: {lsh_odds(mid):.0%})")
    print("  found by true J:\n" + "\n".join(cells))
    if theirs is not None:
        a, b = rows[0][1]["found"], rows[1][1]["found"]
        print(f"  planted pairs found by both {len(a & b)}, by bertdata only {len(a - b)}, by datatrove only "
              f"{len(b - a)}, by neither {len(truth) - len(a | b)}")
        # Where both find a pair, bertdata keeps the original (the smaller id) and datatrove the
        # root of its union-find (the larger cluster's, else the pair's first): the kept sets
        # differ by those choices as well as by what each found.
        print(f"  planted, {agreement(ids, ours, theirs)}", flush=True)


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def report_speed(label: str, none: list[dict], ours: list[dict], theirs: list[dict]) -> None:
    print(f"speed, {label}, one core each, median of {len(ours)} (CPU time of the whole command; trust CPU):")
    rows = [("bertdata, no dedup", none), ("bertdata, dedup minhash", ours)] + \
        ([("datatrove, 4 MinHash steps", theirs)] if theirs else [])
    for name, runs in rows:
        cpus = ", ".join(f"{r['cpu']:.1f}" for r in runs)
        print(f"  {name:27s} CPU {median(runs, 'cpu'):7.2f} s  wall {median(runs, 'wall'):7.2f} s  "
              f"its own run {median(runs, 'work_wall'):7.2f} s  (each run's CPU: {cpus} s)", flush=True)
    own = median(ours, "cpu") - median(none, "cpu")
    print(f"  dedup's own cost in bertdata's build: {own:.2f} s CPU "
          f"({own / median(none, 'cpu'):+.0%} on the build without it)")
    if theirs:
        steps = ", ".join(f"{k} {statistics.median(r['seconds'][k] for r in theirs):.2f} s"
                          for k in theirs[0]["seconds"])
        print(f"  datatrove's steps, wall: {steps}")
        print(f"  datatrove/bertdata, CPU: {median(theirs, 'cpu') / median(ours, 'cpu'):.1f}x the whole "
              f"commands (bertdata's with its cleaning, sentences and text shards); "
              f"{median(theirs, 'cpu') / max(own, 1e-9):.0f}x against the dedup's own cost", flush=True)


def datatrove_python() -> tuple[Path | None, str]:
    import subprocess as sp

    import testcache

    try:
        return testcache.venv("datatrove"), ""
    except testcache.Unavailable as err:
        return None, str(err)
    except sp.CalledProcessError as err:
        return None, f"cannot make a virtualenv ({err})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="speed runs per command, alternating; medians count")
    parser.add_argument("--copies", type=int, nargs="+", default=[8, 32],
                        help="grown corpora: copies of the 96 articles (the last is the speed corpus)")
    parser.add_argument("--pairs", type=int, default=600, help="planted pairs (documents of 300+ words)")
    parser.add_argument("--no-datatrove", action="store_true", help="bertdata's side only")
    parser.add_argument("--smoke", action="store_true",
                        help="a check that the script runs: 2 copies, 120 pairs, 1 run, bertdata's side only")
    parser.add_argument("--work", type=Path, help="folder for the corpora and outputs (default: a temporary one)")
    parser.add_argument("--datatrove-side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--files", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--clusters", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.datatrove_side:
        return datatrove_side(args)
    if args.smoke:
        args.copies, args.pairs, args.runs, args.no_datatrove = [2], 120, 1, True
    # One core for this process and all it starts, as one worker of a larger build has its core.
    core = "any"
    if hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from conftest import VOCAB
    from corpus_inputs import articles

    if args.no_datatrove:
        python, why_not = None, "--smoke" if args.smoke else "--no-datatrove"
    else:
        python, why_not = datatrove_python()
    pages = articles()
    with tempfile.TemporaryDirectory(prefix="perf_dedup-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"one core (cpu {core}), one worker; MinHash {NGRAM}-grams, {BANDS} bands x {ROWS} rows (threshold "
              f"{(1 / BANDS) ** (1 / ROWS):.2f}); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
              flush=True)
        if python is None:
            print(f"datatrove: skipped ({why_not})", flush=True)
        # planted pairs: what each finds, by true Jaccard
        docs, truth = planted(pages, args.pairs)
        folder = work / "planted"
        files = write_jsonl(folder, docs)
        ids = [d for d, _ in docs]
        ours = run_bertdata(write_recipe(folder, True), VOCAB, folder / "out-bertdata")
        theirs = run_datatrove(python, files, folder / "out-datatrove", clusters=True) if python else None
        if theirs:
            v = theirs["versions"]
            print(f"datatrove {v['datatrove']}, spaCy {v['spacy']}, xxhash {v['xxhash']}")
        report_planted(truth, ours, theirs, ids)
        # grown corpora: kept counts, agreement; the last one timed
        for n, copies in enumerate(args.copies):
            folder = work / f"grown-x{copies}"
            docs = grown(pages, copies)
            files = write_jsonl(folder, docs)
            ids = [d for d, _ in docs]
            megabytes = (files / "part-00000.jsonl").stat().st_size / 1e6
            words = sum(len(t.split()) for _, t in docs)
            label = f"grown x{copies} ({len(docs):,} documents, {words / 1e6:.1f} M words, {megabytes:.1f} MB of jsonl)"
            timed = n == len(args.copies) - 1
            none: list[dict] = []
            mine: list[dict] = []
            theirs_runs: list[dict] = []
            for _ in range(args.runs if timed else 1):
                if timed:
                    none.append(run_bertdata(write_recipe(folder, False), VOCAB, folder / "out-none"))
                mine.append(run_bertdata(write_recipe(folder, True), VOCAB, folder / "out-bertdata"))
                if python is not None:
                    theirs_runs.append(run_datatrove(python, files, folder / "out-datatrove"))
            kept = f"kept, {label}: bertdata {mine[0]['documents']:,} (of {mine[0]['read']:,} read)"
            if theirs_runs:
                kept += f", datatrove {len(theirs_runs[0]['kept']):,}; {agreement(ids, mine[0], theirs_runs[0])}"
            print(kept, flush=True)
            if timed:
                report_speed(label, none, mine, theirs_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
