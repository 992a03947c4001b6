"""The text stage's work cut up: the dump into byte ranges (work items, the unit of progress),
items and books into groups of equal weight (what one worker cleans and spills in one go)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from bertdata.pipelines.runtime import fsio


@dataclass(frozen=True)
class WorkItem:
    """What one worker reads in one piece: a byte range of a multistream dump (the whole
    dump when `start` is None), or one book file."""

    kind: str  # "dump", "book" or "corpus" (a file of a recipe's corpus)
    path: str
    start: int | None = None
    end: int | None = None
    corpus: str | None = None  # the recipe's corpus a "corpus" file is of
    weight: int = 0  # a corpus part's bytes (its file's, or its row groups')

    @property
    def marker(self) -> tuple | None:
        """The progress marker of a dump range or a corpus's file, None for anything else."""
        if self.kind == "corpus":
            # "~" is in no corpus's name: each corpus's markers match its own glob only.
            part = f"{self.path}\0{self.start}\0{self.end}"
            return (f"corpus~{self.corpus}~{hashlib.sha1(part.encode()).hexdigest()[:16]}",)
        return (self.start, self.end) if self.kind == "dump" and self.start is not None else None


def open_raw(path: str):
    return fsio.open_file(path)


# Each group makes at least one run file, and the local runner hands every worker the same
# number of groups, fixed in advance, so groups must be of equal weight and several per
# worker to even out the rest.
GROUPS_PER_WORKER = 4
# Compressed bytes per read work item: a few MB, and small enough that every group is made
# of several, or groups could not be of equal size.
WORK_ITEM_BYTES = 4 << 20
ITEMS_PER_GROUP = 16
# A byte of book text is worth about a third of a byte of bz2 dump in cleaning work; a byte of a
# compressed corpus file (parquet, .gz, .zst: about 3x) as much as a byte of dump.
BOOK_BYTE_WEIGHT = 1 / 3
COMPRESSED = (".parquet", ".gz", ".zst", ".zstd")


def work_items(dump: str, index: str | None, workers: int) -> list[WorkItem]:
    """Byte ranges of a multistream dump, or the whole file as one item (a single bz2
    stream cannot be cut: one worker reads it all)."""
    from bertdata.text.multistream import plan_ranges, stream_ranges

    if index is None:
        return [WorkItem("dump", dump)]
    ranges = stream_ranges(dump, index, open_raw)
    total = ranges[-1][1] - ranges[0][0]
    target = max(1, min(WORK_ITEM_BYTES, total // (ITEMS_PER_GROUP * GROUPS_PER_WORKER * workers)))
    return [WorkItem("dump", dump, start, end) for start, end in plan_ranges(ranges, target)]


def _weight(item: WorkItem) -> float:
    if item.kind == "corpus":
        return item.weight * (1 if item.path.lower().endswith(COMPRESSED) else BOOK_BYTE_WEIGHT)
    return (item.end - item.start) if item.start is not None else 1


def work_groups(items: list[WorkItem], books: list[str], workers: int) -> list[list[WorkItem]]:
    """Dump items, corpus parts and books cut into about GROUPS_PER_WORKER x workers groups of
    equal weight. Items stay in order, group after group, so (group, run) order is dump order:
    the first copy of a repeated page id is the one kept."""
    weighted = [(item, _weight(item)) for item in items]
    weighted += [(WorkItem("book", b), fsio.size(b) * BOOK_BYTE_WEIGHT) for b in books]
    count = max(1, min(len(weighted), GROUPS_PER_WORKER * workers))
    total = sum(w for _, w in weighted) or 1
    groups: list[list[WorkItem]] = [[] for _ in range(count)]
    done = 0.0
    for item, weight in weighted:
        # The group its midpoint falls in: contiguous groups, each off by at most half an item.
        groups[min(count - 1, int((done + weight / 2) * count / total))].append(item)
        done += weight
    return [g for g in groups if g]
