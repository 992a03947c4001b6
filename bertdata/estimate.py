"""What a build needs, told before it starts: disk at the output (what it writes, plus its
temporaries) and time, from the dump's size and the chosen formats and phases.

The ratios are measured by `scripts/perf_disk.py` on the real fragment (README, Performance);
each format states its own output's (`disk_per_text_byte`, bertdata.formats).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass

from bertdata.config import PHASE1, InstanceConfig, phase_number
from bertdata.formats import ACROSS_SHARDS
from bertdata.fsutil import size_text
from bertdata.formats import get as get_format

# Bytes of clean text per byte of bz2 dump. Books are plain text already: a byte is a byte.
TEXT_PER_DUMP_BYTE = 1.505
# The dupe factor the formats' ratios of instances were measured at: the instances, and so
# the bytes, grow in step with it.
MEASURED_DUPE_FACTOR = PHASE1.dupe_factor
# Temporaries (OUTPUT/.bertdata-work), whose peaks do not overlap: the text stage's run files
# per byte of clean text (removed when the stage ends), then the runs of a format cut across
# shards (LDDL's) per byte of its output (kept until its files are cut from them).
TEXT_RUNS_PER_TEXT_BYTE = 0.410
LDDL_RUNS_PER_LDDL_BYTE = 1.031
# Speed: bz2 bytes turned into phase-1 hdf5 shards per second (README, `make perf-scale`: the
# 64x dump, 107 MB) by one worker, which keeps part of a second core busy (27.8 s), and by each
# of several workers, a core each (2 workers: 20.3 s); and the time of both phases in both
# formats, and of the text stage alone, against it (scripts/perf_disk.py, a 4x dump, one
# worker; start-up is a larger share there).
DUMP_BYTES_PER_SECOND_ONE_WORKER = 107.4e6 / 27.8
DUMP_BYTES_PER_WORKER_SECOND = 107.4e6 / 20.3 / 2
BOTH_PHASES_BOTH_FORMATS_TIME = 1.94
TEXT_STAGE_TIME = 0.83
# Room on top of the estimate: the ratios vary with the wiki and its text.
MARGIN = 1.2


@dataclass(frozen=True)
class Estimate:
    """Bytes a build writes, part by part, and its time at the measured rate."""

    parts: tuple[tuple[str, int], ...]  # (what, bytes)
    seconds: float

    @property
    def total(self) -> int:
        return sum(n for _, n in self.parts)

    def describe(self) -> str:
        return ", ".join(f"{what} {size_text(n)}" for what, n in self.parts if n)


def estimate_build(dump_bytes: int, book_bytes: int, formats: Iterable[str], phases: Iterable[InstanceConfig],
                   text: bool = True, workers: int = 1) -> Estimate:
    """The disk and time for the text stage (when `text`) and each phase in each format."""
    formats, phases = tuple(formats), tuple(phases)
    clean = dump_bytes * TEXT_PER_DUMP_BYTE + book_bytes
    parts = [("text shards", int(clean) if text else 0)]
    runs = 0
    for name in formats:
        fmt = get_format(name)
        ratios = fmt.disk_per_text_byte
        if None in ratios:  # written once whatever the phases
            parts.append((name, int(clean * ratios[None]) if phases else 0))
            continue
        for p in phases:
            size = int(clean * ratios[phase_number(p)] * p.dupe_factor / MEASURED_DUPE_FACTOR)
            parts.append((f"{name} phase {phase_number(p)}", size))
            runs += size if fmt.cut == ACROSS_SHARDS else 0
    parts.append(("temporaries", int(max(clean * TEXT_RUNS_PER_TEXT_BYTE if text else 0,
                                         runs * LDDL_RUNS_PER_LDDL_BYTE))))
    # The measured factor spread over the format x phase pairs beyond the first.
    pairs = len(formats) * len(phases)
    factor = 1 + (BOTH_PHASES_BOTH_FORMATS_TIME - 1) * max(0, pairs - 1) / 3 if pairs else TEXT_STAGE_TIME
    seconds = (dump_bytes + book_bytes / TEXT_PER_DUMP_BYTE) / dump_bytes_per_second(workers)
    return Estimate(tuple(parts), seconds * factor)


def dump_bytes_per_second(workers: int) -> float:
    """The measured phase-1 rate of `workers` workers, in bytes of bz2 dump per second."""
    return DUMP_BYTES_PER_SECOND_ONE_WORKER if workers <= 1 else DUMP_BYTES_PER_WORKER_SECOND * workers


def free_bytes(path: str) -> int:
    """Free disk where `path` is or would be created."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def folder_bytes(path: str) -> int:
    """What the files under `path` hold (0 when it does not exist)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def duration_text(seconds: float) -> str:
    if seconds < 60:
        return "under a minute"
    if seconds < 5400:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"
