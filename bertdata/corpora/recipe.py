"""A recipe: the corpora of a build, each filtered, and how they are mixed (docs/recipes.md).

    corpora:
      edu:   {type: parquet, files: "fineweb-edu/*.parquet", text: text, id: id, where: "int_score >= 3"}
      c4:    {type: jsonl, files: "c4/*.json.gz", id: url}
      books: {type: text, files: "books/*.txt"}
    mix: {edu: 0.6, c4: 0.3, books: 0.1}   # shares of the output's tokens; absent: all, once
    seed: 0

Everything is checked here, before any file is looked at; a fault is one line naming the recipe
and the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bertdata import corpora
from bertdata.corpora.contract import CorpusSpec
from bertdata.corpora.where import parse
from bertdata.dedup.evals import TYPES as EVAL_TYPES, DecontaminateConfig, EvalSet
from bertdata.dedup.minhash import DedupConfig
from bertdata.errors import BertdataError

TOP_KEYS = ("corpora", "mix", "seed", "name", "dedup", "decontaminate")
COMMON_KEYS = ("type", "files", "language", "min_tokens", "repeat")
# Passes over one corpus: more would be a corpus a few documents long, seen past learning anything.
MAX_REPEAT = 64
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# A recipe is a few lines: a bigger file is not one.
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Recipe:
    """A parsed recipe: its corpora in recipe order (those `mix` names, where it is given), the
    shares of the output's tokens (summing to 1; None: every document, once) and the seed of the
    mix's draw."""

    path: str
    name: str  # the text shards' dataset name: `name:`, else the recipe file's stem
    corpora: tuple[CorpusSpec, ...]
    mix: tuple[tuple[str, float], ...] | None
    seed: int = 0
    dedup: DedupConfig | None = None
    decontaminate: DecontaminateConfig | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.corpora)

    def share(self, name: str) -> float | None:
        return dict(self.mix)[name] if self.mix else None

    def record(self) -> dict:
        """What every manifest records of the recipe, and a re-run compares."""
        record = {"name": self.name, "seed": self.seed, "mix": dict(self.mix) if self.mix else None,
                  "corpora": {c.name: c.record() for c in self.corpora}}
        # Only where given: a recipe without them records (and digests) as it always did.
        if self.dedup is not None:
            record["dedup"] = self.dedup.record()
        if self.decontaminate is not None:
            record["decontaminate"] = self.decontaminate.record()
        return record


def load_recipe(path: str, data: bytes) -> Recipe:
    """The recipe in `data` (the file at `path`'s bytes)."""
    import yaml

    if len(data) > MAX_BYTES:
        raise BertdataError(f"{path}: {len(data):,} bytes is no recipe (a recipe is a short YAML file)")
    try:
        raw = yaml.safe_load(data)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise BertdataError(f"{path}: not YAML{where} ({getattr(err, 'problem', None) or err})") from None
    except RecursionError:
        raise BertdataError(f"{path}: YAML nested too deeply") from None
    return parse_recipe(path, raw)


def parse_recipe(path: str, raw) -> Recipe:
    def fail(what: str) -> BertdataError:
        return BertdataError(f"{path}: {what}")

    if not isinstance(raw, dict):
        raise fail("a recipe is a mapping with corpora: (and mix:, seed:, name:)")
    unknown = [k for k in raw if k not in TOP_KEYS]
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (a recipe's keys: {', '.join(TOP_KEYS)})")
    given = raw.get("corpora")
    if not isinstance(given, dict) or not given:
        raise fail("corpora: must name at least one corpus, as name: {type: ..., files: ...}")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise fail(f"seed: must be a whole number of 0 or more (got {seed!r})")
    specs = [_corpus(path, str(name), entry) for name, entry in given.items()]
    if sum(s.type == "wikipedia" for s in specs) > 1:
        raise fail("corpora: one wikipedia corpus a recipe (its dump is read in byte ranges by every worker)")
    mix = _mix(path, raw.get("mix"), [s.name for s in specs])
    if mix is not None:
        specs = [s for s in specs if s.name in dict(mix)]
    name = raw.get("name", _stem(path))
    if not isinstance(name, str) or not _NAME.match(name):
        raise fail(f"name: {name!r} is not a folder name (letters, digits, _ . -)")
    return Recipe(path, name, tuple(specs), mix, seed, _dedup(path, raw.get("dedup")),
                  _decontaminate(path, raw.get("decontaminate")))


def _dedup(path: str, given) -> DedupConfig | None:
    """`dedup: true` (exact and MinHash, datatrove's parameters), or {exact: bool, minhash: true or
    {ngram:, bands:, rows:, seed:, min_similarity:}}: what the mapping leaves out is not done."""
    if given is None or given is False:
        return None
    if given is True:
        return _checked(path, DedupConfig)
    if not isinstance(given, dict):
        raise BertdataError(f"{path}: dedup: is true, or a mapping such as {{exact: true, minhash: {{ngram: 5}}}}")
    unknown = [k for k in given if k not in ("exact", "minhash")]
    if unknown:
        raise BertdataError(f"{path}: dedup: unknown key {unknown[0]!r} (it takes exact, minhash)")
    exact, minhash = given.get("exact", False), given.get("minhash", False)
    if not isinstance(exact, bool):
        raise BertdataError(f"{path}: dedup: exact: is true or false (got {exact!r})")
    if isinstance(minhash, bool):
        return _checked(path, DedupConfig, exact=exact, minhash=minhash)
    if not isinstance(minhash, dict):
        raise BertdataError(f"{path}: dedup: minhash: is true, or a mapping of ngram, bands, rows, seed, "
                            "min_similarity")
    keys = ("ngram", "bands", "rows", "seed", "min_similarity")
    unknown = [k for k in minhash if k not in keys]
    if unknown:
        raise BertdataError(f"{path}: dedup: minhash: unknown key {unknown[0]!r} (it takes {', '.join(keys)})")
    return _checked(path, DedupConfig, exact=exact, minhash=True, **minhash)


def _decontaminate(path: str, given) -> DecontaminateConfig | None:
    if given is None:
        return None
    if not isinstance(given, dict) or "against" not in given:
        raise BertdataError(f"{path}: decontaminate: is a mapping with against: (a list of evaluation sets) "
                            "and ngram:")
    unknown = [k for k in given if k not in ("ngram", "against")]
    if unknown:
        raise BertdataError(f"{path}: decontaminate: unknown key {unknown[0]!r} (it takes ngram, against)")
    against = given["against"]
    if not isinstance(against, list) or not against:
        raise BertdataError(f"{path}: decontaminate: against: is a list of evaluation sets, as "
                            "[{files: \"squad/dev-v1.1.json\", type: squad}]")
    sets = []
    for n, entry in enumerate(against):
        where = f"{path}: decontaminate: against[{n}]"
        if not isinstance(entry, dict):
            raise BertdataError(f"{where}: is a mapping with files: (and type:, text:)")
        unknown = [k for k in entry if k not in ("files", "type", "text")]
        if unknown:
            raise BertdataError(f"{where}: unknown key {unknown[0]!r} (it takes files, type, text)")
        files = entry.get("files")
        files = (files,) if isinstance(files, str) else files
        if not isinstance(files, (list, tuple)) or not files or not all(isinstance(f, str) and f for f in files):
            raise BertdataError(f"{where}: files: must be a path or pattern, or a list of them")
        kind, text = entry.get("type"), entry.get("text")
        if kind is not None and kind not in EVAL_TYPES:
            raise BertdataError(f"{where}: type: must be one of {', '.join(EVAL_TYPES)} (got {kind!r})")
        if text is not None and (not isinstance(text, str) or not text):
            raise BertdataError(f"{where}: text: must name a column or key")
        if kind not in (None, "squad") and text is None:
            raise BertdataError(f"{where}: a {kind} evaluation set names its text column or key (text:)")
        sets.append(EvalSet(tuple(files), kind, text))
    return _checked(path, DecontaminateConfig, against=tuple(sets), **({"ngram": given["ngram"]} if "ngram" in given
                                                                         else {}))


def _checked(path: str, cls, **kwargs):
    """cls(**kwargs), its own checks' fault naming the recipe."""
    try:
        return cls(**kwargs)
    except BertdataError as err:
        raise BertdataError(f"{path}: {err}") from None


def _stem(path: str) -> str:
    stem = path.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stem) or "recipe"


def _corpus(path: str, name: str, entry) -> CorpusSpec:
    def fail(what: str) -> BertdataError:
        return BertdataError(f"{path}: corpora.{name}: {what}")

    if not _NAME.match(name) or "/" in name:
        raise BertdataError(f"{path}: corpora: {name!r} is not a corpus name (letters, digits, _ . -); it "
                            "begins every sample's id")
    if not isinstance(entry, dict):
        raise fail("must be a mapping, as {type: jsonl, files: \"c4/*.json.gz\"}")
    kind = entry.get("type")
    if kind not in corpora.names():
        raise fail(f"type: must be one of {', '.join(corpora.names())} (got {kind!r})")
    ctype = corpora.get(kind)
    allowed = (*COMMON_KEYS, *ctype.keys)
    unknown = [k for k in entry if k not in allowed]
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (a {kind} corpus takes {', '.join(allowed)})")
    if "dump" in ctype.keys:
        files = entry.get("dump")
        if not isinstance(files, str) or not files:
            raise fail("dump: must name the dump file")
        files = (files,)
        if "files" in entry:
            raise fail("a wikipedia corpus names its dump: (not files:)")
    else:
        files = entry.get("files")
        files = (files,) if isinstance(files, str) else files
        if not isinstance(files, (list, tuple)) or not files or not all(isinstance(f, str) and f for f in files):
            raise fail("files: must be a path or pattern, or a list of them")
    fields = {}
    for key in ("text", "id"):
        if key in entry:
            if not isinstance(entry[key], str) or not entry[key]:
                raise fail(f"{key}: must name a column or key")
            fields[key] = entry[key]
    where = None
    if "where" in entry:
        if not isinstance(entry["where"], str):
            raise fail(f"where: must be a filter as text, such as \"int_score >= 3\" (got {entry['where']!r})")
        try:
            where = parse(entry["where"])
        except BertdataError as err:
            raise fail(str(err)) from None
    language = entry.get("language", "en")
    if not isinstance(language, str) or not re.fullmatch(r"[a-z]{2,3}(-[a-z]+)?", language):
        raise fail(f"language: must be a language code such as en or de (got {language!r})")
    min_tokens = entry.get("min_tokens", 0)
    if isinstance(min_tokens, bool) or not isinstance(min_tokens, int) or min_tokens < 0:
        raise fail(f"min_tokens: must be a whole number of 0 or more (got {min_tokens!r})")
    repeat = entry.get("repeat", 1)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= MAX_REPEAT:
        raise fail(f"repeat: must be a whole number from 1 to {MAX_REPEAT} (got {repeat!r})")
    index = entry.get("index")
    if index is not None and not isinstance(index, str):
        raise fail("index: must name the multistream index file")
    return CorpusSpec(name, kind, tuple(files), where=where, language=language, min_tokens=min_tokens,
                      repeat=repeat, index=index, **fields)


def _mix(path: str, mix, defined: list[str]) -> tuple[tuple[str, float], ...] | None:
    if mix is None:
        return None
    if not isinstance(mix, dict) or not mix:
        raise BertdataError(f"{path}: mix: must give corpora their shares, as {{edu: 0.7, c4: 0.3}}")
    for name, share in mix.items():
        if str(name) not in defined:
            raise BertdataError(f"{path}: mix: names {name!r}, which corpora: does not define "
                                f"(it defines {', '.join(defined)})")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not share > 0 or share != share \
                or share == float("inf"):
            raise BertdataError(f"{path}: mix: {name}'s share must be a positive number (got {share!r})")
    total = sum(mix.values())
    return tuple((str(name), mix[name] / total) for name in defined if name in mix)
