"""Run configuration as frozen dataclasses; the CLI maps flags onto these."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from bertdata.errors import BertdataError

# token: each word piece is masked on its own (the reference NGC's hdf5 were made with);
# whole-word: all pieces of a word or none, as Google's --do_whole_word_mask=True.
MASKING_SCHEMES = ("token", "whole-word")
# BERT's position embeddings (max_position_embeddings) hold 512 positions, in every published
# BERT model and in NGC's recipe: a longer instance could not be trained on.
MAX_SEQ_LENGTH = 512
# Each pass over the documents adds a copy of a shard's instances, all held in memory until the
# shard is shuffled and written (the reference's algorithm): a bound on memory, not on taste.
MAX_DUPE_FACTOR = 1000
# LDDL files per bin. How many rows a bin gets is known only once its instances are made (a
# build then refuses a bin that cannot fill every file); this bound catches the absurd at once.
MAX_LDDL_SHARDS = 100_000
# A sample of a format holding documents: today's long-context encoders train on 8,192 tokens
# (ModernBERT); a bound far above that, yet far below int32 (MDS's `len` column) and memory.
MAX_DOCUMENT_SEQ_LENGTH = 1 << 16


@dataclass(frozen=True)
class InstanceConfig:
    """Parameters of the reference MLM/NSP instance algorithm (defaults = phase 1)."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 5
    random_seed: int = 12345
    masking_scheme: str = MASKING_SCHEMES[0]

    def __post_init__(self) -> None:
        if self.max_seq_length < 5:
            raise BertdataError(f"--max-seq-length must be at least 5 (got {self.max_seq_length})")
        if self.max_seq_length > MAX_SEQ_LENGTH:
            raise BertdataError(f"--max-seq-length must be at most {MAX_SEQ_LENGTH}: BERT's position embeddings "
                                f"(max_position_embeddings) hold {MAX_SEQ_LENGTH} positions "
                                f"(got {self.max_seq_length})")
        if not 1 <= self.max_predictions_per_seq <= self.max_seq_length - 3:
            raise BertdataError(
                f"--max-predictions-per-seq must be between 1 and max-seq-length - 3 = "
                f"{self.max_seq_length - 3} (got {self.max_predictions_per_seq})"
            )
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise BertdataError(f"--masked-lm-prob must be in (0, 1) (got {self.masked_lm_prob})")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise BertdataError(f"--short-seq-prob must be in [0, 1] (got {self.short_seq_prob})")
        if not 1 <= self.dupe_factor <= MAX_DUPE_FACTOR:
            raise BertdataError(f"--dupe-factor must be between 1 and {MAX_DUPE_FACTOR}: each pass adds a copy of "
                                "a shard's instances, all held in memory until the shard is shuffled and written "
                                f"(got {self.dupe_factor})")
        if self.random_seed < 0:
            raise BertdataError(f"--random-seed must be non-negative (got {self.random_seed})")
        if self.masking_scheme not in MASKING_SCHEMES:
            raise BertdataError(f"--masking-scheme must be {' or '.join(MASKING_SCHEMES)} (got {self.masking_scheme!r})")

    def record(self) -> dict:
        """The fields as manifests and shard attributes record them: the masking scheme only where
        it is not token, so that token shards and manifests keep the bytes of releases before it
        (absent means token) and stay reusable by a re-run."""
        fields = asdict(self)
        if self.masking_scheme == MASKING_SCHEMES[0]:
            del fields["masking_scheme"]
        return fields


PHASE1 = InstanceConfig(max_seq_length=128, max_predictions_per_seq=20)
PHASE2 = InstanceConfig(max_seq_length=512, max_predictions_per_seq=80)


@dataclass(frozen=True)
class TextConfig:
    """How the dump becomes text shards (the reference's sharding defaults)."""

    training_shards: int = 256
    test_shards: int = 256
    test_fraction: float = 0.1
    lowercase: bool = True
    # The largest real article is about 1.5 MB of wikitext; 5 MB leaves room for growth
    # while refusing the generated or vandalised monsters that would stall a worker.
    max_page_chars: int = 5_000_000
    keep_lists: bool = False
    # Counts the user chose are kept (with a warning where shards come out too small);
    # default counts are halved until shards hold this many documents on average.
    fixed_shards: bool = False
    min_shard_documents: int = 32

    def __post_init__(self) -> None:
        if self.training_shards < 1 or self.test_shards < 1:
            raise BertdataError("--training-shards and --test-shards must be at least 1")
        if not 0.0 <= self.test_fraction < 1.0:
            raise BertdataError(f"--test-fraction must be in [0, 1) (got {self.test_fraction})")


@dataclass(frozen=True)
class RunnerConfig:
    """Which Beam runner; `local` is FnApiRunner with one process per worker."""

    runner: str = "local"
    workers: int = 0  # 0: one per core
    beam_args: tuple[str, ...] = ()


def phase_number(cfg: InstanceConfig) -> int:
    """Which of NGC's two phases instances of this length are for (1: short, 2: long)."""
    return 1 if cfg.max_seq_length <= PHASE1.max_seq_length else 2


# What `--format both` stood for before Megatron's format came: the two instance formats.
BOTH_FORMATS = ("hdf5", "lddl")
# How punkt's sentence boundaries are found: `fast` (bertdata.text.fastpunkt), or NLTK's own code,
# the reference, which gives the same sentences slower.
SPLITTERS = ("fast", "nltk")


def lddl_files_per_bin(num_shards: int | None, training_shards: int) -> int:
    """LddlConfig.num_shards, or its default: one file per training text shard, and two at least,
    as the loader wants a bin's largest file one row longer than its smallest."""
    return num_shards or max(2, training_shards)


@dataclass(frozen=True)
class LddlConfig:
    """How a build writes LDDL parquet, the input of NVIDIA's current BERT recipe."""

    masking: str = "static"  # static: the instances' masks; dynamic: the loader masks anew each epoch
    # Phase 2's bins of sequence lengths, as NGC's script; phase 1 stays unbinned. None: unbinned.
    bin_size: int | None = 64
    num_shards: int | None = None  # files per bin; None: lddl_files_per_bin

    def bin_size_for(self, phase: InstanceConfig) -> int | None:
        return self.bin_size if phase_number(phase) == 2 else None

    def __post_init__(self) -> None:
        if self.masking not in ("static", "dynamic"):
            raise BertdataError(f"--masking must be static or dynamic (got {self.masking})")
        if self.bin_size is not None and self.bin_size < 1:
            raise BertdataError(f"--bin-size must be at least 1, or 0 for unbinned (got {self.bin_size})")
        if self.num_shards is not None and self.num_shards < 2:
            raise BertdataError(f"--num-shards must be at least 2: LDDL's loader wants the largest file of a "
                                f"bin one row longer than the smallest (got {self.num_shards})")
        if self.num_shards is not None and self.num_shards > MAX_LDDL_SHARDS:
            raise BertdataError(f"--num-shards must be at most {MAX_LDDL_SHARDS:,}: every file of a bin needs rows "
                                f"of its own, so a bin would need more than {MAX_LDDL_SHARDS:,} instances "
                                f"(got {self.num_shards})")


# The samples of the formats holding documents (mds, parquet): ModernBERT's and MosaicBERT's
# recipes train on sequences of up to 1,024 tokens.
DOCUMENT_SEQ_LENGTH = 1024


@dataclass(frozen=True)
class DocumentConfig:
    """How a build writes the formats that hold documents (mds, parquet, megatron)."""

    # A document longer than this, special tokens included, is cut at sentence boundaries into
    # pieces of at most this many tokens, one sample each (mds, parquet).
    max_seq_length: int = DOCUMENT_SEQ_LENGTH
    # A Hugging Face tokenizers file (tokenizer.json: BPE, Unigram or WordPiece); None: the
    # build's WordPiece vocab, as the instance formats use it.
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        if self.max_seq_length < 3:
            raise BertdataError(f"--max-seq-length must be at least 3 (got {self.max_seq_length})")
        if self.max_seq_length > MAX_DOCUMENT_SEQ_LENGTH:
            raise BertdataError(f"--max-seq-length must be at most {MAX_DOCUMENT_SEQ_LENGTH:,} for the formats "
                                f"holding documents: ModernBERT's longest samples are 8,192 tokens, and a sample "
                                f"is held whole in memory (got {self.max_seq_length:,})")


@dataclass(frozen=True)
class BuildConfig:
    output: str = "data"
    dump: str | None = None  # a path or URL; None downloads the dump
    index: str | None = None  # multistream index; found beside the dump when None
    date: str = "latest"
    mirror: str = "https://dumps.wikimedia.org"
    wiki: str = "enwiki"  # which Wikipedia to download
    lang: str | None = None  # the dump's language where neither siteinfo nor file name says
    punkt_language: str | None = None  # a punkt model to use instead of the language's own
    splitter: str = SPLITTERS[0]
    sample: bool = False
    wiki_only: bool = False
    books: str | None = None
    recipe: str | None = None  # a recipe's YAML: the corpora read and mixed, instead of a dump (docs/recipes.md)
    # A build from a dump: dedup (exact and MinHash, the recipe's `dedup: true`) and the evaluation
    # files decontaminated against (FILE or FILE=KEY; docs/dedup.md). A recipe states its own.
    dedup: bool = False
    decontaminate: tuple[str, ...] = ()
    vocab: str | None = None
    text: TextConfig = TextConfig()
    phases: tuple[InstanceConfig, ...] = (PHASE1, PHASE2)
    same_seed_per_shard: bool = False
    stop_after: str | None = None  # "download" or "text"
    force: bool = False
    runner: RunnerConfig = RunnerConfig()
    formats: tuple[str, ...] = ("hdf5",)
    lddl: LddlConfig = LddlConfig()
    documents: DocumentConfig = DocumentConfig()
    # The formats' own flags (--<format>-<flag>): (format, flag, value), for those given.
    format_flags: tuple[tuple[str, str, object], ...] = ()
    check_disk: bool = True  # refuse a build whose estimated output and temporaries exceed the free disk

    def __post_init__(self) -> None:
        if self.splitter not in SPLITTERS:
            raise BertdataError(f"--splitter must be {' or '.join(SPLITTERS)} (got {self.splitter!r})")
        # Which names are formats is the format layer's to say (bertdata.formats.names), above this
        # module: the build's command checks them, and a name no format has fails the build's plan.
        if not self.formats or len(set(self.formats)) != len(self.formats):
            raise BertdataError(f"--format must name one or more formats, each once (got {', '.join(self.formats) or 'none'})")
        if self.recipe is not None:
            given = [flag for flag, value in (("--wiki-only", self.wiki_only), ("--books", self.books),
                                              ("--dump", self.dump), ("--sample", self.sample)) if value]
            if given:
                raise BertdataError(f"--recipe names every corpus of the build: leave out {given[0]} (a recipe's "
                                    "wikipedia corpus names its dump:)")
            if self.dedup or self.decontaminate:
                flag = "--dedup" if self.dedup else "--decontaminate"
                raise BertdataError(f"{flag} is for a build from a dump: a recipe states its own dedup: and "
                                    "decontaminate: (docs/dedup.md)")
        elif not self.wiki_only and not self.books:
            raise BertdataError(
                "BookCorpus has no public download: pass --books DIR (plain-text books, one per file) "
                "to mix books in, or --wiki-only for Wikipedia alone")
        if self.stop_after not in (None, "download", "text"):
            raise BertdataError(f"--stop-after must be download or text (got {self.stop_after})")


@dataclass(frozen=True)
class VocabConfig:
    """How `bertdata vocab` trains a WordPiece vocab."""

    size: int = 30522
    min_frequency: int = 2
    lowercase: bool = True
    # Characters kept as single-character tokens; rarer ones become [UNK]. BERT's own
    # vocabs and Hugging Face's trainer default keep about a thousand.
    limit_alphabet: int = 1000

    def __post_init__(self) -> None:
        if self.size < 10:
            raise BertdataError(f"--size must be at least 10 (got {self.size})")
        if self.min_frequency < 1:
            raise BertdataError(f"--min-frequency must be at least 1 (got {self.min_frequency})")
        if self.limit_alphabet < 1:
            raise BertdataError(f"--limit-alphabet must be at least 1 (got {self.limit_alphabet})")


RESHARD_FORMATS = ("hdf5", "lddl")


@dataclass(frozen=True)
class ReshardConfig:
    """`bertdata shard`: re-partition shards into `parts` balanced, globally shuffled parts
    (hdf5), or into an LDDL folder of `parts` files per bin (lddl)."""

    inputs: tuple[str, ...]
    output: str
    parts: int
    split: str = "training"
    name: str | None = None
    seed: int = 12345
    sample: float | None = None
    max_instances: int | None = None
    force: bool = False
    workers: int = 1
    format: str = "hdf5"
    # LDDL output only; None: not given (static masking, unbinned, one rank).
    masking: str | None = None
    bin_size: int | None = None
    ranks: int | None = None
    vocab: str | None = None

    def __post_init__(self) -> None:
        if self.format not in RESHARD_FORMATS:
            raise BertdataError(f"--format must be one of {', '.join(RESHARD_FORMATS)} (got {self.format!r})")
        if self.format == "hdf5":
            given = [flag for flag, value in (("--masking", self.masking), ("--bin-size", self.bin_size),
                                              ("--ranks", self.ranks)) if value is not None]
            if given:
                raise BertdataError(f"{', '.join(given)} apply to --format lddl only")
        else:
            if self.name is not None:
                raise BertdataError("--name does not apply to --format lddl: "
                                    "LDDL's loader wants shard-<i>.parquet names")
            if self.workers != 1:
                raise BertdataError("--workers does not apply to --format lddl: one process writes the folder")
            if self.ranks is not None and self.ranks < 1:
                raise BertdataError(f"--ranks must be at least 1 (got {self.ranks})")
            if self.bin_size is not None and self.bin_size < 1:
                raise BertdataError(f"--bin-size must be at least 1 (got {self.bin_size})")
        if not self.inputs:
            raise BertdataError("give at least one input shard or folder")
        if self.parts < 1:
            raise BertdataError(f"--parts must be at least 1 (got {self.parts})")
        if self.split not in ("training", "test", "all"):
            raise BertdataError(f"--split must be training, test or all (got {self.split!r})")
        if self.name is not None and (not self.name or "/" in self.name or self.name.startswith(".")):
            raise BertdataError(f"--name must be a plain file name prefix (got {self.name!r})")
        if self.seed < 0:
            raise BertdataError(f"--seed must be non-negative (got {self.seed})")
        if self.sample is not None and self.max_instances is not None:
            raise BertdataError("give --sample or --max-instances, not both")
        if self.sample is not None and not 0.0 < self.sample <= 1.0:
            raise BertdataError(f"--sample must be in (0, 1] (got {self.sample})")
        if self.max_instances is not None and self.max_instances < 1:
            raise BertdataError(f"--max-instances must be at least 1 (got {self.max_instances})")
        if self.workers < 1:
            raise BertdataError(f"--workers must be at least 1 (got {self.workers})")


# `bertdata bench`. The model presets (benchmark/model.py has one BertConfig for each), the
# precisions and the update rules, named here so that the CLI's flags are made without torch.
MODELS = ("base", "large", "tiny")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "amp")
OPTIMIZERS = ("lamb", "adamw")


def default_loader_workers() -> int:
    """Loader workers per rank: 4, or fewer on a machine with fewer cores (torch warns when
    workers outnumber the cores, and they would only compete with training for them)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(4, cores)


# The share of tokens masked when bench trains masked LM alone on a documents folder: today's
# encoders' (RoBERTa's 15% raised to 30% by MosaicBERT and ModernBERT).
DOCUMENT_MLM_PROBABILITY = 0.3


@dataclass(frozen=True)
class BenchConfig:
    data: str
    model: str = "base"
    bert_config: str | None = None  # a reference bert_config.json; overrides `model`
    batch_size: int = 96  # sequences per rank per micro-batch
    precision: str | None = None  # None: amp on CUDA, fp32 on CPU
    global_batch: int | None = None  # sequences per optimizer step, all ranks; sets accumulation
    accumulation: int | None = None  # micro-batches per optimizer step (default 1)
    steps: int = 30
    warmup_steps: int = 10
    gpus: int = 1
    compile: bool = False
    padded: bool = False  # compute the pad positions too, as the shards lay rows out; default: real tokens only
    token_buckets: int | None = None  # packed batches rounded up to one of N token counts (CUDA graphs)
    profile: str | None = None  # a file for torch.profiler's table of a few steps after the timed ones
    device: str | None = None  # None: cuda if available
    loader_only: bool = False
    workers: int = field(default_factory=default_loader_workers)
    lr: float = 6e-3
    optimizer: str = "lamb"
    seed: int = 12345
    vocab: str | None = None  # an LDDL folder's vocab; None: the one its manifest records
    masking_scheme: str | None = None  # an LDDL folder's dynamic masking; None: the one its manifest records
    # A documents folder's (mds, parquet) masked share, masked LM alone; None: DOCUMENT_MLM_PROBABILITY.
    # Instance formats keep the rule they were made with (InstanceConfig.masked_lm_prob).
    mlm_probability: float | None = None

    def __post_init__(self) -> None:
        if self.mlm_probability is not None and not 0 < self.mlm_probability < 1:
            raise BertdataError(f"--mlm-probability must be between 0 and 1 (got {self.mlm_probability})")
        positive = {"--batch-size": self.batch_size, "--steps": self.steps, "--gpus": self.gpus,
                    "--global-batch": self.global_batch, "--accumulation": self.accumulation,
                    "--token-buckets": self.token_buckets}
        for flag, value in positive.items():
            if value is not None and value < 1:
                raise BertdataError(f"{flag} must be at least 1 (got {value})")
        for flag, value in {"--warmup-steps": self.warmup_steps, "--workers": self.workers}.items():
            if value < 0:
                raise BertdataError(f"{flag} must be >= 0 (got {value})")
        if self.global_batch is not None and self.accumulation is not None:
            raise BertdataError("give --global-batch or --accumulation, not both")
        if self.token_buckets is not None and self.padded:
            raise BertdataError("--token-buckets rounds packed batches up; a --padded batch has one shape already")
        if self.precision is not None and self.precision not in PRECISIONS:
            raise BertdataError(f"--precision must be one of {', '.join(PRECISIONS)} (got {self.precision!r})")
        if self.optimizer not in OPTIMIZERS:
            raise BertdataError(f"--optimizer must be one of {', '.join(OPTIMIZERS)} (got {self.optimizer!r})")
        if self.device not in (None, "cuda", "cpu"):
            raise BertdataError(f"--device must be cuda or cpu (got {self.device!r})")
        if self.model not in MODELS:
            raise BertdataError(f"--model must be one of {', '.join(MODELS)} (got {self.model!r})")
        if not self.lr > 0:
            raise BertdataError(f"--lr must be positive (got {self.lr})")


@dataclass(frozen=True)
class InspectConfig:
    """`bertdata inspect`: validate units of any format and print their figures."""

    paths: tuple[str, ...]
    show: int = 0  # instances decoded to text per file
    vocab: str | None = None  # None: the vocab a unit records, where one is needed
    ranks: int = 1  # LDDL: training ranks x loader workers that every bin's file count must divide by

    def __post_init__(self) -> None:
        if self.show < 0:
            raise BertdataError("--show must be >= 0")
        if self.ranks < 1:
            raise BertdataError("--ranks must be at least 1")
