"""nanoGPT's data (`data/openwebtext/prepare.py`): `train.bin` and `val.bin`, every sample's ids as
uint16 one after another, which `train.py` reads with `np.memmap(..., dtype=np.uint16)` and cuts
into windows of `block_size`. The ids are those of the other document formats' samples (a document,
or a piece of one cut at sentence boundaries, the tokenizer's special tokens around it), and a
sample here is a window of `--max-seq-length` ids, as nanoGPT reads them. Any tokenizer of at most
65,536 ids serves (a `--tokenizer` file, or the build's WordPiece vocab)."""

from __future__ import annotations

import os

import numpy as np

from bertdata.errors import BertdataError, ValidationError
from bertdata.formats.base import DocumentFolder

SPLIT_FILES = {"training": "train.bin", "test": "val.bin"}  # nanoGPT's names for the build's splits
PART = "part.bin"
DTYPE = np.dtype("<u2")
BLOCK = 1 << 22  # ids read at a time: a check's memory is bounded by a block, not a split


class NpBin(DocumentFolder):
    name = "npbin"
    describe = ("nanoGPT's train.bin/val.bin: every sample's ids as uint16, one file per split, under "
                "OUTPUT/npbin/<tokenizer>/ (a plugin)")
    writes = "train.bin and val.bin, whatever the phases"
    disk_per_text_byte = {None: 0.5}  # uint16 ids, about a token per 4 bytes of text, with room to spare
    files = tuple(SPLIT_FILES.values())
    counted = ("samples", "tokens")
    files_counted = ("splits", "file")

    def options(self, settings) -> dict:
        if settings.tokenizer.vocab_size > 1 << 16:
            raise BertdataError(f"--format npbin: {settings.tokenizer.name} has {settings.tokenizer.vocab_size:,} "
                                "ids, more than uint16 holds")
        return super().options(settings)

    def write_part(self, shard, documents, settings, local: str) -> str:
        from bertdata.instances.samples import make_samples

        samples = make_samples(documents, settings.tokenizer, settings.max_seq_length, shard.stem)
        samples.tokens.astype(DTYPE).tofile(os.path.join(local, PART))
        return PART

    def finish_split(self, split: str, parts, settings, folder: str, files) -> dict:
        listed = self.joined(parts, SPLIT_FILES[split], folder, files)
        tokens = listed["bytes"] // DTYPE.itemsize
        return {"samples": tokens // settings.max_seq_length, "tokens": tokens, "files": [listed]}

    def _ids(self, unit: str, entry: dict) -> np.ndarray:
        path = os.path.join(unit, entry["files"][0]["file"])
        if os.path.getsize(path) != entry["tokens"] * DTYPE.itemsize:
            raise ValidationError(f"{path}: {os.path.getsize(path):,} bytes, not the {entry['tokens']:,} ids recorded")
        return np.memmap(path, dtype=DTYPE, mode="r") if entry["tokens"] else np.zeros(0, DTYPE)

    def read(self, unit: str, entry: dict, options: dict):
        """Windows of the samples' length, as nanoGPT's `get_batch` cuts them (across documents)."""
        ids, width = self._ids(unit, entry), options["max_seq_length"]
        for start in range(0, len(ids) - width + 1, width):
            yield np.asarray(ids[start:start + width])

    def check(self, unit: str, entry: dict, vocab_size: int | None) -> str:
        ids = self._ids(unit, entry)
        for start in range(0, len(ids), BLOCK):
            top = int(ids[start:start + BLOCK].max())
            if vocab_size is not None and top >= vocab_size:
                raise ValidationError(f"{unit}/{entry['files'][0]['file']}: id {top}, outside the vocab's "
                                      f"{vocab_size:,} tokens")
        return f"{len(ids):,} uint16 ids, {entry['samples']:,} windows"


NPBIN = NpBin()
