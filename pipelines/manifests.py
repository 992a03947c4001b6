"""Each stage's manifest writer (see bertdata.manifest), run by bertdata.pipelines.stages at the
stage's end, once every file of the stage is written: a folder with a manifest is finished."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bertdata.text.articles import quality
from bertdata.manifest import MANIFEST, HDF5Shard, Run, write_manifest
from bertdata.text.shards import TextShard
from bertdata.pipelines import fsio
from bertdata.pipelines.records import StageRecords


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
    counts = stage.counts
    provenance.write(stage.plan.folder, {
        "options": text_options, "counts": counts, "quality": quality(counts),
        "effective_shards": {"training": stage.plan.training_shards, "test": stage.plan.test_shards},
        "shards": [{**t.manifest_entry(), "split": t.split, "index": t.index, "stem": t.stem} for t in texts]})


def write_shard_manifests(stage: StageRecords, provenance: Provenance, phases: dict[str, dict]) -> None:
    """Each per-shard phase folder's manifest; `phases`: each folder's options."""
    counts = stage.counts
    written = stage.of_kind(HDF5Shard)
    for folder, options in phases.items():
        shards = sorted((r for r in written if r.folder == folder), key=lambda r: _natural(r.file))
        phase_counts = {**counts, "hdf5_shards": len(shards), "tokens": sum(r.tokens for r in shards),
                        "instances": sum(r.instances for r in shards),
                        "random_next": sum(r.random_next for r in shards),
                        "documents": sum(r.documents for r in shards)}
        random_next = round(phase_counts["random_next"] / max(1, phase_counts["instances"]), 4)
        provenance.write(folder, {
            "options": options, "counts": phase_counts,
            "quality": {**quality(counts), "random_next_share": random_next},
            "shards": [r.manifest_entry() for r in shards]},
            reused_shards=sum(r.reused for r in shards))


def _natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
