"""Before a build: its disk check, and `build --dry-run`'s plan. Neither writes anything.

The folders are the stages' (bertdata.pipelines.chain plans them), where the build takes them from.
The disk check compares the free disk at the output with bertdata.estimate's figure for what
the build writes and its temporaries; what the output folder already holds counts as room (a
re-run reuses or replaces it). The plan says which stages a run would make or reuse, how many
shards and workers, and the disk and time estimates.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from bertdata.config import BuildConfig, phase_number
from bertdata.errors import BertdataError
from bertdata.estimate import (MARGIN, Estimate, dump_bytes_per_second, duration_text, estimate_build,
                               folder_bytes, free_bytes, size_text)
from bertdata import formats
from bertdata.formats import PER_SHARD, PER_SPLIT
from bertdata.manifest import MANIFEST
from bertdata.pipelines.chain import chosen_phases
from bertdata.pipelines.formats import chosen_formats, stage_module
from bertdata.pipelines.stages.instances import shard_folder
from bertdata.pipelines.resume import (check_vocab_unchanged, finished_text_stage, read_manifest,
                                       refuse_another_build, text_stage_folders)
from bertdata.pipelines.runtime import fsio


@dataclass(frozen=True)
class DiskNeed:
    """A build's estimate, and what it needs beyond what its output folder holds, against the free disk."""

    estimate: Estimate
    held: int  # bytes already in the output folder, outside its download folder
    free: int

    @property
    def needed(self) -> int:
        return max(0, int(self.estimate.total * MARGIN) - self.held)

    @property
    def fits(self) -> bool:
        return self.needed <= self.free

    def describe(self) -> str:
        held = f", less {size_text(self.held)} already there" if self.held else ""
        return (f"about {size_text(self.needed)} ({self.estimate.describe()}, with {MARGIN - 1:.0%} margin{held}); "
                f"{size_text(self.free)} free")


def local_dump(cfg: BuildConfig) -> str | None:
    """The dump a build reads when it is a local file already (else it is still to be fetched)."""
    if cfg.sample:
        from bertdata.text.wikidump import sample_paths

        return str(sample_paths()[0])
    if cfg.dump is not None and fsio.is_local(cfg.dump) and os.path.isfile(cfg.dump):
        return cfg.dump
    return None


def disk_need(cfg: BuildConfig, dump: str, workers: int = 1) -> DiskNeed:
    books = sum(os.path.getsize(os.path.join(cfg.books, name)) for name in os.listdir(cfg.books)
                if not name.startswith(".") and os.path.isfile(os.path.join(cfg.books, name))) \
        if cfg.books and os.path.isdir(cfg.books) else 0
    estimate = estimate_build(os.path.getsize(dump), books, cfg.formats, chosen_phases(cfg), workers=workers)
    held = folder_bytes(cfg.output) - folder_bytes(os.path.join(cfg.output, "download"))
    return DiskNeed(estimate, held, free_bytes(cfg.output))


def check_disk(cfg: BuildConfig, dump: str) -> None:
    """Refuse, in one line with the numbers, a build whose output and temporaries would not fit."""
    if not cfg.check_disk or not fsio.is_local(cfg.output) or cfg.stop_after == "download":
        return
    need = disk_need(cfg, dump)
    if not need.fits:
        raise BertdataError(f"{cfg.output}: not enough free disk for this build: it needs {need.describe()}; free "
                            "some space, choose another --output, or pass --ignore-disk-check")


def _screening_lines(dedup, decontaminate, evals: tuple, scope: str) -> list[str]:
    """The plan's lines for dedup and decontamination (a recipe's or --dedup's and --decontaminate's)."""
    lines = []
    if dedup is not None:
        lines.append("dedup: " + " + ".join(
            (["exact copies"] if dedup.exact else [])
            + ([f"MinHash near-duplicates ({dedup.ngram}-grams, {dedup.bands} bands of {dedup.rows}, joined at "
                f"{dedup.min_similarity})"] if dedup.minhash else []))
            + f" across {scope}; dedup.jsonl names each removed document")
    if decontaminate is not None:
        lines.append(f"decontaminate: documents sharing a {decontaminate.ngram}-gram with {len(evals)} evaluation "
                     "file(s) removed: " + ", ".join(f"{e.name} ({e.type})" for e in evals))
    return lines


def dry_run(cfg: BuildConfig, workers: int) -> list[str]:
    """The plan of the build `cfg` describes, as lines; reads the output folder, writes nothing."""
    from bertdata.dedup.evals import flag_set
    from bertdata.pipelines.runtime.stores import use_stores

    paths = (cfg.output, cfg.dump, cfg.index, cfg.vocab, cfg.books, cfg.recipe,
             *(flag_set(value).files[0] for value in cfg.decontaminate))
    args = use_stores(paths, cfg.runner.beam_args)
    if cfg.recipe is not None:
        from bertdata.pipelines.corpora import store_paths

        use_stores(paths + store_paths(cfg.recipe), args)
    t = cfg.text
    dump = local_dump(cfg)
    lines = ["dry run: nothing is written"]
    recipe = resolved = None
    if cfg.recipe is not None:
        from bertdata.pipelines.inputs import resolve_recipe

        resolved, found = resolve_recipe(cfg, fetch_vocab=False)  # every file checked, as the build checks them
        recipe = found.recipe
        lines.append(f"recipe: {cfg.recipe}, seed {recipe.seed}")
        for spec in recipe.corpora:
            files = found.files[spec.name]
            share = f", {recipe.share(spec.name):.3f} of the tokens" if recipe.mix else ", every document"
            lines.append(f"  {spec.name} ({spec.type}): {len(files)} file(s), "
                         f"{size_text(sum(found.sizes[f] for f in files))}{share}")
        lines += _screening_lines(recipe.dedup, recipe.decontaminate, found.evals, "every corpus")
    elif dump is None:
        source = cfg.dump or f"{cfg.wiki} {cfg.date} from {cfg.mirror}"
        lines.append(f"dump: {source}, downloaded into {fsio.join(cfg.output, 'download')} first; the disk and time "
                     "estimates need its size, known once it is there")
    else:
        lines.append(f"dump: {dump} ({size_text(os.path.getsize(dump))} bz2)")
    if recipe is None and (cfg.dedup or cfg.decontaminate):
        from bertdata.dedup.evals import flag_decontamination
        from bertdata.dedup.minhash import DedupConfig
        from bertdata.pipelines.corpora import eval_files

        decontaminate = flag_decontamination(cfg.decontaminate)
        lines += _screening_lines(DedupConfig() if cfg.dedup else None, decontaminate,
                                  eval_files(decontaminate, "", "--decontaminate:"), "the articles and books")
    lines.append(_tokenizer_line(cfg))
    dataset = recipe.name if recipe is not None else _dataset(dump, cfg)
    text = _finished_text(cfg, dataset, dump)
    vocab = None
    if dump is not None:
        # As the build resolves them (the dump's sha1, remembered once made; the vocab), and with
        # its refusal of a folder holding a finished build of another dump, language or vocab.
        from bertdata.pipelines.inputs import resolve_inputs

        resolved = resolve_inputs(cfg, fetch_vocab=False)  # a dry run downloads nothing
    if resolved is not None:
        vocab = resolved.vocab
        refuse_another_build(cfg.output, resolved.record, resolved.site.language, vocab, cfg.force)
    if cfg.stop_after == "download":
        lines.append("stages: download only (--stop-after download)")
        return lines
    if text is not None:
        folder, manifest = text
        shards = manifest["effective_shards"]
        lines.append(f"text stage: reuse {shards['training']} training + {shards['test']} test shards in {folder}")
        count = shards["training"] + shards["test"]
        training = shards["training"]
    else:
        halved = "" if t.fixed_shards else f" (halved while a shard would hold fewer than {t.min_shard_documents} articles)"
        lines.append(f"text stage: run: {t.training_shards} training + {t.test_shards} test shards{halved} -> "
                     f"{fsio.join(cfg.output, 'sharded_*', dataset)}")
        count, training = t.training_shards + t.test_shards, t.training_shards
    chosen = chosen_phases(cfg)
    for per_shard in chosen_formats(cfg, PER_SHARD):
        for p in chosen:
            n = phase_number(p)
            folder = shard_folder(cfg, per_shard, p, t.lowercase, dataset)
            present = len(fsio.match(fsio.join(folder, per_shard.pattern()))) if fsio.exists(folder) else 0
            if vocab is not None:  # the instance stage's own check
                check_vocab_unchanged(per_shard, [folder], vocab, cfg.force)
            if fsio.exists(fsio.join(folder, MANIFEST)) and text is not None and not cfg.force:
                state = "reuse (complete)"
            elif present and not cfg.force:
                state = f"run, {present} shards already there kept where they match"
            else:
                state = "run"
            lines.append(f"{per_shard.name} phase {n} (seq {p.max_seq_length}, dupe {p.dupe_factor}): {state}: "
                         f"{count} shards, one per text shard -> {folder}")
    for fmt in map(formats.get, cfg.formats):  # the stages of the formats cut otherwise say theirs
        module = stage_module(fmt)
        if fmt.cut == PER_SPLIT:  # decided by the stage's own decide, from what the build would have
            handed = None if text is None else finished_text_stage(*text)
            lines += module.dry_run(fmt, cfg, chosen, dataset, t.lowercase, training, vocab, handed)
        elif module is not None:
            lines += module.dry_run(fmt, cfg, chosen, dataset, t.lowercase, training)
    lines.append(f"runner: {cfg.runner.runner}, {workers} worker(s)")
    if dump is not None and fsio.is_local(cfg.output):
        need = disk_need(cfg, dump, workers)
        verdict = "fits" if need.fits else ("does not fit: the build would go on (--ignore-disk-check)"
                                            if not cfg.check_disk else "does not fit: the build would refuse")
        lines.append(f"disk at {cfg.output}: {need.describe()}: {verdict}")
        lines.append(f"time: {duration_text(need.estimate.seconds)} with {workers} worker(s), at the measured "
                     f"{dump_bytes_per_second(workers) / max(1, workers) / 1e6:.2f} MB of bz2 dump per second per "
                     "worker (README, Performance); less for stages reused")
    return lines


def _tokenizer_line(cfg: BuildConfig) -> str:
    """What the build tokenizes with, and whether it downloads a vocab first."""
    from bertdata.fsutil import cache_dir
    from bertdata.instances.vocab import DEFAULT_VOCAB_NAME
    from bertdata.pipelines.inputs import uses_vocab

    tokenizer = cfg.documents.tokenizer
    if not uses_vocab(cfg):
        return f"tokenizer: {tokenizer} for every format; no WordPiece vocab is read or downloaded"
    also = f"; {tokenizer} for the formats holding documents" if tokenizer else ""
    if cfg.vocab:
        return f"vocab: {cfg.vocab}{also}"
    if cfg.sample:
        return f"vocab: the bundled sample's{also}"
    english = cache_dir() / DEFAULT_VOCAB_NAME
    return (f"vocab: the language's default (English: bert-base-uncased's, {english}"
            f"{'' if english.is_file() else ', downloaded there first'}; others: bert-base-multilingual-cased's, "
            f"downloaded once beside it){also}")


def _dataset(dump: str | None, cfg: BuildConfig) -> str:
    """The text folders' dataset name, as the build would choose it (books_wiki_... with books)."""
    if dump is None:
        return "*"
    from bertdata.text.languages import ENGLISH_CODES
    from bertdata.text.shards import BOOKS_WIKI_DATASET
    from bertdata.text.wikidump import read_site

    site = read_site(dump, cfg.lang)
    if cfg.books:
        return BOOKS_WIKI_DATASET if site.language in ENGLISH_CODES else f"books_wiki_{site.language}_corpus"
    return site.dataset


def _finished_text(cfg: BuildConfig, dataset: str, dump: str | None) -> tuple[str, dict] | None:
    """A finished text stage made from this dump (by name and size) that a run would reuse."""
    if cfg.force or dump is None:
        return None
    for folder in text_stage_folders(cfg.output, cfg.text, dataset):
        manifest = read_manifest(folder)
        recorded = (manifest or {}).get("dump", {})
        if recorded.get("name") == os.path.basename(dump) and recorded.get("bytes") == os.path.getsize(dump):
            return folder, manifest
    return None
