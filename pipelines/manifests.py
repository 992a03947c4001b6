"""The DoFns that end each stage by writing its folders' manifest.json (see bertdata.manifest).

A manifest is written once its stage's shards all are, so a folder with a manifest is finished."""

from __future__ import annotations

import re
from dataclasses import replace

from bertdata.text.articles import quality
from bertdata.manifest import MANIFEST, HDF5Shard, Run, write_manifest
from bertdata.pipelines import fsio
from bertdata.pipelines.records import StageRecords
from bertdata.pipelines.resume import remove_temporaries


class WriteTextManifest(fsio.FilesDoFn):
    """Records the finished text stage, so a re-run resumes after it; hands its records on."""

    def __init__(self, tool: dict, run: Run, dump: dict, text_options: dict, work_dir: str):
        super().__init__()
        self.tool, self.run, self.dump, self.text_options, self.work_dir = tool, run, dump, text_options, work_dir

    def process(self, stage: StageRecords):
        texts = sorted(stage.shards, key=lambda r: (r.split, r.index))
        counts = {**stage.counts, "text_shards": len(texts)}
        write_manifest(fsio.join(stage.plan.folder, MANIFEST), {
            "dump": self.dump, "options": self.text_options, "counts": counts, "quality": quality(counts),
            "effective_shards": {"training": stage.plan.training_shards, "test": stage.plan.test_shards},
            "shards": [{**t.manifest_entry(), "split": t.split, "index": t.index, "stem": t.stem} for t in texts]},
            self.tool, self.run.record(), fsio.write_bytes)
        remove_temporaries(self.work_dir)  # the runs' disk is free before instances start
        yield from replace(stage, shards=tuple(texts), counts=counts).records()


class WriteHDF5Manifests(fsio.FilesDoFn):
    """Writes each hdf5 phase folder's manifest.json from what the instance stage handed on;
    `phases`: each folder's options. Hands on the stage's other shards (LDDL runs)."""

    def __init__(self, tool: dict, run: Run, dump: dict, phases: dict[str, dict]):
        super().__init__()
        self.tool, self.run, self.dump, self.phases = tool, run, dump, phases

    def process(self, stage: StageRecords):
        counts = stage.counts
        hdf5 = [r for r in stage.shards if isinstance(r, HDF5Shard)]
        for folder, options in self.phases.items():
            shards = sorted((r for r in hdf5 if r.folder == folder), key=lambda r: _natural(r.file))
            phase_counts = {**counts, "hdf5_shards": len(shards), "tokens": sum(r.tokens for r in shards),
                            "instances": sum(r.instances for r in shards),
                            "random_next": sum(r.random_next for r in shards),
                            "documents": sum(r.documents for r in shards)}
            random_next = round(phase_counts["random_next"] / max(1, phase_counts["instances"]), 4)
            write_manifest(fsio.join(folder, MANIFEST), {
                "dump": self.dump, "options": options, "counts": phase_counts,
                "quality": {**quality(counts), "random_next_share": random_next},
                "shards": [r.manifest_entry() for r in shards]},
                self.tool, self.run.record(reused_shards=sum(r.reused for r in shards)), fsio.write_bytes)
        yield replace(stage, shards=tuple(r for r in stage.shards if not isinstance(r, HDF5Shard)))


def _natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
