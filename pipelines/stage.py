"""The stage contract (see bertdata.pipelines.chain, which plans and chains the stages), split as
datatrove splits its steps from their executor: what a stage runs (`Stage`), its folders
(`Folders`), and the one folder policy the chain applies to every stage (`FolderPolicy`); what
a format's own stages are planned from (`BuildInputs`), and what a stage's start and end read of
those (`EndInputs`).

A stage states its records (what it reads of what the stages before hand on, what it makes, what
no later stage reads), its Beam steps and their start, its counts and its manifests. A stage that
needs something of every text shard's instance work (runs per phase, a part per shard) says so
in `sinks`, and the instance stage hands each text shard to them (bertdata.pipelines.stages.instances).
Its `folders` name where it writes and the format they hold (for the build's summary line);
`decide` says, before any work, whether this run reuses what is there, runs, or is refused (one
line naming the folder), reading only; once every stage is decided, `place` puts what the stage
needs in place whether it runs or is reused, and `clear` removes what a killed run of it left,
if it runs; once its manifests are written, `clean_up` removes what of its run no later stage
reads (all removing is bertdata.pipelines.cleanup's). FolderPolicy does these in that order for
every stage.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import apache_beam as beam

from bertdata.config import BuildConfig, InstanceConfig, TextConfig
from bertdata.dedup.evals import flag_decontamination
from bertdata.dedup.minhash import DedupConfig
from bertdata.instances.vocab import Vocab
from bertdata.text.shards import WORK_FOLDER
from bertdata.text.wikidump import Site
from bertdata.text.wikitext import RULES_VERSION
from bertdata.text.articles import BOOKS_SOURCE, WIKI_SOURCE
from bertdata.pipelines.cleanup import remove_leftovers, remove_temporaries
from bertdata.pipelines.manifests import Provenance
from bertdata.pipelines.records import StageRecords
from bertdata.pipelines.resume import RULES
from bertdata.pipelines.runtime import fsio
from bertdata.pipelines.stages.dedup import Screening


# The sources of a build from a dump, by their documents' keys' rank, as dedup names them.
DUMP_SOURCES = tuple(name for _, name in sorted(((WIKI_SOURCE, "wiki"), (BOOKS_SOURCE, "books"))))


@dataclass(frozen=True)
class Decision:
    """What a build does with a stage: run it, or reuse what a finished one wrote (`handed_on`:
    what it hands the stages after, when they need it). `line`: what the user is told, if anything.
    A refusal is no decision: `decide` raises a BertdataError naming the folder."""

    run: bool
    line: str | None = None
    handed_on: StageRecords | None = None


class Folders:
    """A stage's folders as the folder policy sees them (FolderPolicy, which applies it to every
    stage alike): where the stage writes and the format they hold; whether what is there is
    finished (reused), to be written, or refused; what the stage puts in place whether it runs or
    not; what a killed run left; and, once its manifests are written, its temporaries."""

    format: str | None = None  # the registry name of the format its folders hold (None: text shards)
    paths: tuple[str, ...] = ()

    def folder_formats(self) -> list[tuple[str | None, str]]:
        """(format, folder) for each of its folders, for the build's summary lines."""
        return [(self.format, folder) for folder in self.paths]

    def decide(self, force: bool) -> Decision:
        """Reads the folders, writes nothing: reuse (a finished folder, by its manifest), run, or
        a refusal (a BertdataError naming the folder)."""
        raise NotImplementedError

    def place(self) -> None:
        """Once every stage is decided, whether this one runs or is reused: what it puts in place
        besides its folders."""

    def clear(self) -> None:
        """Once every stage is decided, before a stage that runs: remove what a killed run of it left."""
        remove_leftovers(list(self.paths))

    def clean_up(self) -> None:
        """Once its manifests are written: remove the temporaries of its run that no later stage reads."""


class FolderPolicy:
    """The one folder policy of a build, which the chain (bertdata.pipelines.chain) applies to
    every stage, as datatrove's executor does to its steps: every stage decided before anything
    is written (a refusal leaves the output as it was); once all are, each puts in place what it
    needs, each that runs has a killed run's leftovers cleared, and the work folder's temporaries
    go; a stage's temporaries go once its manifests are written. `force`: refuse nothing."""

    def __init__(self, force: bool):
        self.force = force

    def decide(self, stage: Stage) -> Decision:
        return stage.folders.decide(self.force)

    @staticmethod
    def prepare(decided: list[tuple[Stage, Decision]], work_dir: str) -> None:
        for stage, _ in decided:
            stage.folders.place()
        for stage, decision in decided:
            if decision.run:
                stage.folders.clear()
        remove_temporaries(work_dir)  # a killed run's, which this run's progress would count

    @staticmethod
    def finish(stage: Stage) -> None:
        stage.folders.clean_up()


class Stage:
    """What one step of the build runs, as the runner sees it: its records (what it reads of what
    the stages before hand on, what it makes, what no later stage reads), its sinks in the instance
    stage, its start and Beam steps, its counts and manifests. Its folders (`folders`, a Folders)
    are the folder policy's (FolderPolicy)."""

    name: str  # the Beam steps' label
    reads: tuple[type, ...] = ()  # the kinds of record it needs of what the stages before hand on
    makes: tuple[type, ...] = ()  # the kinds of record its steps (or, reused, its manifest) hand on
    ends: tuple[type, ...] = ()  # the kinds of record no stage after this one reads

    @property
    def folders(self) -> Folders:
        """Its folders as the folder policy sees them: made from the stage's own fields whenever
        asked, so they travel with no state of their own."""
        raise NotImplementedError

    @property
    def format(self) -> str | None:
        return self.folders.format

    def sinks(self) -> dict:
        """What it needs of the instance stage, when it runs: {InstanceConfig: sink} for a phase's
        instances of each text shard, {None: sink} for each text shard's documents."""
        return {}

    def start(self, handed: StageRecords) -> list:
        """The elements the stage's steps begin from; what the stages before handed on is among them."""
        return handed.elements()

    def steps(self) -> beam.PTransform:
        raise NotImplementedError

    def counts(self, stage: StageRecords) -> dict:
        """Counts the finished stage adds to what its steps counted."""
        return {}

    def write_manifests(self, stage: StageRecords, provenance: Provenance) -> None:
        raise NotImplementedError

    def ended(self, record) -> bool:
        return isinstance(record, self.ends)

    def __getstate__(self) -> dict:
        # A stage is pickled for the steps that start and end it: without what only planning
        # reads (see EndInputs).
        state = dict(self.__dict__)
        if isinstance(state.get("inputs"), BuildInputs):
            state["inputs"] = state["inputs"].at_end()
        return state


@dataclass(frozen=True)
class BuildInputs:
    """What the stages are planned from: the config and the resolved inputs."""

    cfg: BuildConfig  # its runner's workers resolved
    dump: str
    index: str | None
    dump_record: dict
    vocab: Vocab | None  # None where no format uses it (pipelines.inputs.uses_vocab)
    site: Site
    text: TextConfig  # lowercase settled against the vocab
    dataset: str
    books: list[str]
    splitter: object
    punkt_model: str | None
    corpora: object = None  # a recipe's Corpora (bertdata.pipelines.corpora), None for a dump and books
    splitters: tuple = ()  # a recipe's: (language, splitter) for each of its corpora's languages
    evals: tuple = ()  # a dump's build's --decontaminate files, checked (pipelines.corpora.EvalFile)

    @property
    def work_dir(self) -> str:
        return fsio.join(self.cfg.output, WORK_FOLDER)

    @functools.cached_property
    def text_options(self) -> dict:
        options = {"text": asdict(self.text), "books": [fsio.split(b)[1] for b in self.books],
                   "dataset": self.dataset, RULES: RULES_VERSION, "language": self.site.language,
                   "punkt": self.punkt_model or "trained on the dump"}
        if self.corpora is not None:
            options["recipe"] = self.corpora.recipe.record()
            options["counted_by"] = self.counted_by
        else:  # recorded only where asked, so a build without them keeps its options (and reuse)
            screening = self.screening
            if screening is not None and screening.dedup is not None:
                options["dedup"] = screening.dedup.record()
            if screening is not None and screening.decontaminate is not None:
                options["decontaminate"] = {"ngram": screening.decontaminate.ngram,
                                            "against": [{"file": e.name, "type": e.type, "text": e.text,
                                                         "sha1": e.sha1} for e in screening.evals]}
        return options

    @functools.cached_property
    def screening(self):
        """What the text stage screens documents for (pipelines.stages.dedup.Screening): a recipe's
        dedup: and decontaminate:, or --dedup and --decontaminate; None where neither is asked."""
        if self.corpora is not None:
            recipe = self.corpora.recipe
            if recipe.dedup is None and recipe.decontaminate is None:
                return None
            return Screening(recipe.dedup, recipe.decontaminate, self.corpora.evals, recipe.names)
        if not self.cfg.dedup and not self.cfg.decontaminate:
            return None
        return Screening(DedupConfig() if self.cfg.dedup else None, flag_decontamination(self.cfg.decontaminate),
                         self.evals, DUMP_SOURCES)

    @property
    def counted_by(self) -> dict | None:
        """Which tokenizer counts a recipe's tokens for its mix and min_tokens, by name and sha256
        (None: no count is needed): --tokenizer's where it is given, else the vocab's."""
        recipe = self.corpora.recipe if self.corpora is not None else None
        if recipe is None or (recipe.mix is None and not any(c.min_tokens for c in recipe.corpora)):
            return None
        counter = self.tokenizer_file or self.vocab
        return {"tokenizer": fsio.split(counter.path)[1], "sha256": counter.sha256}

    @functools.cached_property
    def tokenizer_file(self):
        """--tokenizer's file as a TokenizerSpec (bertdata.instances.tokenizer_spec), read once here:
        every format and, pickled with its bytes, every worker gets this one, so a pipe, or a file
        replaced during the build, makes one tokenizer throughout; None without --tokenizer."""
        if self.cfg.documents.tokenizer is None:
            return None
        from bertdata.instances.tokenizer_spec import TokenizerSpec

        return TokenizerSpec.of_file(self.cfg.documents.tokenizer)

    @functools.cached_property
    def vocab_tokenizer(self):
        """The WordPiece vocab's TokenizerSpec, in the text's case; None where no format uses the vocab."""
        if self.vocab is None:
            return None
        from bertdata.instances.tokenizer_spec import TokenizerSpec

        return TokenizerSpec.of_vocab(self.vocab, self.text.lowercase)

    @property
    def documents_tokenizer(self):
        """What the formats holding documents tokenize with: --tokenizer's file where it is given,
        else the vocab's WordPiece (None where that is not known yet: it comes with the dump)."""
        return self.tokenizer_file if self.cfg.documents.tokenizer is not None else self.vocab_tokenizer

    def instance_options(self, p: InstanceConfig) -> dict:
        return self.at_end().instance_options(p)

    def at_end(self) -> EndInputs:
        vocab = self.vocab
        return EndInputs(self.text_options, self.work_dir, vocab and vocab.sha256, vocab and len(vocab),
                         self.text.lowercase, self.cfg.same_seed_per_shard)


@dataclass(frozen=True)
class EndInputs:
    """What a stage's start and end (its counts and manifests, in a worker) read of its inputs. A
    stage pickles with these in place of its BuildInputs, whose vocab (30,000 tokens) and sentence
    splitter serve the launcher's planning only: Beam pickles each step that carries a stage in the
    launcher and again in every worker (bz2 at level 9), and the vocab made each such pickle ~25 ms."""

    text_options: dict
    work_dir: str
    vocab_sha256: str | None
    vocab_size: int | None
    lowercase: bool
    same_seed_per_shard: bool

    def instance_options(self, p: InstanceConfig) -> dict:
        return {**self.text_options, "instances": p.record(), "vocab_sha256": self.vocab_sha256,
                "vocab_size": self.vocab_size, "lowercase": self.lowercase,
                "seed_per_shard": "same" if self.same_seed_per_shard else "derived"}
