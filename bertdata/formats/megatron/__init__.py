"""Megatron-LM's indexed dataset: the `.bin`/`.idx` pair (MMIDIDX) that Megatron-LM and NeMo
pretrain BERT from, holding every document's tokenized sentences, one sequence per sentence.

It is what Megatron's `tools/preprocess_data.py --split-sentences --tokenizer-type
BertWordPieceLowerCase` writes as `PREFIX_text_sentence.bin/.idx`, without an end-of-document
token (BERT's preprocessing appends none). The pair's layout: `codec`. One pair per text shard
is written, and a split's pairs merged (`writer`); `check` validates and reads a pair back. This
module is the format object, `MEGATRON`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from bertdata.errors import ValidationError
from bertdata.formats.base import SplitFolder
from bertdata.formats.contract import SENTENCES, LocatedPart, Report, SplitEntry, SplitFiles, SplitSettings, hidden
from bertdata.formats.megatron import check, codec, writer
from bertdata.formats.megatron.check import read_pair, validate_pair
from bertdata.formats.megatron.codec import (BIN, BUFFER, DTYPE_CODES, HEADER, IDX, MAGIC, PART, SUFFIX,
                                            UINT16_VOCAB_LIMIT, VERSION, Header, PairInfo, PathLike,
                                            decode_header, encode_header, encode_index, index_arrays,
                                            pair_paths, prefix_name, token_dtype)
from bertdata.formats.megatron.writer import Merged, merge, merge_pairs, write_pair
from bertdata.instances.documents import Documents

__all__ = ["BIN", "BUFFER", "DTYPE_CODES", "HEADER", "IDX", "MAGIC", "MEGATRON", "PART", "SUFFIX",
           "UINT16_VOCAB_LIMIT", "VERSION", "Header", "MegatronPairs", "Merged", "PairInfo", "PathLike", "check",
           "codec", "decode_header", "encode_header", "encode_index", "index_arrays", "merge",
           "merge_pairs", "pair_paths", "prefix_name", "read_pair", "token_dtype", "validate_pair", "write_pair",
           "writer"]


@dataclass(frozen=True)
class MegatronPairs(SplitFolder):
    """Megatron-LM's indexed datasets: one unit per pair, named by its prefix; a build writes a
    part per text shard and merges them per split (one pair per split, whatever the phases, in
    the folder of its tokenizer: SplitFolder.folder)."""

    name: ClassVar[str] = "megatron"
    holds: ClassVar[str] = SENTENCES
    # Bytes written per byte of clean text, once whatever the phases (None), measured on the
    # fragment (uint16 ids): what the build's disk check counts on.
    disk_per_text_byte: ClassVar[dict] = {None: 0.501}
    writes: ClassVar[str] = "one .bin/.idx pair per split, whatever the phases"
    files: ClassVar[tuple[str, ...]] = (f"*{SUFFIX}{BIN}", f"*{SUFFIX}{IDX}")
    counted: ClassVar[tuple[str, ...]] = ("documents", "sentences", "tokens")
    files_counted: ClassVar[tuple[str, str]] = ("splits", "pair")

    # --- how a build writes it (bertdata.formats.SplitFormat) ---

    def options(self, settings: SplitSettings) -> dict:
        tokenizer = settings.tokenizer
        options = {"dataset": settings.dataset, "vocab_sha256": tokenizer.sha256, "vocab_size": tokenizer.vocab_size,
                   "lowercase": settings.lowercase, "dtype": token_dtype(tokenizer.vocab_size).name}
        return {**options, "tokenizer": tokenizer.name} if settings.tokenizer_file else options

    def write_part(self, shard, documents: Documents, settings: SplitSettings, local: str) -> str:
        """The text shard's documents as a pair in `local`; its prefix's name."""
        bin_path, idx_path = pair_paths(os.path.join(local, PART))
        write_pair(bin_path, idx_path, documents, settings.tokenizer.vocab_size)
        return PART

    def finish_split(self, split: str, parts: list[LocatedPart], settings: SplitSettings, folder: str,
                     files: SplitFiles) -> SplitEntry:
        """The split's parts merged into its pair (`merge`, streamed)."""
        prefix = files.join(folder, prefix_name(settings.dataset, split))
        bin_path, idx_path = pair_paths(prefix)
        # The .bin is renamed into place first (the inner writer), so an .idx never points into nothing.
        with files.atomic_writer(idx_path) as idx_out, files.atomic_writer(bin_path) as bin_out:
            merged = merge([files.join(where, name) for where, name in parts], bin_out, idx_out, files.open_file)
        return {"prefix": prefix_name(settings.dataset, split), "documents": merged.documents,
                "sentences": merged.sentences, "tokens": merged.tokens,
                "files": [{"file": os.path.basename(path), "bytes": size, "sha256": sha}
                          for path, size, sha in zip(pair_paths(prefix), (merged.bin_bytes, merged.idx_bytes),
                                                     (merged.bin_sha256, merged.idx_sha256))]}

    # --- finding, reading and checking what is written ---

    def claims(self, path: str) -> bool:
        """A .bin or .idx file, or the prefix of a pair, as Megatron's `--data-path` names it."""
        return ((path.endswith((BIN, IDX)) and os.path.isfile(path))
                or (not os.path.exists(path) and os.path.isfile(path + IDX)))

    def find(self, folder: str) -> list[str]:
        root = Path(folder)
        return sorted(str(p)[:-len(IDX)] for p in root.rglob("*" + IDX) if not hidden(p, root))

    def inspect(self, units: list[str], report: Report) -> None:
        """Validate each pair and print its figures; ids are checked against the report's vocab,
        else the vocab size the folder's manifest records."""
        from bertdata.instances.vocab import check_vocab

        for unit in units:
            prefix = unit[:-len(IDX)] if unit.endswith((BIN, IDX)) else unit
            try:
                options = self.recorded(prefix)
                if report.vocab is not None:
                    check_vocab(report.vocab, options, prefix)
                vocab_size = len(report.vocab) if report.vocab is not None else options.get("vocab_size")
                info = validate_pair(prefix, vocab_size)
            except ValidationError as err:
                report.failures.append(str(err))
                report.out(f"Megatron pair {prefix}: INVALID")
                continue
            report.out(f"Megatron pair {prefix}: {info.documents:,} documents, {info.sentences:,} sentences, "
                       f"{info.tokens:,} {info.dtype.name} tokens, {info.mean_sentence_length:.1f} tokens per "
                       "sentence" + ("" if vocab_size else " (ids not checked: no vocab size known)"))


MEGATRON = MegatronPairs()
