"""`bertdata shard`: re-partition hdf5 shards into N balanced, globally shuffled parts.

`repartition` runs the command: it reads and checks the inputs (`inputs`), makes the parts
with an external two-pass shuffle (`shuffle`) in a pool of processes (`workers`), and puts
them into the output folder with their manifest (`publish`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from bertdata.config import ReshardConfig
from bertdata.errors import BertdataError
from bertdata.formats import lddl
from bertdata.formats.hdf5io import LAYOUT
from bertdata.instances.schema import FIELDS, record_dtype
from bertdata.manifest import MANIFEST, tool_record, write_manifest
from bertdata.reshard.inputs import (RESHARD_TOOL, Input, check_inputs, dataset_name, find_inputs, input_vocab, part_name,
                                    read_input)
from bertdata.reshard.publish import (check_free_space, existing_outputs, input_digests, make_temp_folder, publish,
                                      remove_dead_temp_folders, sha256_of, size_of, stale_parts)
from bertdata.reshard.shuffle import (Buckets, Chooser, Plan, bucket_count, gathered, part_sizes, sample_size,
                                      scatter, write_part)
from bertdata.reshard.workers import CtrlC, Workers
from bertdata.text.shards import shard_stem


@dataclass
class ReshardResult:
    output: str
    parts: list[str]
    instances_in: int
    instances_out: int
    bytes_in: int
    bytes_out: int
    seconds: float
    removed: list[str] = field(default_factory=list)
    # About temporary folders of earlier runs: removed (their run is gone) or left alone.
    notes: list[str] = field(default_factory=list)
    lddl: dict[str, Any] | None = None  # what lddl.write_phase wrote, for --format lddl

    def summary(self) -> str:
        mb_in, mb_out, secs = self.bytes_in / 1e6, self.bytes_out / 1e6, max(self.seconds, 1e-9)
        if self.lddl is not None:
            bins = len(self.lddl["bins"])
            return (f"{self.instances_in:,} instances in, {self.instances_out:,} out ({self.lddl['dropped']} dropped "
                    f"to balance the bins), {len(self.parts)} LDDL files ({self.lddl['num_shards']} per bin, "
                    f"{bins} bin{'s' if bins > 1 else ''}, {self.lddl['masking']} masking) in {self.output}, "
                    f"{self.seconds:.1f} s, {mb_in / secs:.1f} MB/s in, {mb_out / secs:.1f} MB/s parquet out")
        return (f"{self.instances_in:,} instances in, {self.instances_out:,} out, {len(self.parts)} parts "
                f"in {self.output}, {self.seconds:.1f} s, {mb_in / secs:.1f} MB/s hdf5 in, "
                f"{mb_out / secs:.1f} MB/s hdf5 out")


def repartition(config: ReshardConfig) -> ReshardResult:
    began = time.perf_counter()
    tool = tool_record(RESHARD_TOOL)
    output = Path(config.output)
    if output.exists() and not output.is_dir():
        raise BertdataError(f"{output}: exists and is not a folder")
    to_lddl = config.format == "lddl"
    paths, input_notes = find_inputs(config.inputs, config.split, output)
    sources = [read_input(p, config.vocab) for p in paths]
    infos = [source.info for source in sources]
    attrs = check_inputs(infos)
    text_inputs = [source for source in sources if source.format.rows_as_text]
    if config.vocab is not None and not (to_lddl or text_inputs):
        raise BertdataError("--vocab is for LDDL output or input; hdf5 shards hold token ids")
    vocab = input_vocab(infos, config.vocab) if to_lddl or text_inputs else None
    masking = config.masking or "static"
    if any(s.reading.masking == "dynamic" for s in sources) and not (to_lddl and masking == "dynamic"):
        raise BertdataError("an LDDL input with dynamic masking holds no masks to write; "
                            "only --format lddl --masking dynamic can take it")
    total = sum(i.num_instances for i in infos)
    keep = sample_size(total, config.sample, config.max_instances)
    if config.parts > keep and not to_lddl:
        picked = "" if keep == total else f" ({'--sample' if config.sample else '--max-instances'} keeps {keep:,})"
        raise BertdataError(f"--parts {config.parts} is more than the {keep:,} instances to share out{picked}; "
                            "every part needs at least one")
    existing = [] if to_lddl else existing_outputs(output)  # write_phase refuses a non-empty folder itself
    if existing and not config.force:
        raise BertdataError(f"{output}: already holds parts or a manifest ({existing[0].name}, "
                            f"{len(existing)} in all); pass --force to replace them")
    name = config.name or dataset_name(paths)
    split_word = "test" if config.split == "test" else "training"
    part_files = [part_name(shard_stem(name, split_word, i), split_word, i) for i in range(config.parts)]

    first = infos[0]
    dtype = record_dtype(first.max_seq_length, first.max_predictions_per_seq)
    num_buckets = bucket_count(keep, dtype)
    bytes_in = sum(size_of(p) for p in paths)
    # An LDDL folder may hold no subfolder (its loader would read it too): the temporary folder
    # goes beside it.
    temp_parent = output.absolute().parent if to_lddl else output
    notes = input_notes + remove_dead_temp_folders(temp_parent)
    # Buckets hold the kept rows uncompressed; the parts, compressed about as well as the inputs,
    # are written beside them before either is removed.
    check_free_space(temp_parent, keep * dtype.itemsize + bytes_in * keep // max(total, 1))
    tmp = make_temp_folder(temp_parent)
    hasher, stop_hashing = ThreadPoolExecutor(1), threading.Event()
    workers: Workers | None = None
    with CtrlC() as ctrl_c:
        try:
            workers = Workers(min(config.workers, config.parts), ctrl_c)
            # Hashing the inputs overlaps the scatter: hashlib releases the GIL on large blocks.
            hashing = hasher.submit(input_digests, paths, stop_hashing)
            buckets = Buckets(tmp, num_buckets)
            tokens = vocab.tokens if vocab else None
            plan = Plan(tuple(buckets.paths), (), (), (), first.max_seq_length, first.max_predictions_per_seq,
                        attrs, config.seed)
            options = {"split": config.split, "parts": config.parts, "seed": config.seed,
                       "sample": config.sample, "max_instances": config.max_instances}

            def inputs() -> list[dict[str, Any]]:
                return [{"path": info.path, "sha256": digest, "instances": info.num_instances,
                         "bytes": size_of(info.path)} for info, digest in zip(infos, hashing.result())]

            if to_lddl:
                if config.force:  # a crash midway must not leave the old manifest beside new files
                    with contextlib.suppress(FileNotFoundError):
                        (output / MANIFEST).unlink()
                written = _write_lddl(config, sources, plan, buckets, keep, tokens, output, ctrl_c)
                names = sorted(written["files"], key=lambda n: lddl.name_parts(n)[::-1])
                files = [{"file": n, "bin": lddl.name_parts(n)[1], "rows": written["files"][n],
                          "sha256": sha256_of(str(output / n)), "bytes": (output / n).stat().st_size} for n in names]
                write_manifest(output / MANIFEST, {
                    "format": "lddl",
                    "options": {**options, "masking": masking, "bin_size": config.bin_size, "ranks": config.ranks or 1},
                    "max_seq_length": first.max_seq_length,
                    "max_predictions_per_seq": first.max_predictions_per_seq,
                    "attrs": {**attrs, "vocab_sha256": vocab.sha256, "vocab_size": len(vocab)},
                    "buckets": num_buckets, "instances_in": total, "instances_sampled": keep,
                    "instances_out": written["rows"], "dropped": written["dropped"],
                    "bins": written["bins"], "inputs": inputs(), "files": files,
                }, tool)
                return ReshardResult(str(output), [str(output / f["file"]) for f in files], total, written["rows"],
                                   bytes_in, written["bytes"], time.perf_counter() - began, notes=notes,
                                   lddl=written)
            scatter(sources, Chooser(total, keep, num_buckets, config.seed), buckets, dtype, ctrl_c)
            temp_parts = [part_name(f"part_{i:06d}", split_word, i) for i in range(config.parts)]
            plan = dataclasses.replace(plan, bucket_sizes=tuple(int(s) for s in buckets.sizes),
                                       part_paths=tuple(os.path.join(tmp, f) for f in temp_parts),
                                       part_sizes=tuple(part_sizes(keep, config.parts)))
            written = sorted(workers.run(write_part, plan, list(range(config.parts)), keep, "write"))
            workers.close()
            manifest = {
                "options": {**options, "name": name},
                "layout": LAYOUT,
                "max_seq_length": first.max_seq_length,
                "max_predictions_per_seq": first.max_predictions_per_seq,
                "attrs": attrs,
                "buckets": num_buckets,
                "instances_in": total,
                "instances_out": keep,
                "inputs": inputs(),
                "parts": [{"file": part_files[i], "instances": plan.part_sizes[i], "sha256": digest,
                           "bytes": size} for i, digest, size in written],
            }
            removed = publish(Path(tmp), output, dict(zip(temp_parts, part_files)),
                              stale_parts(output, name, split_word, set(part_files)), tool, manifest)
        finally:
            if workers is not None:
                workers.close()
            stop_hashing.set()
            hasher.shutdown(wait=True)
            shutil.rmtree(tmp, ignore_errors=True)
    return ReshardResult(str(output), [str(output / f) for f in part_files], total, keep,
                       bytes_in, sum(size for _, _, size in written),
                       time.perf_counter() - began, [str(p) for p in removed], notes)


def _write_lddl(config: ReshardConfig, sources: list[Input], plan: Plan, buckets: Buckets, keep: int,
                tokens: tuple[str, ...], output: Path, ctrl_c: CtrlC) -> dict[str, Any]:
    """The kept rows in their global shuffled order, into an LDDL folder (see `lddl.write_phase`).

    The rows reach write_phase lazily, so it checks its options and the folder before the
    scatter reads a single input."""
    def rows() -> Iterator[dict[str, np.ndarray]]:
        scatter(sources, Chooser(sum(s.info.num_instances for s in sources), keep, len(buckets.paths), config.seed),
                buckets, plan.dtype, ctrl_c)
        shuffled = dataclasses.replace(plan, bucket_sizes=tuple(int(s) for s in buckets.sizes))
        with tqdm(total=keep, unit="inst", desc="write", dynamic_ncols=True, disable=None) as bar:
            for records in gathered(shuffled, 0, keep):
                yield {name: records[name] for name in FIELDS}
                bar.update(len(records))
                ctrl_c.check()

    return lddl.write_phase(rows(), output, tokens, seq_len=plan.max_seq_length, num_shards=config.parts,
                            masking=config.masking or "static", bin_size=config.bin_size, ranks=config.ranks or 1,
                            force=config.force)
