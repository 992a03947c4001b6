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

from dataclasses import dataclass
from typing import ClassVar

import apache_beam as beam

from bertdata.config import BuildConfig, InstanceConfig
from bertdata.formats import megatron
from bertdata.errors import BertdataError
from bertdata.text.shards import SPLITS, TextShard
from bertdata.manifest import MANIFEST
from bertdata.instances.documents import Documents
from bertdata.pipelines import fsio
from bertdata.pipelines.manifests import WRITING, Provenance, mark_and_clear, recorded_manifest
from bertdata.pipelines.records import MegatronPair, MegatronPart, MergeJob, Spread, StageRecords, StepDoFn
from bertdata.pipelines.stage import BuildInputs, Decision, Stage


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

    # As the instance stage's sink for every text shard (see Stage.sinks): its part.
    record: ClassVar[type] = MegatronPart

    def take(self, shard: TextShard, documents: Documents | None) -> MegatronPart:
        return write_part(self, shard, documents)


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
    """The instance stage's MegatronParts -> a MergeJob per split with tokens (its parts in text
    shard order)."""
    parts = stage.of_kind(MegatronPart)
    for split in SPLITS:
        mine = sorted((p for p in parts if p.split == split and p.prefix is not None), key=lambda p: p.index)
        if mine:
            yield MergeJob(split, out.prefix(split), tuple(p.prefix for p in mine))


class _Merge(StepDoFn):
    takes = (MergeJob,)

    def work(self, record: MergeJob):
        bin_path, idx_path = megatron.pair_paths(record.prefix)
        # The .bin is renamed into place first (the inner writer), so an .idx never points into nothing.
        with fsio.atomic_writer(idx_path) as idx_out, fsio.atomic_writer(bin_path) as bin_out:
            merged = megatron.merge(record.parts, bin_out, idx_out, fsio.open_file)
        yield MegatronPair(record.split, record.prefix, merged)


class MergeParts(beam.PTransform):
    """MergeJob records (see `plan_merges`) -> a MegatronPair per split, merged by whichever
    worker is free."""

    def expand(self, records):
        return (
            records
            | "SpreadMerges" >> Spread()
            | "MergeParts" >> beam.ParDo(_Merge())
        )


def write_manifest(stage: StageRecords, provenance: Provenance, out: MegatronOutput, options: dict) -> None:
    """The folder's manifest.json, written last: a folder with one is complete."""
    parts = sorted(stage.of_kind(MegatronPart), key=lambda p: (SPLITS.index(p.split), p.index))
    pairs = sorted(stage.of_kind(MegatronPair), key=lambda p: SPLITS.index(p.split))
    entries = [{"split": p.split, "prefix": fsio.split(p.prefix)[1], "documents": p.merged.documents,
                "sentences": p.merged.sentences, "tokens": p.merged.tokens,
                "files": [{"file": fsio.split(path)[1], "bytes": size, "sha256": sha}
                          for path, size, sha in zip(megatron.pair_paths(p.prefix),
                                                     (p.merged.bin_bytes, p.merged.idx_bytes),
                                                     (p.merged.bin_sha256, p.merged.idx_sha256))]}
               for p in pairs]
    counts = {k: sum(e[k] for e in entries) for k in ("documents", "sentences", "tokens")}
    provenance.write(out.folder, {
        "format": "megatron", "options": options,
        "counts": {**counts, "pairs": len(entries), "skipped_empty_text_shards": sum(p.prefix is None for p in parts)},
        "pairs": entries, "sources": [p.source_entry() for p in parts]})
    fsio.delete([fsio.join(out.folder, WRITING)])


def needs_writing(out: MegatronOutput, options: dict, finished_sources: list[dict] | None, force: bool) -> bool:
    """Whether a build writes the folder: not when it already holds this build's pairs, its
    manifest recording the same options and the same text shards (`finished_sources`; None when
    the text is made anew, so not known yet). Reads only: pair files that no bertdata build
    recorded are refused unless `force`; another vocab's too."""
    listed = fsio.listing(out.folder)
    manifest = recorded_manifest(out.folder, listed, options, force, "pairs",
                                 "Megatron pairs made with another vocab or options")
    if manifest is not None:
        recorded = {f["file"] for pair in manifest.get("pairs", []) for f in pair["files"]}
        if (finished_sources is not None and manifest.get("sources") == finished_sources
                and WRITING not in listed and recorded <= listed.keys()):
            return False
    ours = [name for name in listed if name in out.file_names()]
    if ours and not (WRITING in listed or MANIFEST in listed or force):
        raise BertdataError(f"{out.folder}: holds {ours[0]}, which no bertdata build recorded; pass --force to "
                            "replace it, or choose another --output")
    return True


def clear_folder(out: MegatronOutput) -> None:
    """Mark the folder as being written, and clear what an earlier build of ours (or, with
    --force, anyone) left there: `needs_writing` said it may."""
    mark_and_clear(out.folder, lambda name: name in out.file_names())


def folder(cfg: BuildConfig, lowercase: bool) -> str:
    return fsio.join(cfg.output, megatron.folder_name(lowercase))


@dataclass
class MegatronStage(Stage):
    """The instance stage's parts -> one Megatron pair per split."""

    out: MegatronOutput
    options: dict
    finished_sources: list[dict] | None  # the reused text stage's shards; None: text made anew
    name = "Megatron"
    format = megatron.MEGATRON.name
    reads = (MegatronPart,)
    makes = (MegatronPair,)
    ends = (MegatronPart, MegatronPair)

    @property
    def folders(self) -> tuple[str, ...]:
        return (self.out.folder,)

    def decide(self, force: bool) -> Decision:
        if needs_writing(self.out, self.options, self.finished_sources, force):
            return Decision(True)
        return Decision(False, f"{self.out.folder}: already complete, kept")

    def clear(self) -> None:
        clear_folder(self.out)

    def sinks(self) -> dict:
        return {None: self.out}

    def start(self, handed: StageRecords) -> list:
        return [*handed.records(), *plan_merges(handed, self.out)]

    def steps(self) -> beam.PTransform:
        return MergeParts()

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        write_manifest(stage, provenance, self.out, self.options)


def plan(inputs: BuildInputs, chosen: tuple[InstanceConfig, ...], reused_text: StageRecords | None) -> list[Stage]:
    """The format's stage in a build (see bertdata.formats: the registry entry names this module),
    undecided: one, whatever the phases, when instances are made at all."""
    if not chosen:
        return []
    vocab, lowercase = inputs.vocab, inputs.text.lowercase
    options = {"dataset": inputs.dataset, "vocab_sha256": vocab.sha256, "vocab_size": len(vocab),
               "lowercase": lowercase, "dtype": megatron.token_dtype(len(vocab)).name}
    out = MegatronOutput(folder(inputs.cfg, lowercase), parts_folder(inputs.work_dir), inputs.dataset, len(vocab))
    finished = None if reused_text is None else sources(reused_text.of_kind(TextShard))
    return [MegatronStage(out, options, finished)]


def dry_run(cfg: BuildConfig, chosen: tuple[InstanceConfig, ...], dataset: str, lowercase: bool,
            training_shards: int) -> list[str]:
    """`build --dry-run`'s line for the format's stage."""
    if not chosen:
        return []
    where = folder(cfg, lowercase)
    done = fsio.exists(fsio.join(where, MANIFEST)) and not cfg.force
    return [f"{megatron.MEGATRON.name}: {'reuse (complete)' if done else 'run'}: one .bin/.idx pair per split, "
            f"whatever the phases -> {where}"]
