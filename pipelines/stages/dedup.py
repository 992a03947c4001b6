"""Dedup and decontamination, a recipe's or a build's from a dump, inside the text stage (docs/dedup.md).

As the text stage reads (CleanAndSpill), `Screen` drops each document that shares an n-gram
with an evaluation set and keeps the signatures of the rest, written per work group to files
under the work folder. After the reading barrier, `plan_bands` cuts every band's key range into
jobs; `MatchBands` (one job a worker task) reads its range from every group's file and pairs the
documents that share a key. After a second barrier, `plan_removals` joins the pairs into clusters,
keeps one document of each (bertdata.dedup.clusters), writes `dedup.jsonl` beside the text shards
and tells each shard which documents to leave out. Only the pairs cross the launcher.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from bertdata.corpora.read import corpus_key
from bertdata.dedup.clusters import components
from bertdata.dedup.evals import DecontaminateConfig, EvalTable
from bertdata.dedup.minhash import DedupConfig, Signer, similarity
from bertdata.dedup.signatures import PREFIXES, GroupSignatures, band_slice, load_docs, matches
from bertdata.text.shards import document_name
from bertdata.pipelines.records import Counts, StepDoFn
from bertdata.pipelines.runtime import fsio

SIGNATURES = "signatures"
DOCS_SUFFIX = ".docs"
AUDIT = "dedup.jsonl"
# Documents whose signatures a work group holds before it writes them out (about 60 MB).
GROUP_DOCUMENTS = 100_000
# Band entries a match job sorts at most (12 bytes each), where the key range allows.
JOB_ENTRIES = 1 << 22


@dataclass(frozen=True)
class Signatures:
    """A work group's signature files (bertdata.dedup.signatures): where each band's key
    prefixes begin in its bands file, (bands, PREFIXES + 1)."""

    path: str  # the bands file; the docs file is beside it (DOCS_SUFFIX)
    order: tuple  # (group, sequence): files are numbered in this order
    count: int
    starts: object  # numpy array


@dataclass(frozen=True)
class BandJob:
    """One band's key range across every group: (file number, bands path, count, start, end) each."""

    band: int
    slices: tuple


@dataclass(frozen=True)
class Matches:
    """Pairs of documents a band job found sharing a key: (ref, ref) rows (bertdata.dedup.signatures)."""

    band: int
    pairs: object  # numpy array


@dataclass(frozen=True)
class Contaminated:
    """A document decontaminate: removed, with the evaluation row it shares an n-gram with."""

    key: tuple
    tokens: int
    eval_file: int  # its number among the build's evaluation files
    row: str


@dataclass(frozen=True)
class DedupSummary:
    """What dedup and decontaminate removed, for the text stage's manifest."""

    figures: dict


@dataclass(frozen=True)
class Screening:
    """What the text stage screens its documents for, a recipe's (dedup:, decontaminate:) or a
    build's from a dump (--dedup, --decontaminate): the settings, the evaluation files as checked
    (pipelines.corpora.EvalFile), and the names of the documents' sources by their keys' rank
    (a recipe's corpora; a dump's build: wiki, then books)."""

    dedup: DedupConfig | None
    decontaminate: DecontaminateConfig | None
    evals: tuple
    names: tuple[str, ...]


class Screen:
    """A work group's decontamination and signatures, as its documents are read."""

    def __init__(self, screening: Screening, work_dir: str, group: int) -> None:
        self.work_dir, self.group = work_dir, group
        dedup = screening.dedup
        self.table = (EvalTable(screening.decontaminate.ngram, [e.opened() for e in screening.evals])
                      if screening.decontaminate is not None else None)
        self.signer = Signer(dedup) if dedup is not None and dedup.minhash else None
        self.signs = dedup is not None
        self.exact = dedup is not None and dedup.exact
        self.buffer = GroupSignatures(self.signer, self.exact)
        self.sequence = 0
        self.dropped: tuple | None = None

    def keeps(self, shard: tuple, doc) -> tuple[bool, list]:
        """Whether the document goes on to its shard, and the records its screening made."""
        if len(doc.key) > 2:  # a copy (repeat:) goes where its document went
            return doc.key[:2] != self.dropped, []
        text = doc.text
        if self.table is not None:
            hit = self.table.hit(text.decode("utf-8"))
            if hit is not None:
                self.dropped = doc.key
                return False, [Contaminated(doc.key, doc.tokens, *hit)]
        if not self.signs:
            return True, []
        self.buffer.add(doc.key, shard, doc.tokens, text)
        return True, [self.flush()] if len(self.buffer) >= GROUP_DOCUMENTS else []

    def flush(self) -> Signatures:
        bands, docs, starts = self.buffer.render()
        path = fsio.join(self.work_dir, SIGNATURES, f"{self.group:06d}-{self.sequence:04d}.bands")
        fsio.write_bytes(path + DOCS_SUFFIX, docs)
        fsio.write_bytes(path, bands)
        record = Signatures(path, (self.group, self.sequence), len(self.buffer), starts)
        self.buffer = GroupSignatures(self.signer, self.exact)
        self.sequence += 1
        return record

    def close(self) -> list:
        return [self.flush()] if len(self.buffer) else []


def _numbered(records: list) -> list[Signatures]:
    return sorted((r for r in records if isinstance(r, Signatures)), key=lambda r: r.order)


def plan_bands(records: list) -> Iterator:
    """The gathered records, each again, and a BandJob per band and key range: ranges of whole
    prefixes, as many as keep a job near JOB_ENTRIES entries."""
    yield from records
    files = _numbered(records)
    if not files:
        return
    for band in range(files[0].starts.shape[0]):
        sizes = sum(np.diff(f.starts[band]) for f in files)
        lo, held = 0, 0
        for prefix in range(PREFIXES):
            held += int(sizes[prefix])
            if held >= JOB_ENTRIES or prefix == PREFIXES - 1:
                hi = prefix + 1
                yield BandJob(band, tuple((n, f.path, f.count, int(f.starts[band][lo]), int(f.starts[band][hi]))
                                          for n, f in enumerate(files)))
                lo, held = hi, 0


class MatchBands(StepDoFn):
    """A BandJob -> the pairs of documents of its range that share a key (a Matches record)."""

    takes = (BandJob,)

    def work(self, job: BandJob):
        parts = []
        for number, path, count, start, end in job.slices:
            if end > start:
                keys, docs = band_slice(count, job.band, start, end)
                parts.append((number, fsio.read_range(path, *keys), fsio.read_range(path, *docs)))
        pairs = matches(parts)
        if len(pairs):
            yield Matches(job.band, pairs)


def _documents(files: list[Signatures], pairs: np.ndarray) -> dict:
    """ref -> (key, shard, tokens, exact key, signature) of every document in `pairs`, each
    group's docs file read once."""
    wanted = defaultdict(set)
    for ref in np.unique(pairs).tolist():
        wanted[ref >> 32].add(ref & 0xFFFFFFFF)
    info = {}
    for number in sorted(wanted):
        docs = load_docs(fsio.read_bytes(files[number].path + DOCS_SUFFIX))
        for i in wanted[number]:
            info[(number << 32) | i] = (docs["keys"][i], docs["shards"][i], int(docs["tokens"][i]), docs["exact"][i],
                                        docs["sigs"][i] if docs["sigs"].shape[1] else None)
    return info


def plan_removals(records: list, screening: Screening, folder: str) -> tuple[dict, list, Counts, DedupSummary]:
    """What dedup and decontamination remove: ((split, requested shard) -> keys removed, the removed
    documents' (corpus, key, tokens) for the mix's tallies, their counts and the summary), with
    `dedup.jsonl` written to `folder`."""
    files = _numbered(records)
    found = [r for r in records if isinstance(r, Matches)]
    info = _documents(files, np.concatenate([r.pairs for r in found]) if found else np.zeros((0, 2), np.int64))
    cfg, evals = screening.dedup, screening.evals
    joined = []
    for r in found:
        if cfg is None or not cfg.minhash or r.band == cfg.bands or not cfg.min_similarity:
            joined.append(r.pairs)  # the exact key's band: the same text
        else:
            agree = [similarity(info[a][4], info[b][4]) >= cfg.min_similarity for a, b in r.pairs.tolist()]
            joined.append(r.pairs[np.array(agree, dtype=bool)])
    clusters = components(np.concatenate(joined)) if joined else {}
    removed: dict = defaultdict(list)
    gone, lines, counts = [], [], Counter()
    names = screening.names
    for members in clusters.values():
        kept = min((info[ref] for ref in members), key=lambda d: d[0])
        for ref in members:
            key, shard, tokens, exact, sig = info[ref]
            if key == kept[0]:
                continue
            reason = "exact" if exact == kept[3] else "near"
            removed[shard].append(key)
            gone.append((names[key[0]], key, tokens))
            counts[corpus_key(names[key[0]], f"dropped_{reason}")] += 1
            if tokens:  # counted only where the build counts tokens (a mix, min_tokens)
                counts[corpus_key(names[key[0]], f"tokens_dropped_{reason}")] += tokens
            line = {"document": document_name(names[key[0]], key), "removed": reason,
                    "kept": document_name(names[kept[0][0]], kept[0])}
            if reason == "near" and sig is not None:
                line["similarity"] = round(similarity(sig, kept[4]), 3)
            lines.append((key, line))
    hits = Counter()
    for r in records:
        if isinstance(r, Contaminated):
            counts[corpus_key(names[r.key[0]], "dropped_contaminated")] += 1
            if r.tokens:
                counts[corpus_key(names[r.key[0]], "tokens_dropped_contaminated")] += r.tokens
            hits[r.eval_file] += 1
            lines.append((r.key, {"document": document_name(names[r.key[0]], r.key), "removed": "contaminated",
                                  "eval": evals[r.eval_file].name, "row": r.row}))
    lines.sort(key=lambda kv: kv[0])
    fsio.write_bytes(fsio.join(folder, AUDIT), b"".join(json.dumps(line).encode() + b"\n" for _, line in lines))
    reasons = Counter()
    for key, line in lines:
        reasons[line["removed"]] += 1
    summary = {"file": AUDIT, "removed": {r: reasons.get(r, 0) for r in ("exact", "near", "contaminated")},
               "clusters": len(clusters)}
    if evals:
        summary["evals"] = {e.name: {"documents_hit": hits.get(n, 0), "rows_too_short": e.short}
                            for n, e in enumerate(evals)}
    return ({k: tuple(sorted(v)) for k, v in removed.items()}, gone, Counts(dict(counts)), DedupSummary(summary))
