"""Input pipeline: pretraining batches from shards of any format that holds instances or documents, read
through `bertdata.formats`; hdf5 as NGC's run_pretraining.py reads it.

Training reads the units the format calls training data (hdf5: every file whose name contains
`training`, the NGC rule), so our shards and the reference's are read alike. The gzip chunks make random row access
slow, so -- like NGC -- a worker reads one whole file, shuffles its rows and cuts batches;
a batch may span two files so no rows are dropped at file ends. The stream is endless
(reshuffled each pass), which keeps every rank supplied for any number of steps, so DDP
ranks never wait on one that ran dry.

Work is handed out twice with the same rule: files to ranks, then a rank's files to its
loader workers -- whole files when there are enough, else every file's rows interleaved.

A format whose loader pads a batch only to its longest sequence (LDDL) is read so: rounded up
to 8, and in a binned folder each batch drawn
from one bin, picked at random in proportion to the bins' sizes. Every rank's worker w draws the
same bins in the same order, and the loader takes batches from its workers in turn, so all ranks
train on one bin at each step, as LDDL arranges, rather than waiting on the rank with the longest
sequences. Static masking takes the positions and labels from the files. Dynamic masking masks
each batch anew with the rule of the reference's create_pretraining_data.py, the one the hdf5
shards were made with (`bertdata.instances.masking`: 15% of the tokens, at most the phase's
predictions per sequence, 80% [MASK] / 10% random / 10% kept), not LDDL's (each token with
probability 0.15, uncapped): so static and dynamic runs do the same work per sequence, and the
MLM head keeps a fixed shape.

A format holding documents (MDS, Hugging Face parquet) is read sample by sample through a
shuffle window, each worker every n-th sample, and trained as today's encoders are: masked LM
alone, each sample a packed row, a share of its tokens (30% by default) masked by the same rule
as each batch is made, its tokenizer's special tokens never.

Batches come in the shards' padded layout (NGC's tuple) or packed (`model.Packed`: the real
tokens of all rows end to end), made by the loader's workers so the trainer never waits on it.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from bertdata import formats
from bertdata.benchmark.model import Packed, Padded
from bertdata.errors import BertdataError, ValidationError
from bertdata.formats import DOCUMENTS, INSTANCES, Reading, PartInfo
from bertdata.formats.checks import check_batch
from bertdata.config import InstanceConfig
from bertdata.instances import masking
from bertdata.instances.schema import BY_NAME, DTYPES, SEQ

# LDDL's loader pads a batch to its longest sequence rounded up to this (sequence_length_alignment).
LDDL_ALIGNMENT = 8
# Samples of a documents folder a loader worker draws each one from, at random: a window of the
# stream, as streaming's loaders shuffle, so memory stays bounded whatever the data set (8 MiB of
# ids at 1,024 tokens a sample).
SHUFFLE_SAMPLES = 4096
# The names tokenizers give the mask token: BERT's WordPiece and RoBERTa's (ModernBERT's) BPE.
MASK_TOKENS = ("[MASK]", "<mask>")


class Unit(NamedTuple):
    """Rows start, start + stride, ... of one file (which holds `rows` instances)."""

    path: str
    start: int
    stride: int
    rows: int

    @property
    def count(self) -> int:
        return len(range(self.start, self.rows, self.stride))


def survey(data: str | os.PathLike, vocab_path: str | None = None,
           masking_scheme: str | None = None) -> tuple[list[PartInfo], Reading]:
    """The training parts of the data at `data` and how to read them, whatever its format: one
    format, one sequence length and prediction count. `vocab_path` overrides a vocab the data
    records (refused if another), `masking_scheme` the scheme of dynamic masking."""
    if not os.path.isdir(data):
        raise BertdataError(f"{data}: --data must be a folder of shards")
    groups = formats.by_format(formats.find([os.fspath(data)]))
    if len(groups) > 1:
        raise BertdataError(f"{data}: holds {' and '.join(f.name for f, _ in groups)} data; point --data at one of them")
    fmt, units = groups[0]
    if fmt.holds == DOCUMENTS:
        return survey_documents(fmt, units, os.fspath(data), vocab_path)
    if fmt.holds != INSTANCES:
        trainable = [f.name for f in formats.all_formats() if f.holds in (INSTANCES, DOCUMENTS)]
        raise BertdataError(f"{data}: {fmt.name} files hold {fmt.holds}, which bench does not train from; use a "
                            f"build's {', '.join(trainable[:-1])} or {trainable[-1]} output for bench")
    units = fmt.training(units)
    if not units:
        raise BertdataError(f"{data}: no shards to train on (no file whose name contains 'training')")
    try:
        parts = [part for unit in units for part in fmt.parts(unit)]
    except ValidationError as err:
        raise BertdataError(f"invalid shard: {err}") from None
    formats.same_shape(parts)
    return parts, fmt.reading(parts, vocab_path, masking_scheme)


@dataclass(frozen=True)
class DocumentTokens:
    """What masking a documents folder's samples needs of the tokenizer that made them: its
    file, vocab size, special tokens (the prefix and suffix around every sample: never masked),
    mask token, and the ids a masked position may show instead (the reference's vocab words for a
    WordPiece vocab; every id but the special and mask tokens for a tokenizer file)."""

    path: str
    vocab_size: int
    special_ids: tuple[int, ...]
    mask_id: int
    random_ids: np.ndarray


def recorded_tokenizer(recorded: dict, where: str) -> Path | None:
    """The file of the tokenizer a manifest records (by its sha256), where bertdata has it offline:
    under the name recorded in the folder or the two above it (a build puts its --tokenizer file
    in the format's folder, beside the splits), else among the cache's vocabs and tokenizers."""
    from bertdata.fsutil import cache_dir
    from bertdata.manifest import file_sha256

    sha, name = recorded.get("tokenizer_sha256"), recorded.get("tokenizer")
    folders = [Path(where).absolute(), *Path(where).absolute().parents][:3]
    candidates = [folder / name for folder in folders] if name else []
    candidates += sorted(p for p in cache_dir().glob("*") if p.suffix in (".json", ".txt"))
    for candidate in candidates:
        if candidate.is_file():
            with open(candidate, "rb") as f:
                if file_sha256(f) == sha:
                    return candidate
    return None


def document_tokens(recorded: dict, vocab_path: str | None, where: str) -> DocumentTokens:
    """The tokenizer of a documents folder whose manifest records `recorded`: `vocab_path` (a
    WordPiece vocab.txt or a tokenizer.json), refused if the manifest records another, or without
    it the bundled sample's vocab, the recorded file where bertdata has it (`recorded_tokenizer`),
    or the default vocab, by the manifest's sha256."""
    from bertdata.instances.tokenizer_file import TokenizerFile
    from bertdata.instances.vocab import DEFAULT_VOCAB_SHA256, load_vocab, resolve_vocab
    from bertdata.text.wikidump import sample_paths

    sha = recorded.get("tokenizer_sha256")
    if vocab_path is None:
        if sha is None:
            raise BertdataError(f"{where}: no manifest.json records the tokenizer its samples were made with; give "
                                "its vocab.txt or tokenizer.json with --vocab (masking shows its mask token)")
        sample = load_vocab(sample_paths()[2])
        found = None if sample.sha256 == sha else recorded_tokenizer(recorded, where)
        if sample.sha256 == sha:
            tokenizer = sample
        elif found is not None:
            tokenizer = _tokenizer_or_vocab(str(found))
        elif sha == DEFAULT_VOCAB_SHA256:
            tokenizer = resolve_vocab(None)
        else:
            raise BertdataError(f"{where}: its samples were made with {recorded.get('tokenizer', 'a tokenizer')} "
                                f"(sha256 {sha[:12]}...), which is neither in the folder nor in bertdata's cache; "
                                "give that file with --vocab (masking shows its mask token)")
    else:
        tokenizer = _tokenizer_or_vocab(vocab_path)
        if sha is not None and tokenizer.sha256 != sha:
            raise BertdataError(f"{vocab_path}: sha256 {tokenizer.sha256[:12]}... is not that of the tokenizer "
                                f"{where}'s manifest records ({recorded.get('tokenizer')}, {sha[:12]}...)")
    if isinstance(tokenizer, TokenizerFile):
        prefix, specials = tokenizer.prefix, (*tokenizer.prefix, *tokenizer.suffix)
        mask_id = next((i for i in map(tokenizer.token_id, MASK_TOKENS) if i is not None), None)
        size = tokenizer.vocab_size
        random_ids = np.setdiff1d(np.arange(size, dtype=np.int32), [*specials, -1 if mask_id is None else mask_id])
    else:
        prefix = specials = (tokenizer.cls_id, tokenizer.sep_id)
        mask_id = tokenizer.token_to_id.get("[MASK]")
        size, random_ids = len(tokenizer), tokenizer.word_ids
    if mask_id is None:
        raise BertdataError(f"{tokenizer.path}: the tokenizer has no mask token ({' or '.join(MASK_TOKENS)}) to "
                            "mask the samples with")
    if not prefix:
        # The packed layout ends a row's list of masked positions at its first 0 (NGC's), so the
        # first token must be one never masked.
        raise BertdataError(f"{tokenizer.path}: the tokenizer puts no special token before a sample; bench trains "
                            "on samples that start with one ([CLS], <s>)")
    if recorded.get("vocab_size") not in (None, size):
        raise BertdataError(f"{where}: its manifest records a vocab of {recorded['vocab_size']:,} ids, but "
                            f"{tokenizer.path} has {size:,}")
    return DocumentTokens(tokenizer.path, size, tuple(specials), int(mask_id), np.asarray(random_ids, np.int32))


def _tokenizer_or_vocab(path: str):
    """A tokenizer.json as a TokenizerFile, else a WordPiece vocab.txt as a Vocab."""
    from bertdata.instances.tokenizer_file import TokenizerFile
    from bertdata.instances.vocab import load_vocab

    from bertdata.fsutil import read_bounded
    from bertdata.instances.tokenizer_file import MAX_FILE_BYTES

    data = read_bounded(path, MAX_FILE_BYTES, "tokenizer file")  # once: a pipe reads once
    return TokenizerFile(path, data) if data.lstrip().startswith(b"{") else load_vocab(path, data)


def survey_documents(fmt, units: list[str], data: str, vocab_path: str | None) -> tuple[list[PartInfo], Reading]:
    """A documents folder's training split as one part, its width (the model's positions) the
    samples' length its manifest records, else its longest sample; masking done by the loader."""
    units = fmt.training(units)
    if not units:
        raise BertdataError(f"{data}: {fmt.name} data without a training split to train on")
    if len(units) > 1:
        raise BertdataError(f"{data}: holds {len(units)} {fmt.name} training splits ({', '.join(units)}); point "
                            "--data at one of them")
    unit = units[0]
    try:
        recorded = fmt.recorded(unit)
        count = fmt.count(unit)
        width = recorded.get("max_seq_length") or max((len(ids) for ids in fmt.samples(unit)), default=0)
    except ValidationError as err:
        raise BertdataError(f"invalid shard: {err}") from None
    if not count:
        raise BertdataError(f"{unit}: no samples to train on")
    tokens = document_tokens(recorded, vocab_path, unit)
    return [PartInfo(unit, count, int(width), int(width), attrs=recorded)], Reading(fmt.name, tokens, "dynamic")


def divide(units: list[Unit], parts: int, index: int) -> list[Unit]:
    """Share `index` of `parts`: whole units if there are enough, else every unit's rows interleaved."""
    if len(units) >= parts:
        return units[index::parts]
    return [Unit(u.path, u.start + index * u.stride, u.stride * parts, u.rows) for u in units]


def bins_of(infos: list[PartInfo]) -> list[int | None]:
    """The bins in order: [None] for hdf5 and unbinned LDDL."""
    return sorted({i.bin for i in infos}, key=lambda b: -1 if b is None else b)


def rank_units(infos: list[PartInfo], rank: int, world: int) -> list[list[Unit]]:
    """The rank's share of every bin, in `bins_of` order."""
    groups = []
    for bin_id in bins_of(infos):
        members = [i for i in infos if i.bin == bin_id]
        units = divide([Unit(i.path, 0, 1, i.num_instances) for i in members], world, rank)
        if sum(u.count for u in units) == 0:
            total = sum(i.num_instances for i in members)
            where = "" if bin_id is None else f" in bin {bin_id}"
            raise BertdataError(f"{total} instances{where} cannot feed {world} ranks: rank {rank} gets none")
        groups.append(units)
    return groups


def mlm_labels(positions: np.ndarray, ids: np.ndarray, seq_len: int) -> np.ndarray:
    """[N, L] labels: -1 except at the masked positions, whose list ends at the first 0."""
    valid = np.cumprod(positions != 0, axis=1).astype(bool)
    labels = np.full((positions.shape[0], seq_len), -1, dtype=np.int64)
    rows, cols = np.nonzero(valid)
    labels[rows, positions[rows, cols]] = ids[rows, cols]
    return labels


class InvalidShard(NamedTuple):
    """Yielded in place of a batch when a worker finds invalid rows: raised in a worker, the
    error would reach the trainer wrapped in a many-line traceback."""

    message: str


def next_batch(batches: Iterator) -> Padded | Packed:
    batch = next(batches)
    if isinstance(batch, InvalidShard):
        raise BertdataError(batch.message)
    return batch


def load_unit(unit: Unit, info: PartInfo, reading: Reading, vocab_size: int | None = None) -> dict[str, np.ndarray]:
    """The unit's rows, read by its format, and checked (whole file, so errors name its row
    numbers) when `vocab_size` is given: an id past the embedding or a position past the
    sequence would stop training with an IndexError."""
    rows = formats.get(reading.format).load(info, reading)
    if vocab_size is not None:
        try:
            check_batch(unit.path, 0, rows, vocab_size)
        except ValidationError as err:
            raise BertdataError(f"invalid shard: {err}") from None
    return {k: v[unit.start::unit.stride] for k, v in rows.items()}


def mask_dynamic(rows: dict[str, np.ndarray], reading: Reading, max_predictions: int,
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """`rows` (original tokens, no masks) masked anew by the reference's rule
    (`bertdata.instances.masking`, at its default masked_lm_prob): per sequence its count of
    candidates, chosen uniformly -- or, with whole-word masking, whole words in random order
    while they fit -- each shown as [MASK], itself or a random vocab word."""
    vocab = reading.vocab
    return mask_rows(rows, InstanceConfig.masked_lm_prob, max_predictions, (vocab.cls_id, vocab.sep_id),
                     vocab.mask_id, vocab.word_ids, rng, reading.masking_scheme, vocab.word_continues)


def mask_rows(rows: dict[str, np.ndarray], probability: float, max_predictions: int, special_ids: tuple[int, ...],
              mask_id: int, random_ids: np.ndarray, rng: np.random.Generator, scheme: str = "token",
              word_continues: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The masking rule (`bertdata.instances.masking`) on padded rows of original tokens: per row
    min(max_predictions, max(1, round(`probability` x its tokens))) of its candidates (any token
    but `special_ids`), or all of them where fewer; each shown as `mask_id`, itself or one of
    `random_ids` (80/10/10). Returns the rows with masked_lm_positions and masked_lm_ids set."""
    ids = rows["input_ids"]
    n, seq_len = ids.shape
    real = rows["input_mask"] != 0
    candidate = real & masking.is_candidate(ids, *special_ids)
    # Fewer candidates than the count: all of them, as the reference runs out of words.
    count = np.minimum(masking.prediction_count(real.sum(axis=1), probability, max_predictions),
                       candidate.sum(axis=1))
    width = min(max_predictions, seq_len)
    cols = np.arange(seq_len)
    if scheme == "whole-word":
        chosen = masking.pick_words(ids, candidate, count, word_continues, rng.random((n, seq_len)))
        positions = np.sort(np.where(chosen, cols, seq_len), axis=1)[:, :width]
    else:
        keys = np.where(candidate, rng.random((n, seq_len)), 2.0)
        chosen = np.argsort(keys, axis=1, kind="stable")[:, :width]
        take = np.arange(width) < count[:, None]
        positions = np.sort(np.where(take, chosen, seq_len), axis=1)  # chosen first, in order
    take = positions < seq_len
    row_of, slot = np.nonzero(take)
    pos = positions[row_of, slot]
    original = ids[row_of, pos]
    mask_draw, keep_draw = rng.random(len(pos)), rng.random(len(pos))
    random_words = random_ids[rng.integers(0, len(random_ids), len(pos))]
    shown = masking.shown_ids(original, mask_draw, keep_draw, mask_id, random_words)
    out = dict(rows, input_ids=ids.copy())
    for name in ("masked_lm_positions", "masked_lm_ids"):
        out[name] = np.zeros((n, max_predictions), DTYPES[name])
    out["input_ids"][row_of, pos] = shown
    out["masked_lm_positions"][row_of, slot] = pos
    out["masked_lm_ids"][row_of, slot] = original
    return out


def crop(rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The batch padded only to its longest sequence rounded up to 8, as LDDL's loader pads."""
    seq_len = rows["input_ids"].shape[1]
    longest = int(rows["input_mask"].sum(axis=1).max())
    width = min(seq_len, -(-longest // LDDL_ALIGNMENT) * LDDL_ALIGNMENT)
    return {k: v[:, :width] if BY_NAME[k].width == SEQ else v for k, v in rows.items()}


def to_batch(rows: dict[str, np.ndarray]) -> Padded:
    """The rows as int64 tensors, in NGC's order."""
    seq_len = rows["input_ids"].shape[1]
    labels = mlm_labels(rows["masked_lm_positions"], rows["masked_lm_ids"], seq_len)
    return Padded(*(torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)) for a in (
        rows["input_ids"], rows["segment_ids"], rows["input_mask"], labels, rows["next_sentence_labels"])))


def to_packed(rows: dict[str, np.ndarray], buckets: int | None = None) -> Packed:
    """The batch's real tokens end to end (input_mask is 1s then 0s: checked as each file is
    read), with where each came from and where its masked tokens went.

    With `buckets`, every batch of these rows' count and width takes one of that many shapes
    (see `bucket_size`), so that a compiled step sees no more, and on CUDA replays one graph per
    shape: the token count is rounded up with dummy rows of at most `width` tokens ([PAD], no
    label, never a row of the NSP loss), the row count made fixed with rows of no tokens, and the
    masked tokens padded to every row's max predictions with the ignored label -1."""
    mask = rows["input_mask"] != 0
    n, width = mask.shape
    lengths = mask.sum(axis=1)
    index = np.flatnonzero(mask)
    positions = rows["masked_lm_positions"]
    row, slot = np.nonzero(np.cumprod(positions != 0, axis=1))  # each row's list ends at its first 0
    labels = rows["masked_lm_ids"][row, slot]
    ids, segments = (rows[k].reshape(-1)[index] for k in ("input_ids", "segment_ids"))
    if buckets:
        tokens, extra_rows = bucket_size(n, width, buckets, len(index))
        gap = tokens - len(index)
        dummy = np.zeros(extra_rows, lengths.dtype)
        dummy[:gap // width] = width
        dummy[gap // width:gap // width + 1] = gap % width
        lengths = np.concatenate([lengths, dummy])
        index = np.concatenate([index, n * width + np.flatnonzero(np.arange(width) < dummy[:, None])])
        ids, segments = (np.concatenate([a, np.zeros(gap, a.dtype)]) for a in (ids, segments))
        room = n * positions.shape[1] - len(row)  # every masked slot of the batch, used or not
        row, slot = (np.concatenate([a, np.zeros(room, a.dtype)]) for a in (row, slot))
        labels = np.concatenate([labels, np.full(room, -1, labels.dtype)])
    cu_seqlens = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=cu_seqlens[1:])
    as_long = functools.partial(np.ascontiguousarray, dtype=np.int64)
    return Packed(*(torch.from_numpy(a) for a in (
        as_long(ids), as_long(segments), as_long(index % width), cu_seqlens, as_long(index),
        as_long(cu_seqlens[row] + positions[row, slot]), as_long(labels),
        as_long(rows["next_sentence_labels"].reshape(-1)))))


def bucket_size(rows: int, width: int, buckets: int, tokens: int) -> tuple[int, int]:
    """(the token count `tokens` is rounded up to, rows added) for a batch of `rows` rows of at most
    `width` tokens: a multiple of rows x width / `buckets` (rounded up to 8), so at most `buckets`
    counts; as many rows added to every batch as the dummy tokens can need."""
    step = -(-rows * width // buckets)
    step = -(-step // 8) * 8
    return -(-tokens // step) * step, -(-step // width)


class Figures(NamedTuple):
    """What a batch holds, counted on the host (no device sync): positions with padding and
    real ones, the query-key pairs of each (sum of length squared), the masked tokens."""

    sequences: int
    tokens: int
    real_tokens: int
    pairs: int
    real_pairs: int
    masked: int


def figures(batch: Padded | Packed, width: int) -> Figures:
    """`width`: the length a packed batch's rows had padded (the shards' sequence length); a padded
    batch carries its own."""
    if isinstance(batch, Packed):  # its real rows: the first, one per NSP label (see to_packed's buckets)
        lengths = (batch.cu_seqlens[1:] - batch.cu_seqlens[:-1]).long()[:len(batch.nsp_labels)]
        masked = int((batch.mlm_labels != -1).sum())
    else:
        width = batch.input_ids.shape[1]
        lengths = batch.input_mask.sum(dim=1)
        masked = int((batch.labels != -1).sum())
    n = len(lengths)
    return Figures(n, n * width, int(lengths.sum()), n * width * width, int((lengths * lengths).sum()), masked)


def row_batches(units: list[Unit], batch_size: int, rng: np.random.Generator, load) -> Iterator:
    """Endless batches of rows (dicts of the six arrays) from `units`: files in a new random
    order each pass, each file's rows shuffled, a batch spanning files where one runs out.
    `load(i, unit)` reads unit i; its BertdataError is yielded as InvalidShard, and ends the stream."""
    pending: dict[str, np.ndarray] | None = None
    while True:
        for i in rng.permutation(len(units)):
            try:
                rows = load(i, units[i])
            except BertdataError as err:
                yield InvalidShard(str(err))
                return
            order = rng.permutation(len(rows["input_ids"]))
            rows = {k: v[order] for k, v in rows.items()}
            if pending is not None:
                rows = {k: np.concatenate([pending[k], v]) for k, v in rows.items()}
            n = len(rows["input_ids"])
            full = n - n % batch_size
            for start in range(0, full, batch_size):
                yield {k: v[start:start + batch_size] for k, v in rows.items()}
            pending = {k: v[full:] for k, v in rows.items()}


class ShardStream(IterableDataset):
    """Endless stream of batches from `groups` (a rank's units of each bin), shuffled per file
    pass, split among loader workers; with several bins each batch comes from one bin."""

    def __init__(self, groups: list[list[Unit]], batch_size: int, seed: int, infos: list[PartInfo],
                 reading: Reading, rank: int = 0, vocab_size: int | None = None, packed: bool = False,
                 token_buckets: int | None = None):
        self.groups = groups
        self.packed = packed
        self.token_buckets = token_buckets
        self.batch_size = batch_size
        self.seed = (seed, rank)
        self.vocab_size = vocab_size
        self.infos = {i.path: i for i in infos}
        self.reading = reading
        # Bins are drawn in proportion to their rows in the whole folder: the same on every rank.
        sizes = [sum(i.num_instances for i in infos if i.bin == b) for b in bins_of(infos)]
        self.bin_weights = np.array(sizes, float) / sum(sizes)

    def __iter__(self) -> Iterator[Padded | Packed | InvalidShard]:
        worker = get_worker_info()
        wid = worker.id if worker else 0
        groups = [divide(g, worker.num_workers, wid) if worker else g for g in self.groups]
        rng = np.random.default_rng([*self.seed, wid])
        checked: set[tuple[int, int]] = set()

        def load(b: int, i: int, unit: Unit) -> dict[str, np.ndarray]:
            rows = load_unit(unit, self.infos[unit.path], self.reading, None if (b, i) in checked else self.vocab_size)
            checked.add((b, i))
            return rows

        streams = {b: row_batches(g, self.batch_size, rng, functools.partial(load, b))
                   for b, g in enumerate(groups) if sum(u.count for u in g)}
        if not streams:
            return  # more workers than rows: this one has nothing; the others carry on
        weights = np.where([b in streams for b in range(len(groups))], self.bin_weights, 0.0)
        bin_rng = np.random.default_rng([self.seed[0], wid])  # no rank: every rank draws the same bins
        mask_rng = np.random.default_rng([*self.seed, wid, 1])
        while True:
            b = int(bin_rng.choice(len(weights), p=weights / weights.sum())) if len(streams) > 1 else next(iter(streams))
            rows = next(streams[b])
            if isinstance(rows, InvalidShard):
                yield rows
                return
            if self.reading.masking == "dynamic":
                rows = mask_dynamic(rows, self.reading, rows["masked_lm_positions"].shape[1], mask_rng)
            if self.packed:
                yield to_packed(rows, self.token_buckets)
                continue
            if self.reading.pad_to_longest:
                rows = crop(rows)
            yield to_batch(rows)


def document_rows(samples: list[np.ndarray], width: int) -> dict[str, np.ndarray]:
    """Samples as padded rows of `width` (original ids, one segment, no next-sentence task)."""
    lengths = np.fromiter(map(len, samples), np.int64, len(samples))
    real = np.arange(width) < lengths[:, None]
    ids = np.zeros((len(samples), width), DTYPES["input_ids"])
    ids[real] = np.concatenate(samples)
    return {"input_ids": ids, "input_mask": real.astype(DTYPES["input_mask"]),
            "segment_ids": np.zeros((len(samples), width), DTYPES["segment_ids"]),
            "next_sentence_labels": np.zeros(len(samples), DTYPES["next_sentence_labels"])}


def shuffled(samples: Iterator[np.ndarray], window: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """`samples` in a random order drawn from a window of `window` of them at a time: endless
    where `samples` is (the window then never empties)."""
    held: list[np.ndarray] = []
    for ids in samples:
        held.append(ids)
        if len(held) >= window:
            i = int(rng.integers(len(held)))
            held[i], held[-1] = held[-1], held[i]
            yield held.pop()


class DocumentStream(IterableDataset):
    """Endless packed batches from a documents folder's samples: each worker reads its share
    (every n-th sample, `divide`'s rule), in a new order each pass through a shuffle window,
    `batch_size` samples a batch, masked as the batch is made (`mask_rows`: `probability` of each
    sample's tokens, its special tokens never), each sample a row of its own."""

    def __init__(self, units: list[Unit], batch_size: int, seed: int, info: PartInfo, reading: Reading,
                 probability: float, rank: int = 0, token_buckets: int | None = None):
        self.units, self.batch_size, self.info, self.reading = units, batch_size, info, reading
        self.probability, self.seed, self.token_buckets = probability, (seed, rank), token_buckets

    def __iter__(self) -> Iterator[Packed | InvalidShard]:
        worker = get_worker_info()
        units = divide(self.units, worker.num_workers, worker.id) if worker else self.units
        count = sum(u.count for u in units)
        if not count:
            return  # more workers than samples: this one has nothing; the others carry on
        rng = np.random.default_rng([*self.seed, worker.id if worker else 0])
        fmt, tokens, width = formats.get(self.reading.format), self.reading.vocab, self.info.max_seq_length

        def passes() -> Iterator[np.ndarray]:
            while True:
                for i in rng.permutation(len(units)):
                    yield from itertools.islice(fmt.samples(units[i].path), units[i].start, None, units[i].stride)

        stream = shuffled(passes(), min(SHUFFLE_SAMPLES, count), rng)
        try:
            while True:
                samples = list(itertools.islice(stream, self.batch_size))
                bad = next((s for s in samples if len(s) > width or (len(s) and int(s.max()) >= tokens.vocab_size)),
                           None)
                if bad is not None:
                    yield InvalidShard(f"invalid shard: {self.info.path}: a sample of {len(bad)} ids (longest "
                                       f"{width}) holds id {int(bad.max())}, or is longer than the samples' length; "
                                       f"the tokenizer has {tokens.vocab_size:,} ids")
                    return
                rows = mask_rows(document_rows(samples, width), self.probability, width, tokens.special_ids,
                                 tokens.mask_id, tokens.random_ids, rng)
                yield to_packed(rows, self.token_buckets)
        except ValidationError as err:
            yield InvalidShard(f"invalid shard: {err}")


def build_loader(infos: list[PartInfo], reading: Reading, batch_size: int, rank: int, world: int, workers: int,
                 seed: int, pin_memory: bool, vocab_size: int | None = None, packed: bool = False,
                 token_buckets: int | None = None, mlm_probability: float | None = None) -> DataLoader:
    """Batches for `rank` from `infos` (see `survey`), padded or `packed` (in `token_buckets` shapes
    at most, see `to_packed`); with `vocab_size`, every file's rows are checked when first read.
    A documents folder's batches are always packed, masked at `mlm_probability`."""
    if formats.get(reading.format).holds == DOCUMENTS:
        stream = DocumentStream(rank_units(infos, rank, world)[0], batch_size, seed, infos[0], reading,
                                mlm_probability, rank, token_buckets)
    else:
        stream = ShardStream(rank_units(infos, rank, world), batch_size, seed, infos, reading, rank, vocab_size,
                             packed, token_buckets)
    # Workers build whole batches (no per-sample collate); batch_size=None passes them through.
    return DataLoader(stream, batch_size=None, num_workers=workers, pin_memory=pin_memory,
                      persistent_workers=workers > 0, prefetch_factor=4 if workers else None)
