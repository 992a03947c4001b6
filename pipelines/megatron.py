"""Text shards -> Megatron-LM's indexed dataset (bertdata.formats.megatron): one .bin/.idx pair per split.

The instance stage tokenizes each text shard once for every format, and writes that shard's
pair there (`write_part`: a "part", under the work folder). Once every shard is done, one step
per split merges its parts in text shard order (`bertdata.formats.megatron.merge`, streamed), and the
folder's manifest.json is written last. So the bytes depend on the text shards alone, never
on which worker made which part.

Parts are scratch, not output: Megatron-LM takes one `--data-path` prefix per dataset (with
a weight each when several are blended), so a split is one pair, as preprocess_data.py and
merge_datasets.py leave it; parts beside it would double the disk and invite a prefix per
text shard. They are removed with the work folder; a killed build's are made again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import apache_beam as beam

from bertdata.formats import megatron
from bertdata.errors import BertdataError
from bertdata.fsutil import TEMP_PREFIX
from bertdata.text.shards import SPLITS, TextShard
from bertdata.manifest import MANIFEST, Run, write_manifest
from bertdata.instances.documents import Documents
from bertdata.pipelines import fsio
from bertdata.pipelines.lddl import WRITING
from bertdata.pipelines.records import Gather, Spread, StageRecords


def parts_folder(work_dir: str) -> str:
    return fsio.join(work_dir, "megatron")


@dataclass(frozen=True)
class MegatronOutput:
    """Where a build's pairs go (`folder`), where their parts go meanwhile, and the names' dataset."""

    folder: str
    parts: str
    dataset: str
    vocab_size: int

    def prefix(self, split: str) -> str:
        return fsio.join(self.folder, megatron.prefix_name(self.dataset, split))

    def file_names(self) -> set[str]:
        return {fsio.split(path)[1] for split in SPLITS for path in megatron.pair_paths(self.prefix(split))}


@dataclass(frozen=True)
class MegatronPart:
    """One text shard's pair under the parts folder (`prefix` None: the shard had no tokens)."""

    split: str
    index: int
    source: str
    source_sha256: str
    prefix: str | None
    documents: int
    sentences: int
    tokens: int

    def source_entry(self) -> dict:
        return {"split": self.split, "file": self.source, "sha256": self.source_sha256}


@dataclass(frozen=True)
class MergeJob:
    split: str
    prefix: str
    parts: tuple[str, ...]


@dataclass(frozen=True)
class MegatronPair:
    """A merged split, as the manifest sees it."""

    split: str
    prefix: str
    merged: megatron.Merged


def sources(shards: list[TextShard]) -> list[dict]:
    """The text shards a folder's pairs are made of, as its manifest records them."""
    return [{"split": s.split, "file": s.stem + ".txt", "sha256": s.sha256}
            for s in sorted(shards, key=lambda s: (SPLITS.index(s.split), s.index))]


def write_part(out: MegatronOutput, record: TextShard, documents: Documents | None) -> MegatronPart:
    """The text shard's documents as a pair under the parts folder."""
    source = (record.split, record.index, record.stem + ".txt", record.sha256)
    if documents is None:
        return MegatronPart(*source, None, 0, 0, 0)
    prefix = fsio.join(out.parts, f"{record.split}-{record.index}")
    bin_path, idx_path = megatron.pair_paths(prefix)
    with fsio.local_output(bin_path) as local_bin, fsio.local_output(idx_path) as local_idx:
        megatron.write_pair(local_bin, local_idx, documents, out.vocab_size)
    return MegatronPart(*source, prefix, documents.num_documents, documents.num_sentences, documents.num_tokens)


def plan_merges(stage: StageRecords, out: MegatronOutput):
    """The instance stage's records -> a MergeJob per split with tokens (its parts in text shard
    order), the parts for the manifest, and the stage without them for the stages after."""
    parts = [s for s in stage.shards if isinstance(s, MegatronPart)]
    yield replace(stage, shards=tuple(s for s in stage.shards if not isinstance(s, MegatronPart)))
    yield from parts
    for split in SPLITS:
        mine = sorted((p for p in parts if p.split == split and p.prefix is not None), key=lambda p: p.index)
        if mine:
            yield MergeJob(split, out.prefix(split), tuple(p.prefix for p in mine))


class _Merge(fsio.FilesDoFn):
    def process(self, record):
        if not isinstance(record, MergeJob):
            yield record
            return
        bin_path, idx_path = megatron.pair_paths(record.prefix)
        # The .bin is renamed into place first (the inner writer), so an .idx never points into nothing.
        with fsio.atomic_writer(idx_path) as idx_out, fsio.atomic_writer(bin_path) as bin_out:
            merged = megatron.merge(record.parts, bin_out, idx_out, fsio.open_file)
        yield MegatronPair(record.split, record.prefix, merged)


class _WriteManifest(fsio.FilesDoFn):
    """The folder's manifest.json, written last: a folder with one is complete. Hands on the
    instance stage's records."""

    def __init__(self, out: MegatronOutput, tool: dict, run: Run, dump: dict, options: dict):
        super().__init__()
        self.out, self.tool, self.run, self.dump, self.options = out, tool, run, dump, options

    def process(self, records: list):
        parts = sorted((r for r in records if isinstance(r, MegatronPart)),
                       key=lambda p: (SPLITS.index(p.split), p.index))
        pairs = sorted((r for r in records if isinstance(r, MegatronPair)), key=lambda p: SPLITS.index(p.split))
        entries = [{"split": p.split, "prefix": fsio.split(p.prefix)[1], "documents": p.merged.documents,
                    "sentences": p.merged.sentences, "tokens": p.merged.tokens,
                    "files": [{"file": fsio.split(path)[1], "bytes": size, "sha256": sha}
                              for path, size, sha in zip(megatron.pair_paths(p.prefix),
                                                         (p.merged.bin_bytes, p.merged.idx_bytes),
                                                         (p.merged.bin_sha256, p.merged.idx_sha256))]}
                   for p in pairs]
        counts = {k: sum(e[k] for e in entries) for k in ("documents", "sentences", "tokens")}
        write_manifest(fsio.join(self.out.folder, MANIFEST), {
            "dump": self.dump, "format": "megatron", "options": self.options,
            "counts": {**counts, "pairs": len(entries),
                       "skipped_empty_text_shards": sum(p.prefix is None for p in parts)},
            "pairs": entries, "sources": [p.source_entry() for p in parts]},
            self.tool, self.run.record(), fsio.write_bytes)
        fsio.delete([fsio.join(self.out.folder, WRITING)])
        yield next(r for r in records if isinstance(r, StageRecords))


class MergeMegatronParts(beam.PTransform):
    """The instance stage's StageRecords (its shards: MegatronPart among others) -> the split's
    pairs merged and the manifest written; the StageRecords without the parts go on."""

    def __init__(self, out: MegatronOutput, tool: dict, run: Run, dump: dict, options: dict):
        super().__init__()
        self.out, self.manifest = out, _WriteManifest(out, tool, run, dump, options)

    def expand(self, gathered):
        return (
            gathered
            | "PlanMerges" >> beam.FlatMap(plan_merges, self.out)
            | "SpreadMerges" >> Spread()
            | "MergeParts" >> beam.ParDo(_Merge())
            | "GatherPairs" >> Gather()
            | "MegatronManifest" >> beam.ParDo(self.manifest)
        )


def prepare_folder(out: MegatronOutput, options: dict, finished_sources: list[dict] | None, force: bool) -> bool:
    """False when the folder already holds this build's pairs: its manifest records the same
    options and the same text shards (`finished_sources`; None when the text is made anew, so
    not known yet). Else True, once what an earlier build of ours left there is cleared. Pair
    files that no bertdata build recorded are refused unless `force`; another vocab's too."""
    listed = {fsio.split(path)[1]: path for path in fsio.match(fsio.join(out.folder, "*"))}
    if MANIFEST in listed and not force:
        try:
            manifest = json.loads(fsio.read_bytes(listed[MANIFEST]))
        except ValueError:
            raise BertdataError(f"{listed[MANIFEST]}: not a readable JSON manifest; pass --force to replace "
                                "the folder's pairs") from None
        if manifest.get("options") != options:
            raise BertdataError(f"{out.folder}: holds Megatron pairs made with another vocab or options (see its "
                                f"{MANIFEST}); pass --force to replace them, or choose another --output")
        recorded = {f["file"] for pair in manifest.get("pairs", []) for f in pair["files"]}
        if (finished_sources is not None and manifest.get("sources") == finished_sources
                and WRITING not in listed and recorded <= listed.keys()):
            return False
    ours = [name for name in listed if name in out.file_names()]
    if ours and not (WRITING in listed or MANIFEST in listed or force):
        raise BertdataError(f"{out.folder}: holds {ours[0]}, which no bertdata build recorded; pass --force to "
                            "replace it, or choose another --output")
    fsio.write_bytes(fsio.join(out.folder, WRITING), b"")
    stale = [listed[name] for name in listed if name in ours or name == MANIFEST or name.startswith(TEMP_PREFIX)]
    if stale:
        fsio.delete(stale)
    return True
