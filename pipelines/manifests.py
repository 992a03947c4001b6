"""Each stage's manifest writer (see bertdata.manifest), run by bertdata.pipelines.chain at the
stage's end, once every file of the stage is written: a folder with a manifest is finished."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bertdata.corpora.read import split_corpus_counts
from bertdata.errors import BertdataError
from bertdata.formats import PerShardFormat
from bertdata.fsutil import load_json
from bertdata.text.articles import quality
from bertdata.manifest import MANIFEST, ShardFiles, Run, write_manifest
from bertdata.text.shards import TextShard
from bertdata.pipelines.records import StageRecords
from bertdata.pipelines.stages.dedup import DedupSummary
from bertdata.pipelines.runtime import fsio


# In a folder written across shards while a build writes it: the next build may then replace the
# folder's files, which otherwise only --force may. Hidden and without an extension, so no loader reads it.
WRITING = ".bertdata-writing"


def recorded_manifest(folder: str, listed: dict[str, str], options: dict, force: bool, holds: str,
                      made_otherwise: str) -> dict | None:
    """The manifest a folder's finished build left (None: there is none, or --force), once it is
    known to record these `options`: an unreadable one, or one of other options, is refused."""
    if MANIFEST not in listed or force:
        return None
    try:
        manifest = load_json(fsio.read_bytes(listed[MANIFEST]))
        if not isinstance(manifest, dict):
            raise ValueError("not an object")
    except ValueError:
        raise BertdataError(f"{listed[MANIFEST]}: not a readable JSON manifest; pass --force to replace "
                            f"the folder's {holds}") from None
    if manifest.get("options") != options:
        raise BertdataError(f"{folder}: holds {made_otherwise} (see its {MANIFEST}); pass --force to replace them, "
                            "or choose another --output")
    return manifest


@dataclass(frozen=True)
class Provenance:
    """What every manifest of a build records about it: the tool, the run, the dump."""

    tool: dict
    run: Run
    dump: dict

    def write(self, folder: str, body: dict, **run_fields) -> None:
        write_manifest(fsio.join(folder, MANIFEST), {"dump": self.dump, **body}, self.tool,
                       self.run.record(**run_fields), fsio.write_bytes)


def write_text_manifest(stage: StageRecords, provenance: Provenance, text_options: dict) -> None:
    """The finished text stage, so a re-run resumes after it."""
    texts = sorted(stage.of_kind(TextShard), key=lambda r: (r.split, r.index))
    counts, corpora = split_corpus_counts(stage.counts)
    recipe = {"corpora": corpus_figures(corpora, text_options["recipe"])} if "recipe" in text_options else {}
    dedup = stage.of_kind(DedupSummary)
    if dedup:
        recipe["dedup"] = dedup[0].figures
    provenance.write(stage.plan.folder, {
        "options": text_options, "counts": counts, **recipe, "quality": quality(counts),
        "effective_shards": {"training": stage.plan.training_shards, "test": stage.plan.test_shards},
        "shards": [{**t.manifest_entry(), "split": t.split, "index": t.index, "stem": t.stem} for t in texts]})


def corpus_figures(corpora: dict, recipe: dict) -> dict:
    """Per corpus of a recipe, in its order: documents read, kept and dropped by reason, the tokens
    kept, and the share of the tokens it holds against the share its mix asked."""
    tokens = sum(corpora.get(name, {}).get("tokens", 0) for name in recipe["corpora"])
    figures = {}
    for name in recipe["corpora"]:
        c = corpora.get(name, {})
        figures[name] = {
            "read": c.get("read", 0), "documents": c.get("documents", 0), "tokens": c.get("tokens", 0),
            "dropped": {k.removeprefix("dropped_"): v for k, v in sorted(c.items()) if k.startswith("dropped_")},
            **({"tokens_dropped": {k.removeprefix("tokens_dropped_"): v for k, v in sorted(c.items())
                                   if k.startswith("tokens_dropped_")}}
               if any(k.startswith("tokens_dropped_") for k in c) else {}),
            "asked": recipe["mix"][name] if recipe["mix"] else None,
            "share": round(c.get("tokens", 0) / tokens, 6) if tokens else None}
    return figures


def write_shard_manifests(stage: StageRecords, provenance: Provenance, folder: str, options: dict,
                          fmt: PerShardFormat) -> None:
    """A per-shard phase folder's manifest: its `options`, how `fmt` encodes its files (`layout`)
    and each text shard's files."""
    counts = stage.counts
    shards = sorted((r for r in stage.of_kind(ShardFiles) if r.folder == folder), key=lambda r: _natural(r.file))
    phase_counts = {**counts, f"{fmt.name}_shards": len(shards), "tokens": sum(r.tokens for r in shards),
                    "instances": sum(r.instances for r in shards),
                    "random_next": sum(r.random_next for r in shards),
                    "documents": sum(r.documents for r in shards)}
    random_next = round(phase_counts["random_next"] / max(1, phase_counts["instances"]), 4)
    provenance.write(folder, {
        "options": options, "layout": fmt.layout, "counts": phase_counts,
        "quality": {**quality(counts), "random_next_share": random_next},
        "shards": [r.manifest_entry() for r in shards]},
        reused_shards=sum(r.reused for r in shards))


def _natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
