"""`decontaminate:`: evaluation sets read into one table of their n-grams, and the check that
finds a document sharing one.

    decontaminate:
      ngram: 13
      against:
        - {files: "squad/dev-v1.1.json", type: squad}     # data[].paragraphs[].context, qas[].question
        - {files: "glue/*/dev.tsv", type: tsv, text: sentence}
        - {files: "evals.jsonl", text: context}            # jsonl, json or parquet with a named text key

An evaluation row of fewer words than `ngram` has no n-gram to find: the table counts such rows,
and the build's manifest says how many (a smaller `ngram` checks them).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

import numpy as np

from bertdata.dedup.words import MAX_NGRAM, ngram_hashes, word_hashes
from bertdata.errors import BertdataError

TYPES = ("squad", "tsv", "jsonl", "json", "parquet")
# The n-gram of GPT-3's and most decoders' decontamination.
DEFAULT_NGRAM = 13


@dataclass(frozen=True)
class EvalSet:
    """One entry of `against:`: its files (paths or patterns), their type, and the text key."""

    files: tuple[str, ...]
    type: str | None  # None: each file's from its name (type_of)
    text: str | None = None

    def record(self) -> dict:
        return {"files": list(self.files), "type": self.type, "text": self.text}


@dataclass(frozen=True)
class DecontaminateConfig:
    against: tuple[EvalSet, ...]
    ngram: int = DEFAULT_NGRAM

    def __post_init__(self) -> None:
        if isinstance(self.ngram, bool) or not isinstance(self.ngram, int) or not 1 <= self.ngram <= MAX_NGRAM:
            raise BertdataError(f"decontaminate: ngram must be a whole number from 1 to {MAX_NGRAM} "
                                f"(got {self.ngram!r})")
        if not self.against:
            raise BertdataError("decontaminate: against: names no evaluation set")

    def record(self) -> dict:
        return {"ngram": self.ngram, "against": [e.record() for e in self.against]}


def flag_set(value: str) -> EvalSet:
    """`--decontaminate`'s FILE or FILE=KEY as an evaluation set: a JSON file without a key is
    SQuAD's layout; any other names its text column or key."""
    path, _, key = value.rpartition("=") if "=" in value else (value, "", "")
    if not path or (key == "" and "=" in value):
        raise BertdataError(f"--decontaminate {value}: FILE or FILE=KEY, the key naming the text column")
    if key:
        return EvalSet((path,), type_of(path, None), key)
    kind = type_of(path, None)
    if kind != "json":
        raise BertdataError(f"--decontaminate {path}: a {kind} file needs its text column or key: {path}=KEY")
    return EvalSet((path,), "squad")


def flag_decontamination(values: tuple[str, ...]) -> DecontaminateConfig | None:
    """--decontaminate's values as the settings a recipe's decontaminate: states (13-grams)."""
    return DecontaminateConfig(tuple(flag_set(v) for v in values)) if values else None


def type_of(path: str, given: str | None) -> str:
    """An evaluation file's type: as given, else from its name."""
    if given is not None:
        return given
    name = path.lower()
    for suffix, kind in ((".tsv", "tsv"), (".jsonl", "jsonl"), (".json", "json"), (".parquet", "parquet")):
        if name.endswith(suffix):
            return kind
    raise BertdataError(f"{path}: no type: given and none its name shows (one of {', '.join(TYPES)})")


def rows(path: str, kind: str, text_key: str | None, data: bytes):
    """(row label, text) of every row of the evaluation file `path` (its bytes `data`)."""
    def fail(what: str) -> BertdataError:
        return BertdataError(f"{path}: {what}")

    if kind == "squad":
        try:
            articles = json.loads(data)["data"]
            for i, article in enumerate(articles):
                for j, paragraph in enumerate(article["paragraphs"]):
                    yield f"data[{i}].paragraphs[{j}].context", str(paragraph["context"])
                    for k, qa in enumerate(paragraph.get("qas", ())):
                        yield f"data[{i}].paragraphs[{j}].qas[{k}].question", str(qa["question"])
        except (ValueError, KeyError, TypeError, IndexError) as err:
            raise fail(f"not a SQuAD file (data[].paragraphs[].context; {type(err).__name__}: {err})") from None
        return
    if text_key is None:
        raise fail(f"a {kind} evaluation set names its text column or key (text:)")
    if kind == "tsv":
        try:
            reader = csv.DictReader(io.StringIO(data.decode("utf-8")), delimiter="\t", quoting=csv.QUOTE_NONE)
            if reader.fieldnames is None or text_key not in reader.fieldnames:
                raise fail(f"no column {text_key!r} in its header ({', '.join(reader.fieldnames or ())})")
            for line, row in enumerate(reader, start=2):
                yield f"line {line}", row[text_key] or ""
        except UnicodeDecodeError as err:
            raise fail(f"not UTF-8 text ({err.reason} at byte {err.start})") from None
        return
    if kind == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(io.BytesIO(data), columns=[text_key])
        except (pa.ArrowInvalid, KeyError) as err:
            raise fail(f"not a parquet file with a column {text_key!r} ({err})") from None
        for n, value in enumerate(table.column(0).to_pylist()):
            yield f"row {n}", "" if value is None else str(value)
        return
    if kind in ("jsonl", "json"):
        try:
            records = (json.loads(data) if kind == "json" else
                       [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()])
        except (ValueError, UnicodeDecodeError) as err:
            raise fail(f"not {kind.upper()} ({err})") from None
        if kind == "json" and isinstance(records, dict):
            records = next((v for v in records.values() if isinstance(v, list)), [records])
        for n, record in enumerate(records if isinstance(records, list) else [records]):
            if not isinstance(record, dict) or text_key not in record:
                raise fail(f"record {n} has no key {text_key!r}")
            yield (f"line {n + 1}" if kind == "jsonl" else f"record {n}"), str(record[text_key] or "")
        return
    raise fail(f"type {kind!r} is none of {', '.join(TYPES)}")


class EvalTable:
    """Every n-gram of the evaluation rows, sorted, with the file and row each came from first."""

    def __init__(self, ngram: int, files: list[tuple[str, str, str | None, bytes]]) -> None:
        """`files`: (path, type, text key, bytes) of each evaluation file, in a fixed order."""
        self.ngram, self.paths = ngram, [f[0] for f in files]
        self.rows: list[list[str]] = []
        self.short = [0] * len(files)
        hashes, origins = [], []
        for number, (path, kind, key, data) in enumerate(files):
            labels: list[str] = []
            for label, text in rows(path, kind, key, data):
                grams = ngram_hashes(word_hashes(text), ngram) if text else np.zeros(0, np.uint64)
                if not len(grams):
                    self.short[number] += 1
                    continue
                hashes.append(grams)
                origins.append(np.full(len(grams), (number << 40) | len(labels), dtype=np.int64))
                labels.append(label)
            if not labels:
                raise BertdataError(f"{path}: holds no evaluation text of {ngram}+ words "
                                    f"({self.short[number]:,} rows, all shorter)")
            self.rows.append(labels)
        allh = np.concatenate(hashes)
        order = np.argsort(allh, kind="stable")
        self.hashes, self.origins = allh[order], np.concatenate(origins)[order]

    def hit(self, text: str) -> tuple[int, str] | None:
        """The first evaluation row (file number, row label) sharing an n-gram with `text`, or None."""
        grams = ngram_hashes(word_hashes(text), self.ngram)
        if not len(grams):
            return None
        at = np.searchsorted(self.hashes, grams)
        at[at == len(self.hashes)] = 0
        found = np.flatnonzero(self.hashes[at] == grams)
        if not len(found):
            return None
        origin = int(self.origins[at[found[0]]])
        return origin >> 40, self.rows[origin >> 40][origin & ((1 << 40) - 1)]
