"""Text shards -> the formats cut per split (bertdata.formats: PER_SPLIT; Megatron's pairs, MDS,
Hugging Face parquet), one stage each, every one written the same way by its format's own
`SplitFormat` methods.

The instance stage tokenizes each text shard once for every tokenizer in use, and hands its
documents to each such format (`SplitOutput.take`), which writes the shard's part under the
work folder. Once every shard is done, one step per split makes the split's parts, in text
shard order, into the format's files (`finish_split`: merged, numbered, indexed), and the
folder's last files and its manifest.json are written last. So the bytes depend on the text
shards alone, never on which worker made which part. Parts are scratch, not output: they are
removed with the work folder, and a killed build's are made again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import apache_beam as beam

from bertdata.config import BuildConfig, InstanceConfig
from bertdata.errors import BertdataError
from bertdata.formats import DocumentTokenizer, LocatedPart, SplitFormat, SplitManifest, SplitSettings
from bertdata.instances.vocab import Vocab
from bertdata.manifest import MANIFEST
from bertdata.text.shards import SPLITS, TextShard
from bertdata.pipelines.cleanup import mark_and_clear
from bertdata.pipelines.manifests import WRITING, Provenance, recorded_manifest
from bertdata.pipelines.records import SplitPart, Spread, StageRecords, StepDoFn
from bertdata.pipelines.runtime import fsio
from bertdata.pipelines.runtime.pool import working_on
from bertdata.pipelines.stage import BuildInputs, Decision, Folders, Stage


@dataclass(frozen=True)
class SplitJob:
    """A split's parts of one format, in text shard order, to be made into its files."""

    format: str
    split: str
    parts: tuple[SplitPart, ...]


@dataclass(frozen=True)
class SplitDone:
    """A finished split of one format: its manifest entry."""

    format: str
    split: str
    entry: dict


@dataclass(frozen=True)
class SplitOutput:
    """One format cut per split in a build: the format, its folder, the scratch folder of its
    parts, and what its writer is told of the build."""

    format: SplitFormat
    folder: str
    parts: str
    settings: SplitSettings
    # What its documents are tokenized with: the build's TokenizerSpec (BuildInputs.documents_tokenizer,
    # --tokenizer's file or the WordPiece vocab's); None where only the folder's name is asked.
    tokenizer: Any = None

    # As the instance stage's sink for every text shard (see Stage.sinks): its part, from the
    # shard's documents as `tokenizer` makes them.
    record: ClassVar[type] = SplitPart

    def take(self, shard: TextShard, documents: Any) -> SplitPart:
        source = (self.format.name, shard.split, shard.index, shard.stem + ".txt", shard.sha256)
        if documents is None:
            return SplitPart(*source, None, {})
        working_on(f"the {self.format.name} part of text shard {shard.stem}")
        scratch = fsio.join(self.parts, f"{shard.split}-{shard.index}")
        with fsio.local_folder(scratch) as local:
            part = self.format.write_part(shard, documents, self.settings, local)
        counts = {"documents": documents.num_documents, "sentences": documents.num_sentences,
                  "tokens": documents.num_tokens}
        return SplitPart(*source, LocatedPart(scratch, part), counts)

    def files(self) -> dict[str, str]:
        """What its folder holds of the format's: {path relative to the folder: path}."""
        return {rel: path for rel, path in fsio.tree(self.folder).items() if self.format.ours(rel)}


def sources(shards: list[TextShard]) -> list[dict]:
    """The text shards a folder is made of, as its manifest records them (see SplitPart.source_entry)."""
    return [{"split": s.split, "file": s.stem + ".txt", "sha256": s.sha256}
            for s in sorted(shards, key=lambda s: (SPLITS.index(s.split), s.index))]


def plan_jobs(stage: StageRecords, out: SplitOutput):
    """The instance stage's SplitParts of the format -> a SplitJob per split with tokens (its
    parts in text shard order)."""
    mine = [p for p in stage.of_kind(SplitPart) if p.format == out.format.name and p.part is not None]
    for split in SPLITS:
        parts = sorted((p for p in mine if p.split == split), key=lambda p: p.index)
        if parts:
            yield SplitJob(out.format.name, split, tuple(parts))


class _FinishSplit(StepDoFn):
    takes = (SplitJob,)

    def __init__(self, out: SplitOutput):
        super().__init__()
        self.out = out

    def work(self, record: SplitJob):
        if record.format != self.out.format.name:
            yield record
            return
        working_on(f"the {record.format} files of the {record.split} split")
        parts = [p.part for p in record.parts]
        entry = self.out.format.finish_split(record.split, parts, self.out.settings, self.out.folder, fsio)
        yield SplitDone(record.format, record.split, entry)


def write_manifest(stage: StageRecords, provenance: Provenance, out: SplitOutput, options: dict) -> None:
    """The folder's last files, then its manifest.json, written last: a folder with one is complete."""
    name = out.format.name
    parts = [p for p in stage.of_kind(SplitPart) if p.format == name]
    done = sorted((d for d in stage.of_kind(SplitDone) if d.format == name), key=lambda d: SPLITS.index(d.split))
    entries = [{"split": d.split, **d.entry} for d in done]
    # Text, but no token of it: a manifest would mark an empty folder complete, for every later run
    # to reuse. (No text at all is the whole build's refusal: a dump without articles.)
    if not entries and any(stage.counts.get(k) for k in ("articles", "books")):
        raise BertdataError(f"{out.folder}: the tokenizer ({out.settings.tokenizer.name}) made no token of any text "
                            "shard; nothing is written")
    extra = out.format.finish_folder(entries, out.settings, out.folder, fsio)
    if out.settings.tokenizer_file:
        # Beside the splits, so that the folder is read (`bench --data`) with no other file at hand:
        # the bytes the build tokenized with, as it read them.
        tokenizer = out.settings.tokenizer
        data = out.tokenizer.data if out.tokenizer is not None and out.tokenizer.data is not None \
            else fsio.read_bytes(tokenizer.path)
        fsio.write_bytes(fsio.join(out.folder, tokenizer.name), data)
    made = [(p.counts, p.part is not None) for p in parts]
    ordered = sorted(parts, key=lambda p: (SPLITS.index(p.split), p.index))
    provenance.write(out.folder, SplitManifest.made(name, options, made, entries, [p.source_entry() for p in ordered],
                                                    extra).record())
    fsio.delete([fsio.join(out.folder, WRITING)])


def recorded_files(manifest: dict) -> set[str]:
    return {f["file"] for entry in manifest.get("splits", []) for f in entry.get("files", [])}


@dataclass
class SplitFolder(Folders):
    """The folder of a format cut per split: reused when it holds this build's files, its manifest
    recording the same options and the same text shards (`finished_sources`: the reused text
    stage's; None: text made anew, so nothing is reused); marked as being written and cleared
    before it runs."""

    out: SplitOutput
    options: dict
    finished_sources: list[dict] | None

    @property
    def format(self) -> str:
        return self.out.format.name

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.out.folder,)

    def decide(self, force: bool) -> Decision:
        """Reuse the folder when it holds this build's files, its manifest recording the same
        options and the same text shards; refuse files that no bertdata build recorded (or
        another tokenizer's, or other options') unless `force`."""
        listed = fsio.listing(self.out.folder)
        manifest = recorded_manifest(self.out.folder, listed, self.options, force, f"{self.format} files",
                                     f"{self.format} files made with another vocab, tokenizer or options")
        ours = self.out.files()
        if manifest is not None:
            if (self.finished_sources is not None and manifest.get("sources") == self.finished_sources
                    and WRITING not in listed and recorded_files(manifest) <= ours.keys()):
                return Decision(False, f"{self.out.folder}: already complete, kept")
        if ours and not (WRITING in listed or MANIFEST in listed or force):
            raise BertdataError(f"{self.out.folder}: holds {min(ours)}, which no bertdata build recorded; pass "
                                "--force to replace it, or choose another --output")
        return Decision(True)

    def clear(self) -> None:
        """Mark the folder as being written, and clear what an earlier build of ours (or, with
        --force, anyone) left there: `decide` said it may."""
        mark_and_clear(self.out.folder, self.out.format.ours)


@dataclass
class SplitStage(Stage):
    """The instance stage's parts of one format -> its files, split by split."""

    out: SplitOutput
    options: dict
    finished_sources: list[dict] | None  # the reused text stage's shards; None: text made anew
    reads = (SplitPart,)
    makes = (SplitDone,)

    @property
    def name(self) -> str:
        return self.out.format.name.capitalize()

    @property
    def folders(self) -> SplitFolder:
        return SplitFolder(self.out, self.options, self.finished_sources)

    def ended(self, record) -> bool:
        # Its own records only: the stages of the other formats cut per split read theirs after it.
        return isinstance(record, (SplitPart, SplitDone)) and record.format == self.out.format.name

    def sinks(self) -> dict:
        return {None: self.out}

    def start(self, handed: StageRecords) -> list:
        return [*handed.elements(), *plan_jobs(handed, self.out)]

    def steps(self) -> beam.PTransform:
        return FinishSplits(self.out)

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        write_manifest(stage, provenance, self.out, self.options)


class FinishSplits(beam.PTransform):
    """SplitJob records (see `plan_jobs`) -> a SplitDone per split, made by whichever worker is free."""

    def __init__(self, out: SplitOutput):
        super().__init__()
        self.out = out

    def expand(self, records):
        return (
            records
            | "SpreadSplits" >> Spread()
            # Finishing reads parts, not text: no tokenizer (a file's bytes, a vocab) to ship.
            | "FinishSplits" >> beam.ParDo(_FinishSplit(replace(self.out, tokenizer=None)))
        )


def document_tokenizer(tokenizer) -> DocumentTokenizer:
    """What the formats holding documents are told of a tokenizer (a WordPiece of the vocab, or
    a TokenizerFile: a TokenizerSpec opened), checked against the samples' length before any work."""
    return DocumentTokenizer(tokenizer.name, tokenizer.sha256, tokenizer.vocab_size, tuple(tokenizer.prefix),
                             tuple(tokenizer.suffix), tokenizer.path, tokenizer.max_length)


def settings(fmt: SplitFormat, cfg: BuildConfig, spec, dataset: str, lowercase: bool,
             language: str = "", dump: str = "") -> SplitSettings:
    """What the format's writer is told; `spec` the TokenizerSpec its documents are tokenized with
    (BuildInputs.documents_tokenizer), None where it is not known: for its folder's name alone (a dry run)."""
    flags = tuple((flag, value) for name, flag, value in cfg.format_flags if name == fmt.name)
    path = cfg.documents.tokenizer
    tokenizer = None
    if spec is not None:
        from bertdata.instances.samples import check_sample_length

        tokenizer = document_tokenizer(spec.open())
        check_sample_length(tokenizer, cfg.documents.max_seq_length)
    return SplitSettings(dataset, lowercase, tokenizer, cfg.documents.max_seq_length, flags,
                         tokenizer_file=path is not None, label=tokenizer_label(path, lowercase), language=language,
                         dump=dump)


def tokenizer_label(path: str | None, lowercase: bool) -> str:
    """The tokenizer's part of a folder's name: the vocab's case, or the tokenizer file's folder
    (tokenizer.json files are named alike; a hub model's folder names it) or else its stem."""
    if path is None:
        return f"lower_case_{int(lowercase)}"
    folder, name = fsio.split(path)
    label = fsio.split(folder)[1] if name == "tokenizer.json" and fsio.split(folder)[1] else name.rsplit(".", 1)[0]
    # One plain folder name, whatever the file's: "..", a slash or a newline would put the folder
    # elsewhere, or break the dataset card's YAML.
    label = re.sub(r"[^\w.+-]+", "_", label).lstrip(".")
    return label or "tokenizer"


def output(fmt: SplitFormat, inputs: BuildInputs) -> SplitOutput:
    spec = inputs.documents_tokenizer
    s = settings(fmt, inputs.cfg, spec, inputs.dataset, inputs.text.lowercase, inputs.site.language,
                 inputs.dump_record["name"])
    return SplitOutput(fmt, fsio.join(inputs.cfg.output, fmt.folder(s)), fsio.join(inputs.work_dir, fmt.name), s, spec)


def plan(fmt: SplitFormat, inputs: BuildInputs, chosen: tuple[InstanceConfig, ...],
         reused_text: StageRecords | None) -> list[Stage]:
    """The format's stage in a build, undecided: one, whatever the phases, when instances are made at all."""
    if not chosen:
        return []
    out = output(fmt, inputs)
    finished = None if reused_text is None else sources(reused_text.of_kind(TextShard))
    return [SplitStage(out, fmt.options(out.settings), finished)]


def dry_run(fmt: SplitFormat, cfg: BuildConfig, chosen: tuple[InstanceConfig, ...], dataset: str,
            lowercase: bool, training_shards: int, vocab: Vocab | None = None,
            text: StageRecords | None = None) -> list[str]:
    """`build --dry-run`'s line for the format's stage, decided by the stage's own `decide`, as the
    build decides it: `vocab` the build's, where it is known before a download; `text` what the
    text stage a build would reuse hands on. --tokenizer's file is read, as the build reads it."""
    if not chosen:
        return []
    from bertdata.instances.tokenizer_spec import TokenizerSpec

    if cfg.documents.tokenizer is not None:
        spec = TokenizerSpec.of_file(cfg.documents.tokenizer)
    else:
        spec = None if vocab is None else TokenizerSpec.of_vocab(vocab, lowercase)
    s = settings(fmt, cfg, spec, dataset, lowercase)
    where = fsio.join(cfg.output, fmt.folder(s))
    if s.tokenizer is None:  # the vocab comes with the dump: its folder's manifest is all there is to go by
        done = fsio.exists(fsio.join(where, MANIFEST)) and not cfg.force
    else:
        finished = None if text is None else sources(text.of_kind(TextShard))
        stage = SplitStage(SplitOutput(fmt, where, "", s), fmt.options(s), finished)
        done = not stage.folders.decide(cfg.force).run
    return [f"{fmt.name}: {'reuse (complete)' if done else 'run'}: {fmt.writes} -> {where}"]
